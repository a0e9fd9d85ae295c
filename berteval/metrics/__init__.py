"""The metrics registry: what a task reports and how each number is computed.

A task names its metrics here (`TaskSpec.metrics`); the regimes compute them through
`compute`, which runs the evaluate module each metric names (shipped beside this file and
loaded by local path, offline: `berteval.metrics.modules`). The definitions themselves are
berteval's own and torch-free: `accuracy_score` below and SQuAD's exact match and F1 in
`metrics.squad`, written from the published definitions; the evaluate modules call them,
so a record computed through evaluate equals one computed directly (tests/core/test_metrics.py
checks this on the committed predictions). A task with a new metric is one entry here, one
evaluate module folder, and one line in its spec. Importing this package is light; only
`compute` imports evaluate (and with it torch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


def accuracy_score(pred, label) -> float:
    """Share of predictions equal to their label."""
    pred, label = np.asarray(pred), np.asarray(label)
    if pred.shape != label.shape or pred.size == 0:
        raise ValueError(f"accuracy needs as many predictions as labels ({pred.shape} vs {label.shape})")
    return float((pred == label).mean())


def binary_f1_score(pred, label, positive: int = 1) -> float:
    """F1 of the `positive` class: 2 TP / (2 TP + FP + FN) (GLUE's MRPC F1, the paraphrase class); 0 when the
    class is never predicted nor present."""
    pred, label = np.asarray(pred), np.asarray(label)
    if pred.shape != label.shape or pred.size == 0:
        raise ValueError(f"F1 needs as many predictions as labels ({pred.shape} vs {label.shape})")
    tp = int(((pred == positive) & (label == positive)).sum())
    fp = int(((pred == positive) & (label != positive)).sum())
    fn = int(((pred != positive) & (label == positive)).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing their mean rank (what Spearman's coefficient ranks by)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    values, inverse = np.unique(x, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks)
    counts = np.bincount(inverse)
    return (sums / counts)[inverse]


def pearson(pred, label) -> float:
    """Pearson's r: the covariance over the product of the standard deviations."""
    x, y = np.asarray(pred, dtype=np.float64), np.asarray(label, dtype=np.float64)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"a correlation needs two equal-length series of 2+ values ({x.shape} vs {y.shape})")
    dx, dy = x - x.mean(), y - y.mean()
    denom = float(np.sqrt((dx * dx).sum() * (dy * dy).sum()))
    return float((dx * dy).sum() / denom) if denom else 0.0


def spearman(pred, label) -> float:
    """Spearman's rho: Pearson's r of the ranks (ties share their mean rank)."""
    x, y = np.asarray(pred, dtype=np.float64), np.asarray(label, dtype=np.float64)
    return pearson(_ranks(x), _ranks(y))


def _classification_inputs(pred, label) -> dict:
    return {"predictions": [int(x) for x in pred], "references": [int(x) for x in label]}


def _regression_inputs(pred, label) -> dict:
    return {"predictions": [float(x) for x in pred], "references": [float(x) for x in label]}


def _squad_inputs(predictions: dict[str, str], golds: dict[str, list[str]]) -> dict:
    # Every gold question counts; a question without a prediction scores 0 (an empty answer).
    if not golds:
        raise ValueError("no gold answers to score against")
    return {"predictions": [predictions.get(qid, "") for qid in golds],
            "references": [list(answers) for answers in golds.values()]}


@dataclass(frozen=True)
class Metric:
    name: str
    description: str
    module: str  # the evaluate module that computes it (a folder of berteval/metrics, see modules.NAMES)
    inputs: Callable[..., dict]  # keyword inputs of its family (pred/label, or predictions/golds) -> module inputs
    greater_is_better: bool = True
    scale: str = "0-1"  # "0-1" or "0-100": how the leaderboard labels its axis
    key: str = ""  # the module's output key, when it differs from the name
    label: str = ""  # how figures and sentences name it ("exact match"); empty = the name, underscores as spaces

    @property
    def output(self) -> str:
        return self.key or self.name


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("accuracy", "share of examples classified correctly", "accuracy", _classification_inputs,
           label="accuracy"),
    Metric("exact_match", "SQuAD v1.1 exact match after normalisation, max over gold answers", "squad_v1",
           _squad_inputs, scale="0-100", label="exact match"),
    Metric("f1", "SQuAD v1.1 token F1 after normalisation, max over gold answers", "squad_v1", _squad_inputs,
           scale="0-100", label="F1"),
    Metric("binary_f1", "F1 of the positive class (MRPC: the paraphrase class), 0-1", "binary_f1",
           _classification_inputs, key="f1", label="paraphrase F1"),
    Metric("pearson", "Pearson correlation of predicted and gold scores x 100 (GLUE's STS-B convention)",
           "correlation", _regression_inputs, scale="0-100", label="Pearson x100"),
    Metric("spearman", "Spearman rank correlation of predicted and gold scores x 100 (GLUE's convention)",
           "correlation", _regression_inputs, scale="0-100", label="Spearman x100"),
)}


def compute(names, **inputs) -> dict[str, float]:
    """{metric: value} for the named metrics on one set of predictions, each through its evaluate module
    (a module that reports several metrics, like SQuAD's EM and F1, runs once)."""
    from . import modules

    out: dict[str, float] = {}
    results: dict[str, dict] = {}
    for name in names:
        metric = METRICS[name]
        if metric.module not in results:
            results[metric.module] = modules.load(metric.module).compute(**metric.inputs(**inputs))
        out[name] = float(results[metric.module][metric.output])
    return out
