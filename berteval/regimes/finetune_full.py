"""`--regime finetune-full` (span QA): every weight of the encoder and the span head trained.

The yardstick for the parameter-efficient recipes: the same data, schedule and evaluation as
`--regime finetune` (LoRA), with the `full` recipe of `berteval.qa.recipes`. Its 90 MB of
weights are not saved (committed artifacts stay under 5 MiB), so its records carry no artifact.
"""

from __future__ import annotations

from ..qa.recipes import FULL
from ..qa.regimes import SpanFinetune
from ..tasks.base import SPAN
from .base import Regime

REGIME = Regime(
    "finetune-full",
    "span QA: every weight of the encoder and the span head fine-tuned (a yardstick; too large to commit)",
    {SPAN: lambda: SpanFinetune(FULL)},
)
