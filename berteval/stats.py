"""Statistics across seeds and between poolings.

Across seeds: mean, sample standard deviation and a 95% Student-t interval for the
mean. Between two heads scored on the same examples: McNemar's exact test on the
discordant pairs (examples one head gets right and the other wrong), the standard
paired test for two classifiers on one test set.
"""

from __future__ import annotations

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


def summarise(values) -> SeedSummary:
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        return SeedSummary(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if x.size == 1:
        return SeedSummary(1, mean, 0.0, math.nan, math.nan)
    std = float(x.std(ddof=1))
    half = float(sps.t.ppf(0.975, x.size - 1)) * std / math.sqrt(x.size)
    return SeedSummary(int(x.size), mean, std, mean - half, mean + half)


def mcnemar_exact(correct_a, correct_b) -> dict:
    """Exact McNemar test: under H0 the discordant pairs split 50/50 (two-sided binomial)."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs predictions on the same examples ({a.shape} vs {b.shape})")
    only_a = int((a & ~b).sum())
    only_b = int((~a & b).sum())
    n = only_a + only_b
    p = 1.0 if n == 0 else float(sps.binomtest(only_a, n, 0.5).pvalue)
    return {"test": "mcnemar_exact", "n_only_self_correct": only_a, "n_only_other_correct": only_b, "p_value": p}
