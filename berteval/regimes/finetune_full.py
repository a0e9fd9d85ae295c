"""`--regime finetune-full` (span QA): every weight of the encoder and the span head trained.

The yardstick for the parameter-efficient tunings: the same data, schedule and evaluation as
`--regime finetune` (LoRA), with the `full` tuning of `berteval.regimes.tuning`. Its 90 MB of
weights are not saved (committed artifacts stay under 5 MiB), so its records carry no artifact.
"""

from __future__ import annotations

from ..tasks.base import SPAN
from .base import Regime
from .span import SpanFinetune
from .tuning import FULL

REGIME = Regime(
    "finetune-full", "fully fine-tuned",
    "span QA: every weight of the encoder and the span head fine-tuned (a yardstick; too large to commit)",
    {SPAN: lambda: SpanFinetune(FULL)},
)
