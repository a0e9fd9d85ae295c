"""The Classify tab's fine-tuned heads: committed LoRA adapters (`--regime finetune-lora`), served where they
beat the chosen encoder's probe.

The probes the tab serves per encoder and reading are frozen-encoder heads; on MRPC and RTE none on
`default` beats always answering the majority class. A fine-tune does, and `--regime finetune-lora`
keeps its weights (`berteval.heads.pooled_adapter`). For a task and a reading, the served head is the
best committed head that can be served, by its record's dev figure: the chosen encoder's probe, or
the best committed adapter reading the same vector on any offline encoder (the adapter runs on the
encoder it was trained from, whatever the Encoder box holds; the page says which). Adapters are
found through the store like every committed artifact (`Store.best`, artifact `adapter_dir`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .. import models
from ..store import Store
from ..tasks import get
from .task_heads import TaskHead, baseline_of

REGIME = "finetune-lora"


def committed(task: str, pooling: str, offline: list[str], store: Store | None = None) -> TaskHead | None:
    """The best committed adapter of `task` reading `pooling` (last layer) on an encoder the page offers: a
    TaskHead without weights (its `adapter` names the folder), or None where none is committed."""
    from ..heads import pooled_adapter

    store = store or Store()
    spec = get(task)
    found = []
    for model_id, revision in sorted({(r.model, r.model_revision) for r in store.read(task)[0] if r.regime == REGIME}):
        best = store.best(task, model_id=model_id, revision=revision, version=spec.version, regime=REGIME,
                          artifact="adapter_dir", pooling=pooling, layer=-1)
        if best is None:
            continue
        info = pooled_adapter.read_info(best.path)
        name = info["base_model_arg"]
        if name not in offline or models.identify(name).revision != revision:
            continue  # trained on an encoder the page does not offer, or on another revision of it
        rec = best.record
        found.append(TaskHead(task, pooling, np.zeros((1, 0)), np.zeros(1), dict(rec.metrics), rec.main_metric,
                              best.mean, best.n_seeds, rec.n_train, int(info["max_length"]), rec.seed, rec.run_id,
                              rec.n_eval, baseline_of(store, rec), regime=REGIME, encoder=name,
                              adapter=str(best.path)))
    return max(found, key=lambda h: (h.dev_value, h.run_id), default=None)


def served(probe: TaskHead | None, adapter: TaskHead | None) -> TaskHead | None:
    """The head that answers: the adapter where its record's dev figure is above the probe's (or there is no
    probe), else the probe."""
    if adapter is not None and (probe is None or adapter.dev_value > probe.dev_value):
        return adapter
    return probe


@functools.lru_cache(maxsize=8)
def _load(folder: str):
    from ..heads import pooled_adapter

    return pooled_adapter.load(Path(folder))


def load(head: TaskHead):
    """The adapter `head` names, loaded once per folder while the server runs (`pooled_adapter.PooledAdapter`)."""
    return _load(head.adapter)


def output(head: TaskHead, text, dtype: str = "fp32") -> float:
    """P(class 1), or the score of a regression, of the adapter `head` names for one sentence or (A, B) pair."""
    from ..heads.classifier import predict

    loaded = load(head)
    out = predict(loaded.model, loaded.loaded, [text], head.max_length, dtype)  # (1, labels) or (1, 1)
    return float(out[0, 0]) if out.shape[1] == 1 else float(out[0, 1])
