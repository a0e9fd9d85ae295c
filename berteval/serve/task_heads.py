"""The app's classifiers: the committed probe heads of SST-2 and the GLUE pair tasks, one per pooling, run live.

A visitor picks a task (SST-2 sentiment, MRPC paraphrase, RTE entailment, STS-B similarity), types a
sentence or a pair, and sees what a head reading `cls`, `pooler` or `mean` makes of it. The heads
are not retrained here: each is the affine map a `berteval run --task <task>` probe saved (the logit
of class 1 on the raw pooled vector; for STS-B, the ridge regression's score), chosen by the store's
one rule for committed artifacts (last layer, the setup trained on the most examples, its best seed),
so the page shows exactly the heads whose dev figures the leaderboard reports. A pair is read as
BERT reads one, `[CLS] A [SEP] B [SEP]`. One forward pass feeds every head.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .. import features, models
from ..errors import BertevalError
from ..metrics import METRICS
from ..pooling import POOLINGS
from ..store import Store
from ..tasks import get
from ..tasks.base import REGRESSION_KINDS, SENTENCE


@dataclass(frozen=True)
class PageTask:
    """A task as the Classify tab offers it."""

    name: str  # the berteval task
    title: str  # what the task picker shows
    question: str  # what the head answers, in words
    labels: tuple[str, ...]  # shown names in label-id order (class 1 is what the head's logit is for); () = a score
    score_range: tuple[float, float] | None = None  # a regression's scale

    @property
    def label(self) -> str:
        """The task's own short name ("SST-2", "STS-B")."""
        return get(self.name).label

    @property
    def pair(self) -> bool:
        return get(self.name).kind != SENTENCE

    @property
    def regression(self) -> bool:
        return get(self.name).kind in REGRESSION_KINDS


# The tasks the Classify tab offers, in its order.
PAGE_TASKS: dict[str, PageTask] = {t.name: t for t in (
    PageTask("sst2", "SST-2 sentiment", "is the sentence positive or negative?", ("negative", "positive")),
    PageTask("mrpc", "MRPC paraphrase", "does B say what A says?", ("not a paraphrase", "paraphrase")),
    PageTask("rte", "RTE entailment", "does A entail B?", ("entailment", "not entailment")),
    PageTask("stsb", "STS-B similarity", "how similar are A and B, from 0 (unrelated) to 5 (the same meaning)?",
             (), (0.0, 5.0)),
)}


def page_task(name: str) -> PageTask:
    try:
        return PAGE_TASKS[name]
    except KeyError:
        raise BertevalError(f"Classify offers {', '.join(t.title for t in PAGE_TASKS.values())}; "
                            f"{name!r} is none of them.") from None


@dataclass(frozen=True)
class Baseline:
    """What a head must beat to say anything: always answering the dev set's majority class (a classifier,
    compared on the same dev examples by an exact McNemar test), or chance, Pearson 0 (a score)."""

    what: str  # in words: "always answering “paraphrase”", "chance (Pearson 0)"
    value: float  # the baseline's dev figure in the head's own metric (0-1 accuracy, or x100 Pearson)
    p_value: float  # the head against it: McNemar (classifier) or the correlation's test (score), one-sided
    beaten: bool  # the head's dev figure is above it and the difference is not chance (p < 0.05)


@dataclass
class TaskHead:
    """One affine head on one pooled vector: committed by a run, or a quick probe trained here on demand."""

    task: str
    pooling: str
    weight: np.ndarray  # (1, width): logit of class 1, or the score of a regression
    bias: np.ndarray  # (1,)
    metrics: dict  # its dev figures, {metric: value}
    main_metric: str
    mean_main: float  # the main metric's mean over the seeds of the same setup
    n_seeds: int
    n_train: int
    max_length: int
    seed: int = 0
    run_id: str | None = None  # the committed record behind it; None for a quick probe
    n_eval: int = 0
    baseline: Baseline | None = None  # None: not measured (a quick probe, a record without its predictions)
    regime: str = "probe"  # what trained it: a probe (weight, bias), or a fine-tune served as an adapter
    encoder: str = ""  # a fine-tune's encoder, as the Encoder box names it (it answers whatever the box holds)
    adapter: str = ""  # a fine-tune's adapter folder (`serve.tuned`)

    @property
    def dev_value(self) -> float:
        return float(self.metrics[self.main_metric])

    def figures(self) -> str:
        """Its dev figures in words: "accuracy 0.8200" or "Pearson x100 81.2, Spearman x100 80.9"."""
        return ", ".join(f"{METRICS[m].label} {_number(v)}" for m, v in self.metrics.items() if m in METRICS)

    def seeds_mean(self) -> str:
        """The main metric's mean over the seeds, in words: "mean accuracy over 5 seeds 0.8103", "mean Pearson x100
        over 3 seeds 44.9" (a 0-100 metric in its own figures' precision)."""
        name = METRICS[self.main_metric].label if self.main_metric in METRICS else self.main_metric
        if self.n_seeds == 1:
            return "one seed committed"
        return f"mean {name} over {self.n_seeds} seeds {_number(self.mean_main)}"


