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
from .task_heads import Baseline, baseline_of

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
    run_id: str | None = None  # the record behind the head's dev accuracy (a probe: the record its head comes from)
    dev_accuracy: float | None = None  # on the NSP dev pairs: a probe's setup, mean over seeds; a pretrained head's
    n_eval: int | None = None  # dev pairs behind dev_accuracy
    baseline: Baseline | None = None  # its record's dev predictions against the majority class (None: not scored)

    def reads(self, brief: bool = False) -> str:
        """Which vector the head reads, in words (`brief`: short enough for a table cell)."""
        if self.weight is None:
            return ("`pooler_output`, through its own pretrained NSP head" if brief else
                    "`pooler_output` (tanh(W·h_[CLS] + b)), through the checkpoint's own pretrained NSP head, Linear(H, 2)")
        layer = ("" if brief else " (last layer)") if self.layer == -1 else f" (hidden state {self.layer})"
        probe = "a probe" if brief else "a logistic-regression probe"
        return f"`{self.pooling}`{layer}, through {probe} trained on NSP pairs"

    def predict(self, a: str, b: str) -> NSPPrediction:
        return predict_is_next(self, a, b)


def pretrained_record(store: Store, loaded: models.LoadedModel):
    """The committed record that scored this revision's own NSP head on the dev pairs (None: not scored)."""
    task = get("nsp")
    found = [r for r in store.read(task.name)[0]
             if r.model == loaded.model_id and r.model_revision == loaded.revision and r.task_version == task.version
             and r.regime == "pretrained"]
    return max(found, key=lambda r: (r.n_eval, r.main_value, r.run_id)) if found else None


def no_head_message(model_id: str) -> str:
    return (f"{model_id} has no trained next-sentence head (transformers would attach a random one), and no NSP "
            f"probe is committed for it yet, so nothing here can answer for it.")


def load_demo_head(model: str = models.DEFAULT, store: Store | None = None) -> DemoHead:
    """The checkpoint's pretrained NSP head where it has one, else the best committed probe head."""
    loaded = models.load(model)
    store = store or Store()
    if loaded.nsp_model is not None:
        rec = pretrained_record(store, loaded)
        return DemoHead(loaded, PRETRAINED_SOURCE, run_id=rec.run_id if rec else None,
                        dev_accuracy=rec.main_value if rec else None, n_eval=rec.n_eval if rec else None,
                        baseline=baseline_of(store, rec) if rec else None)
    task = get("nsp")
    found = store.best(task.name, model_id=loaded.model_id, revision=loaded.revision, version=task.version,
                       regime="probe", artifact="head_file")
    if found is None:
        raise BertevalError(no_head_message(loaded.model_id))
    rec, head = found.record, np.load(found.path)
    return DemoHead(
        loaded, f"trained probe on {rec.pooling}, not BERT's pre-training head",
        pooling=rec.pooling, layer=rec.layer, weight=head["weight"], bias=head["bias"],
        max_length=int(rec.config.get("max_length") or PAIR_MAX_LENGTH), run_id=rec.run_id, dev_accuracy=found.mean,
        n_eval=rec.n_eval, baseline=baseline_of(store, rec),
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
