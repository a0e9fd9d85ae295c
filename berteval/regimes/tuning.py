"""Which weights a span-QA fine-tune moves, and what of it is kept: one `Tuning` each.

- `lora`: LoRA r=16 on every encoder linear layer plus the span head (the committed `finetune`
  regime's tuning; its adapter is 2.6 MiB).
- `lora-plus`: LoRA r=24 on the same layers, plus every bias and every LayerNorm trained, plus
  the span head: closer to a full fine-tune, still one file under the 5 MiB that committed
  artifacts may take (3.9 MiB).
- `full`: every weight of the encoder and the head (22.6 M parameters, 90 MB in fp32). Measured
  so the other two can be judged against it; its weights are too large to commit, so it saves
  no artifact and the app cannot serve it.

Each regime that fine-tunes a span head names one tuning (`berteval.regimes.span.SpanFinetune`);
its `describe()` is part of the run's identity. (Not to be confused with a derivation recipe,
`berteval.derive.base.Recipe`: how a derived encoder is made.) Torch-free at import time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Every linear layer of every encoder block: attention q/k/v/output and the feed-forward pair.
ENCODER_LINEARS = (r".*encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|"
                   r"intermediate\.dense|output\.dense)")
ARTIFACT_LIMIT_MB = 5.0  # committed artifacts stay small: each file under 5 MiB


@dataclass(frozen=True)
class Tuning:
    name: str
    trained: str  # in words, for records and the page
    defaults: dict  # epochs, lr, batch_size
    lora: dict | None = None  # peft LoraConfig arguments; None = every weight trains
    committable: bool = True  # whether its artifact fits the limit (and so is saved)
    extra: dict = field(default_factory=dict)  # further identity entries

    def describe(self) -> dict:
        """What defines the tuning, for the run's identity and the record's config."""
        out = {"trained": self.trained, **self.extra}
        if self.lora is not None:
            out["lora"] = {k: self.lora[k] for k in ("r", "lora_alpha", "lora_dropout")}
        return out

    def build(self, model):
        """The module to train: a peft wrapper around `model`, or `model` itself (every weight)."""
        if self.lora is None:
            model.requires_grad_(True)
            return model
        from peft import LoraConfig, get_peft_model

        return get_peft_model(model, LoraConfig(**self.lora))

    def for_eval(self, trained):
        """The trained model as a plain *ForQuestionAnswering (LoRA merged into the weights)."""
        return trained.merge_and_unload() if self.lora is not None else trained

    def save(self, trained, folder: Path, info: dict) -> bool:
        """Write the artifact the app loads (adapter + span head); False when the tuning keeps none."""
        if not self.committable:
            return False
        from ..qa.inference import save_adapter

        save_adapter(trained, folder, {**info, "recipe": self.name})  # the key every committed adapter carries
        return True


LORA = Tuning(
    "lora", "LoRA adapters on every encoder linear layer + span head",
    {"epochs": 2.0, "lr": 5e-4, "batch_size": 32},
    # dropout on the LoRA input doubled step time on CPU
    lora={"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": ENCODER_LINEARS,
          "modules_to_save": ["qa_outputs"]})
LORA_PLUS = Tuning(
    "lora-plus", "LoRA adapters on every encoder linear layer + every bias and LayerNorm + span head",
    {"epochs": 2.0, "lr": 5e-4, "batch_size": 32},
    lora={"r": 24, "lora_alpha": 48, "lora_dropout": 0.0, "target_modules": ENCODER_LINEARS, "bias": "lora_only",
          "modules_to_save": ["qa_outputs", "LayerNorm"]},
    extra={"also_trained": ["every bias", "every LayerNorm"]})
FULL = Tuning(
    "full", "every weight: encoder (embeddings included) + span head",
    # A full fine-tune moves 22.6 M weights, not 0.7 M: a smaller step than LoRA's, as in BERT's recipe
    # (which used 3e-5 to 5e-5 for thousands of steps; here a few hundred steps of a 6-layer model).
    {"epochs": 2.0, "lr": 1e-4, "batch_size": 32},
    committable=False)

TUNINGS = {t.name: t for t in (LORA, LORA_PLUS, FULL)}