SIGNIFICANT = 0.05


def baseline(task: str, predictions: dict) -> Baseline | None:
    """The head of a record against the majority class or chance on its own dev predictions
    ({"label": gold, "pred": its labels or scores}); None where they do not say."""
    from scipy import stats as sps

    gold, pred = np.asarray(predictions.get("label") or []), np.asarray(predictions.get("pred") or [])
    if gold.size < 2 or gold.shape != pred.shape:
        return None
    if get(task).kind in REGRESSION_KINDS:
        r = sps.pearsonr(pred.astype(float), gold.astype(float), alternative="greater")
        return Baseline("chance (Pearson 0)", 0.0, float(r.pvalue), bool(r.statistic > 0 and r.pvalue < SIGNIFICANT))
    values, counts = np.unique(gold, return_counts=True)
    majority = int(values[counts.argmax()])
    head_right, base_right = pred == gold, gold == majority
    only_head, only_base = int((head_right & ~base_right).sum()), int((~head_right & base_right).sum())
    p = 1.0 if only_head + only_base == 0 else float(
        sps.binomtest(only_head, only_head + only_base, 0.5, alternative="greater").pvalue)
    labels = get(task).labels or ()
    name = labels[majority] if majority < len(labels) else str(majority)
    page = PAGE_TASKS.get(task)
    name = page.labels[majority] if page and majority < len(page.labels) else name
    return Baseline(f"always answering “{name}”", float(base_right.mean()), p,
                    bool(only_head > only_base and p < SIGNIFICANT))


def baseline_of(store: Store, rec) -> Baseline | None:
    """`baseline` of a committed record, from its predictions file (None where it has none)."""
    import json

    if not rec.predictions_file or not store.has_file(rec.predictions_file):
        return None
    return baseline(rec.task, json.loads(store.inside(rec.predictions_file).read_text()))


@dataclass(frozen=True)
class BestMeasured:
    """The best head the records measure for a task (any encoder, regime and reading, last layer)."""

    model: str
    pooling: str
    regime: str
    mean: float  # main metric, mean over its seeds
    n_seeds: int
    metric: str


def best_measured(task: str, store: Store | None = None) -> BestMeasured | None:
    """The setup with the best mean main metric over its seeds (at least 2 seeds, last layer, the task's current
    version), from the committed records."""
    from .. import stats

    recs = [r for r in (store or Store()).read(task)[0] if r.layer == -1 and r.task_version == get(task).version]
    groups: dict[tuple, list] = {}
    for r in recs:
        groups.setdefault((r.model, r.pooling, r.regime, r.n_train), []).append(r)
    scored = [(stats.summarise(x.main_value for x in rs).mean, rs) for rs in groups.values() if len(rs) >= 2]
    if not scored:
        return None
    mean, rs = max(scored, key=lambda t: (t[0], t[1][0].model))
    return BestMeasured(rs[0].model, rs[0].pooling, rs[0].regime, mean, len(rs), rs[0].main_metric)


def best_beating(task: str, pooling: str, store: Store | None = None) -> tuple[str, TaskHead] | None:
    """Among every encoder's committed probe heads of `task` reading `pooling` (the one the page serves per
    encoder: `Store.best`), the best by dev figure of those that beat the majority class or chance:
    (its model id, the head, without weights), or None where none does."""
    store = store or Store()
    spec = get(task)
    found = []
    for model_id, revision in {(r.model, r.model_revision) for r in store.read(task)[0]}:
        best = store.best(task, model_id=model_id, revision=revision, version=spec.version, regime="probe",
                          artifact="head_file", pooling=pooling, layer=-1)
        base = baseline_of(store, best.record) if best is not None else None
        if base is not None and base.beaten:
            rec = best.record
            found.append((model_id, TaskHead(task, pooling, np.zeros((1, 0)), np.zeros(1), dict(rec.metrics),
                                             rec.main_metric, best.mean, best.n_seeds, rec.n_train, 0, rec.seed,
                                             rec.run_id, rec.n_eval, base)))
    return max(found, key=lambda f: (f[1].dev_value, f[0]), default=None)


def _number(value: float) -> str:
    return f"{value:.4f}" if abs(value) <= 1.0 else f"{value:.1f}"


class NoCommittedHeads(BertevalError):
    """No committed probe head of this task for this model revision."""


def no_heads_message(model_id: str, task: str) -> str:
    t = get(task)
    return (f"No committed {t.label} probe head for {model_id} yet: its records have not been run and committed. "
            f"Pick another task, or an encoder the leaderboard has {t.label} records for.")


