"""The app's sentence classifier: the committed SST-2 probe heads, one per pooling, run live.

A visitor types a sentence and sees what a head reading `cls`, `pooler` or `mean` makes
of it. The heads are not retrained here: each is the affine map a `berteval run --task
sst2` probe saved (logit of class 1 = positive on the raw pooled vector), chosen by the
store's one rule for committed artifacts (last layer, the setup trained on the most
sentences, its best seed), so the page shows exactly the heads whose dev accuracy the
leaderboard reports. One forward pass feeds every head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import features, models
from ..errors import BertevalError
from ..pooling import POOLINGS
from ..store import Store
from ..tasks import get

TASK = "sst2"
LABELS = ("negative", "positive")  # SST-2's label order: the head's logit is for index 1


@dataclass
class SentimentHead:
    pooling: str
    weight: np.ndarray  # (1, width): logit of "positive"
    bias: np.ndarray  # (1,)
    run_id: str  # the record this head was saved by
    seed: int
    dev_accuracy: float  # that record's accuracy on SST-2 dev
    mean_dev_accuracy: float  # the mean over the seeds of the same setup
    n_seeds: int
    n_train: int
    max_length: int


def committed_heads(model: models.LoadedModel, store: Store | None = None) -> dict[str, SentimentHead]:
    """{pooling: head} for this exact model revision, in pooling-registry order."""
    store = store or Store()
    heads = {}
    for name in POOLINGS:
        found = store.best(TASK, model_id=model.model_id, revision=model.revision, version=get(TASK).version,
                           regime="probe", artifact="head_file", pooling=name, layer=-1)
        if found is None:
            continue
        rec, head = found.record, np.load(found.path)
        heads[name] = SentimentHead(
            pooling=name, weight=head["weight"], bias=head["bias"], run_id=rec.run_id, seed=rec.seed,
            dev_accuracy=rec.main_value, mean_dev_accuracy=found.mean, n_seeds=found.n_seeds, n_train=rec.n_train,
            max_length=int(rec.config.get("max_length") or 128))
    if not heads:
        raise BertevalError(
            f"no committed SST-2 probe heads for {model.model_id!r} (revision {model.revision}) in "
            f"{store.records_path(TASK)}. Train them: python -m berteval run --task sst2 --model ... "
            f"--pooling cls,pooler,mean --data-dir ../shared/data --out {store.root}"
        )
    return heads


def max_length(heads: dict[str, SentimentHead]) -> int:
    """The tokens one forward pass reads for all the heads: the longest any of them was trained with."""
    return max(h.max_length for h in heads.values())


def p_positive(model: models.LoadedModel, heads: dict[str, SentimentHead], text: str,
               dtype: str = "fp32") -> dict[str, float]:
    """{pooling: P(positive)} for one sentence under every head, from one forward pass (the page: fp32)."""
    if not heads:
        return {}
    vecs = features.encode(model, [text], data_sha256="live", poolings=list(heads), layers=[-1],
                           max_length=max_length(heads), use_cache=False, progress=False, dtype=dtype).vectors
    out = {}
    for name, head in heads.items():
        logit = float((vecs[(name, -1)] @ head.weight.T + head.bias)[0, 0])  # (1, W) @ (W, 1)
        out[name] = float(1.0 / (1.0 + np.exp(-logit)))
    return out
