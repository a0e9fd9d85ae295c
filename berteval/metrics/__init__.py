"""The metrics registry: what a task reports and how each number is computed.

A task names its metrics here (`TaskSpec.metrics`); the regimes compute them through
`score`, so a task with a new metric is one entry here and one line in its spec. SQuAD's
exact match and F1 are written from the published definition in `metrics.squad`.
Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Metric:
    name: str
    description: str
    fn: Callable[..., float]  # keyword inputs of its family (pred/label, or predictions/golds) -> value
    greater_is_better: bool = True
    scale: str = "0-1"  # "0-1" or "0-100": how the leaderboard labels its axis


def _accuracy(pred, label) -> float:
    pred, label = np.asarray(pred), np.asarray(label)
    if pred.shape != label.shape or pred.size == 0:
        raise ValueError(f"accuracy needs as many predictions as labels ({pred.shape} vs {label.shape})")
    return float((pred == label).mean())


def _squad(key: str) -> Callable[..., float]:
    def fn(predictions: dict[str, str], golds: dict[str, list[str]]) -> float:
        from .squad import score

        return score(predictions, golds)[key]

    return fn


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("accuracy", "share of examples classified correctly", _accuracy),
    Metric("exact_match", "SQuAD v1.1 exact match after normalisation, max over gold answers", _squad("exact_match"),
           scale="0-100"),
    Metric("f1", "SQuAD v1.1 token F1 after normalisation, max over gold answers", _squad("f1"), scale="0-100"),
)}


def compute(names, **inputs) -> dict[str, float]:
    """{metric: value} for the named metrics on one set of predictions."""
    return {name: METRICS[name].fn(**inputs) for name in names}
