"""The app's next-sentence head: the model's own pretrained NSP head where it has one, else
the best committed NSP probe for the model, and every answer says which of the two answered.

The probe (a logistic regression on one pooled vector, trained by `berteval run --task
nsp`) is chosen by the store's one rule for committed artifacts. Label order, BERT's:
index 0 = IsNext, 1 = NotNext; the probe's head gives the logit of class 1, so
P(IsNext) = 1 - sigmoid(logit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import features, models
from ..errors import BertevalError
from ..heads.nsp import PAIR_MAX_LENGTH, pretrained_proba
from ..nsp_pairs import IS_NEXT, LABELS, NOT_NEXT
from ..store import Store
from ..tasks import get
from .reading import Reading, measure

PRETRAINED_SOURCE = "pretrained NSP head"


@dataclass
class NSPPrediction:
    p_is_next: float  # probability that B follows A
    label: str  # "IsNext" or "NotNext"
    source: str  # which head answered, in words a user reads
    reading: Reading | None = None  # how much of the pair the head read (pairs past max_length are cut)


@dataclass
class DemoHead:
    """What the app calls: the model plus the NSP head it will answer with."""

    model: models.LoadedModel
    source: str  # "pretrained NSP head" or "trained probe on <pooling>, not BERT's pre-training head"
    pooling: str | None = None  # probe only: the pooled vector the probe reads ...
    layer: int = -1  # ... at this hidden-state index
    weight: np.ndarray | None = None  # (1, W): logit of class 1 = NotNext
    bias: np.ndarray | None = None  # (1,)
    max_length: int = PAIR_MAX_LENGTH
    run_id: str | None = None  # the record the probe head comes from
    dev_accuracy: float | None = None  # that pooling/layer's mean accuracy across seeds

    def predict(self, a: str, b: str) -> NSPPrediction:
        return predict_is_next(self, a, b)


def load_demo_head(model: str = models.DEFAULT, store: Store | None = None) -> DemoHead:
    """The checkpoint's pretrained NSP head where it has one, else the best committed probe head."""
    loaded = models.load(model)
    if loaded.nsp_model is not None:
        return DemoHead(loaded, PRETRAINED_SOURCE)
    store = store or Store()
    task = get("nsp")
    found = store.best(task.name, model_id=loaded.model_id, revision=loaded.revision, version=task.version,
                       regime="probe", artifact="head_file")
    if found is None:
        raise BertevalError(
            f"model {loaded.model_id!r} has no pretrained NSP head and {store.records_path(task.name)} holds no probe "
            f"head for it. Train one: python -m berteval run --task nsp --model ... --data-dir ../shared/data "
            f"--out {store.root}"
        )
    rec, head = found.record, np.load(found.path)
    return DemoHead(
        loaded, f"trained probe on {rec.pooling}, not BERT's pre-training head",
        pooling=rec.pooling, layer=rec.layer, weight=head["weight"], bias=head["bias"],
        max_length=int(rec.config.get("max_length") or PAIR_MAX_LENGTH), run_id=rec.run_id, dev_accuracy=found.mean,
    )


def predict_is_next(head: DemoHead, a: str, b: str) -> NSPPrediction:
    """P(B follows A) from the head, with the head's name."""
    if head.weight is None:
        p_is_next = float(pretrained_proba(head.model, [(a, b)], head.max_length)[0, IS_NEXT])
    else:
        vec = features.encode(head.model, [(a, b)], data_sha256="live", poolings=[head.pooling], layers=[head.layer],
                              max_length=head.max_length, use_cache=False, progress=False).vectors
        logit = float((vec[(head.pooling, head.layer)] @ head.weight.T + head.bias)[0, 0])  # class 1 = NotNext
        p_is_next = float(1.0 - 1.0 / (1.0 + np.exp(-logit)))
    return NSPPrediction(p_is_next, LABELS[IS_NEXT] if p_is_next >= 0.5 else LABELS[NOT_NEXT], head.source,
                         measure(head.model.tokenizer, (a, b), head.max_length))
