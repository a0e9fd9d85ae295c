"""GLUE's pair-task metrics, proved against scipy and scikit-learn on the same inputs, through the shipped
evaluate modules (offline) as the runs compute them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import f1_score

from berteval import metrics


@pytest.mark.parametrize("seed", range(5))
def test_binary_f1_equals_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    label = rng.integers(0, 2, 200)
    pred = np.where(rng.random(200) < 0.7, label, 1 - label)
    assert metrics.binary_f1_score(pred, label) == pytest.approx(f1_score(label, pred))
    got = metrics.compute(["accuracy", "binary_f1"], pred=pred, label=label)
    assert got["binary_f1"] == pytest.approx(f1_score(label, pred))
    assert got["accuracy"] == pytest.approx((pred == label).mean())


def test_binary_f1_edge_cases():
    assert metrics.binary_f1_score([0, 0], [0, 0]) == 0.0 == f1_score([0, 0], [0, 0], zero_division=0)
    assert metrics.binary_f1_score([1, 1], [1, 1]) == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_correlations_equal_scipy(seed):
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(0, 5, 300) * 5) / 5  # STS-B style scores with many ties
    pred = gold + rng.normal(0, 1.2, 300)
    pred[::7] = pred[0]  # ties in the predictions too
    got = metrics.compute(["pearson", "spearman"], pred=pred, label=gold)
    assert got["pearson"] == pytest.approx(100 * stats.pearsonr(pred, gold).statistic, abs=1e-9)
    assert got["spearman"] == pytest.approx(100 * stats.spearmanr(pred, gold).statistic, abs=1e-9)


def test_correlations_refuse_short_or_unequal_series():
    with pytest.raises(ValueError):
        metrics.pearson([1.0], [2.0])
    with pytest.raises(ValueError):
        metrics.spearman([1.0, 2.0], [1.0, 2.0, 3.0])
