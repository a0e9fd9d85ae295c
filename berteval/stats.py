"""Statistics across seeds and between poolings.

Across seeds: mean, sample standard deviation and a 95% Student-t interval for the
mean. Between two heads scored on the same examples: McNemar's exact test on the
discordant pairs (examples one head gets right and the other wrong), the standard
paired test for two classifiers on one test set.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class SeedSummary:
    n: int
    mean: float
    std: float  # sample std (ddof=1); 0 for one seed
    ci95_low: float
    ci95_high: float


@functools.lru_cache(maxsize=64)
def _t975(dof: int) -> float:
    # scipy's ppf costs ~1 ms a call; the leaderboard summarises hundreds of cells with 2-10 seeds each
    return float(sps.t.ppf(0.975, dof))


def summarise(values) -> SeedSummary:
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        return SeedSummary(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if x.size == 1:
        return SeedSummary(1, mean, 0.0, math.nan, math.nan)
    std = float(x.std(ddof=1))
    half = _t975(x.size - 1) * std / math.sqrt(x.size)
    return SeedSummary(int(x.size), mean, std, mean - half, mean + half)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """The exact McNemar p-value from the discordant counts alone: under H0 they split 50/50 (two-sided
    binomial). For callers that hold counts, not per-example correctness (`berteval disagree`)."""
    n = only_a + only_b
    return 1.0 if n == 0 else float(sps.binomtest(only_a, n, 0.5).pvalue)


def mcnemar_exact(correct_a, correct_b) -> dict:
    """Exact McNemar test on per-example correctness of two heads over the same examples."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs predictions on the same examples ({a.shape} vs {b.shape})")
    only_a = int((a & ~b).sum())
    only_b = int((~a & b).sum())
    return {"test": "mcnemar_exact", "n_only_self_correct": only_a, "n_only_other_correct": only_b,
            "p_value": mcnemar_exact_p(only_a, only_b)}


def paired_bootstrap(pred_a, pred_b, gold, metric, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Paired bootstrap over examples for a metric that is not a mean of per-example scores (a correlation):
    resample the examples with replacement, the same rows for both systems, and count how often the sign of
    metric(a) - metric(b) flips from the observed one. Two-sided p = 2 x that share (capped at 1), the rule
    of Koehn 2004 / Berg-Kirkpatrick et al. 2012 for paired system comparisons."""
    a, b, y = (np.asarray(v, dtype=np.float64) for v in (pred_a, pred_b, gold))
    if not (a.shape == b.shape == y.shape) or a.size < 3:
        raise ValueError(f"paired bootstrap needs equal-length series ({a.shape}, {b.shape}, {y.shape})")
    observed = metric(a, y) - metric(b, y)
    rng = np.random.default_rng(seed)
    diffs = np.empty(n_resamples)
    for k in range(n_resamples):
        idx = rng.integers(0, len(y), len(y))
        diffs[k] = metric(a[idx], y[idx]) - metric(b[idx], y[idx])
    flipped = float(np.mean(diffs <= 0)) if observed > 0 else float(np.mean(diffs >= 0))
    return {"test": "paired_bootstrap", "difference": float(observed), "n_resamples": n_resamples, "seed": seed,
            "p_value": min(1.0, 2.0 * flipped)}
