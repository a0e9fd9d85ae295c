"""Seed statistics and the paired test, against values worked out by hand."""

import math

import pytest

from berteval import stats


def test_summarise_mean_std_and_t_interval():
    s = stats.summarise([0.80, 0.82, 0.84])
    assert s.n == 3 and s.mean == pytest.approx(0.82)
    assert s.std == pytest.approx(0.02)
    half = 4.302652729911275 * 0.02 / math.sqrt(3)  # t(0.975, df=2)
    assert s.ci95_low == pytest.approx(0.82 - half) and s.ci95_high == pytest.approx(0.82 + half)


def test_summarise_single_seed_has_no_interval():
    s = stats.summarise([0.5])
    assert s.std == 0 and math.isnan(s.ci95_low)


def test_mcnemar_exact_known_case():
    # 10 discordant pairs, all in favour of A: two-sided p = 2 * 0.5**10
    a = [True] * 10 + [True] * 5 + [False] * 5
    b = [False] * 10 + [True] * 5 + [False] * 5
    t = stats.mcnemar_exact(a, b)
    assert t["n_only_self_correct"] == 10 and t["n_only_other_correct"] == 0
    assert t["p_value"] == pytest.approx(2 * 0.5**10)
    assert stats.mcnemar_exact(a, a)["p_value"] == 1.0