def committed_heads(model: models.LoadedModel, store: Store | None = None, task: str = "sst2") -> dict[str, TaskHead]:
    """{pooling: head} for this exact model revision and task, in pooling-registry order (a BertevalError
    in the page's words when there is none)."""
    store = store or Store()
    spec = get(task)
    heads = {}
    for name in POOLINGS:
        found = store.best(task, model_id=model.model_id, revision=model.revision, version=spec.version,
                           regime="probe", artifact="head_file", pooling=name, layer=-1)
        if found is None:
            continue
        rec, head = found.record, np.load(found.path)
        if head["weight"].shape[0] != 1:  # every page task is binary or a score; another head is not shown
            continue
        heads[name] = TaskHead(
            task=task, pooling=name, weight=head["weight"], bias=head["bias"], metrics=dict(rec.metrics),
            main_metric=rec.main_metric, mean_main=found.mean, n_seeds=found.n_seeds, n_train=rec.n_train,
            max_length=int(rec.config.get("max_length") or 128), seed=rec.seed, run_id=rec.run_id, n_eval=rec.n_eval,
            baseline=baseline_of(store, rec))
    if not heads:
        raise NoCommittedHeads(no_heads_message(model.model_id, task))
    return heads


def max_length(heads: dict[str, TaskHead]) -> int:
    """The tokens one forward pass reads for all the heads: the longest any of them was trained with."""
    return max(h.max_length for h in heads.values())


def outputs(model: models.LoadedModel, heads: dict[str, TaskHead], text, dtype: str = "fp32") -> dict[str, float]:
    """{pooling: P(class 1)} (or the score, for a regression) for one sentence or pair under every head, from one
    forward pass (the page: fp32)."""
    if not heads:
        return {}
    vecs = features.encode(model, [text], data_sha256="live", poolings=list(heads), layers=[-1],
                           max_length=max_length(heads), use_cache=False, progress=False, dtype=dtype).vectors
    out = {}
    for name, head in heads.items():
        value = float((vecs[(name, -1)] @ head.weight.T + head.bias)[0, 0])  # (1, W) @ (W, 1)
        out[name] = value if get(head.task).kind in REGRESSION_KINDS else float(1.0 / (1.0 + np.exp(-value)))
    return out


def p_positive(model: models.LoadedModel, heads: dict[str, TaskHead], text: str, dtype: str = "fp32") -> dict[str, float]:
    """SST-2's heads: {pooling: P(positive)} for one sentence."""
    return outputs(model, heads, text, dtype)


@dataclass
class CheckpointHead:
    """A checkpoint's own sequence-classification head (e.g. a hub model fine-tuned on SST-2), as it ships."""

    model: object  # *ForSequenceClassification
    labels: list[str]  # its id2label, in id order
    reads: str = "its own pooled vector (as the checkpoint was fine-tuned)"


def checkpoint_head(loaded: models.LoadedModel) -> CheckpointHead | None:
    """The checkpoint's own trained sequence-classification head, or None (no such head, or one transformers
    would initialise at random)."""
    archs = getattr(loaded.encoder.config, "architectures", None) or []
    if not any(a.endswith("ForSequenceClassification") for a in archs) or loaded.derived_from is not None:
        return None
    from transformers import AutoModelForSequenceClassification

    model, missing = models.load_with_head(loaded, AutoModelForSequenceClassification)
    if any(not k.startswith(model.base_model_prefix + ".") for k in missing):  # the head itself is missing
        return None
    id2label = getattr(model.config, "id2label", None) or {}
    labels = [str(id2label.get(i, f"label {i}")) for i in range(int(model.config.num_labels))]
    return CheckpointHead(model.eval(), labels)


CHECKPOINT_MAX_LENGTH = 128  # tokens the checkpoint's own head reads, on the page and when its dev figure is measured


def checkpoint_logits(loaded: models.LoadedModel, head: CheckpointHead, texts: list) -> np.ndarray:
    """The head's logits for a batch of sentences (or (A, B) pairs): (N, C)."""
    import torch

    from .. import devices

    cols = [list(t) for t in zip(*texts)] if texts and isinstance(texts[0], tuple) else [list(texts)]
    enc = devices.to(dict(loaded.tokenizer(*cols, truncation=True, max_length=CHECKPOINT_MAX_LENGTH, padding=True,
                                           return_tensors="pt")))
    with torch.inference_mode():
        return head.model(**enc).logits.float().cpu().numpy()  # (N, C)


def checkpoint_probabilities(loaded: models.LoadedModel, head: CheckpointHead, text) -> dict[str, float]:
    logits = checkpoint_logits(loaded, head, [text])[0]  # (C,)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    return {label: float(p[i]) for i, label in enumerate(head.labels)}


def sst2_label_map(labels: list[str]) -> tuple[dict[int, int], str] | None:
    """{checkpoint class id: SST-2 label (0 negative, 1 positive)} for scoring the head on SST-2, and how it was
    read ("" where by name); None where its labels are not sentiment. Named labels are read by name
    ("NEGATIVE", "pos", ...); a two-label head with unnamed labels ("LABEL_0", "LABEL_1") is read in GLUE SST-2's order, and said so."""
    named = {}
    for i, label in enumerate(labels):
        word = label.strip().lower()
        if word.startswith("neg"):
            named[i] = 0
        elif word.startswith("pos"):
            named[i] = 1
    if set(named.values()) == {0, 1}:
        return named, ""
    if len(labels) == 2 and all(re.fullmatch(r"(label[ _]?)?[01]", x.strip().lower()) for x in labels):
        return {0: 0, 1: 1}, ("its labels are unnamed: label 0 read as negative and label 1 as positive "
                              "(GLUE SST-2's order)")
    return None
