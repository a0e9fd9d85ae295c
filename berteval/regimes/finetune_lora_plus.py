"""`--regime finetune-lora-plus` (span QA): LoRA of higher rank plus every bias and LayerNorm.

Between `--regime finetune` (LoRA r=16) and `--regime finetune-full` (every weight): the
`lora-plus` tuning of `berteval.regimes.tuning`, whose artifact (3.9 MiB) can still be committed
and served by the app.
"""

from __future__ import annotations

from ..tasks.base import SPAN
from .base import Regime
from .span import SpanFinetune
from .tuning import LORA_PLUS

REGIME = Regime(
    "finetune-lora-plus", "fine-tuned (LoRA-plus)",
    "span QA: LoRA r=24 on every encoder linear layer + every bias and LayerNorm + span head (committable)",
    {SPAN: lambda: SpanFinetune(LORA_PLUS)},
)
