"""`--regime finetune-lora`: the pooled fine-tune of `finetune`, with LoRA on the encoder, its head kept.

`--regime finetune` trains every weight of the encoder and keeps none (90 MB per head), so the best
pair-task heads it measures cannot answer in the app. This regime runs the same protocol (the same
data: the whole train set up to the 4,000-example subset; the same seeded held-out slice of train
choosing the best of its 2 epochs; batch 32, warm-up, decay, length-grouped batches; dev scored once
at the end), but trains LoRA adapters (r=16) on every encoder linear layer and the pooler, plus the
pooled head, and saves them beside the record (`berteval.heads.pooled_adapter`: one folder under
`adapters/<task>/<run_id>`, about 2.7 MiB for MiniLM), which the app serves. Its lr is 5e-4, the
committed SQuAD LoRA adapters' (`berteval.regimes.tuning.LORA`): a low-rank update of 0.7 M weights
takes a larger step than the whole encoder's 1e-4, as it does there. Dev is predicted by the adapter
merged into the encoder: the model the app loads. A regime of its own, so its run ids never mix
with the full fine-tune's.
"""

from __future__ import annotations

from .. import pooling
from ..errors import BertevalError
from ..tasks.base import PAIR, PAIR_REGRESSION, SENTENCE
from .base import Cell, Prepared, Regime, hyperparameters
from .finetune import DEFAULTS, PooledFinetune

LORA_DEFAULTS = {**DEFAULTS, "lr": 5e-4}
TRAINED = "LoRA adapters (r=16) on every encoder linear layer and the pooler trained, the encoder itself frozen"


class PooledLoraFinetune(PooledFinetune):
    """`PooledFinetune` with LoRA: `tunable` wraps the classifier, `finish` saves the adapter and merges it."""

    trained = TRAINED

    def hyperparameters(self, run) -> dict:
        return hyperparameters(run.spec, LORA_DEFAULTS)

    def cells(self, run) -> list[Cell]:
        cells = super().cells(run)
        own = sorted({c.pooling for c in cells if pooling.POOLINGS[c.pooling].trained})
        if own:  # its parameters would train but not be saved with the adapter
            raise BertevalError(f"--regime finetune-lora saves the LoRA adapter and the head only: pooling "
                                f"{', '.join(own)} has parameters of its own; use --regime finetune for it")
        return cells

    def protocol(self, run, cell: Cell, train) -> dict:
        from ..heads import pooled_adapter

        lora = {k: pooled_adapter.LORA[k] for k in ("r", "lora_alpha", "lora_dropout", "target_modules")}
        return {**super().protocol(run, cell, train), "trained": TRAINED, "lora": lora}

    def tunable(self, model, cell: Cell):
        from ..heads import pooled_adapter

        return pooled_adapter.wrap(model)

    def finish(self, prep: Prepared, cell: Cell, run_id: str, trained) -> tuple:
        from ..heads import pooled_adapter

        run = prep.run
        rel = run.store.adapter_dir(run.task.name, run_id)
        info = {"base_model_arg": run.spec.model, "base_model": run.model.model_id,
                "base_revision": run.model.revision, "run_id": run_id, "task": run.task.name,
                "pooling": cell.pooling, "n_labels": prep.state["n_labels"], "regression": run.task.regression,
                "max_length": run.max_length, "lora": pooled_adapter.LORA, "recipe": "finetune-lora",
                "summary": f"{run.model.model_id}, {run.task.label} reading {cell.pooling}, seed {cell.seed}"}
        pooled_adapter.save(trained, run.store.root / rel, info)
        return trained.merge_and_unload(), {"adapter_dir": rel}


REGIME = Regime(
    "finetune-lora", "fine-tuned (LoRA)",
    "the finetune protocol with LoRA adapters on the encoder + the pooled head, saved beside the record (servable)",
    {SENTENCE: PooledLoraFinetune, PAIR: PooledLoraFinetune, PAIR_REGRESSION: PooledLoraFinetune},
)
