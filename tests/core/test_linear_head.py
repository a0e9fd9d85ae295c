"""The probe's solver: the exact optimum of scikit-learn's objective, along the C grid."""

import numpy as np
import pytest

from berteval.heads import probe
from berteval.heads.newton_logistic import fit_path


def _problem(n=600, d=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, size=d) + rng.normal(size=d)
    y = (x @ rng.normal(size=d) + rng.normal(size=n) * 2 > 0).astype(int)
    return x, y


@pytest.mark.parametrize("c", [0.01, 0.1, 1.0])
def test_newton_path_matches_scikit_learn_at_a_tight_tolerance(c):
    from sklearn.linear_model import LogisticRegression

    x, y = _problem()
    xs = (x - x.mean(0)) / x.std(0)
    w, b, steps = fit_path(xs, y, (0.01, 0.1, 1.0))[c]
    ref = LogisticRegression(C=c, tol=1e-10, max_iter=10_000).fit(xs, y)
    np.testing.assert_allclose(w, ref.coef_[0], atol=1e-5)
    assert b == pytest.approx(ref.intercept_[0], abs=1e-5) and steps < 20


def test_probe_head_is_one_affine_map_on_raw_vectors():
    x, y = _problem()
    res = probe.fit_probe(x, y, x[:50], seed=0)
    assert res.chosen_c in probe.C_GRID and set(res.heldout_accuracy) == set(probe.C_GRID)
    np.testing.assert_array_equal(res.head.proba(x[:50]).argmax(1), res.pred)
    assert res.head.weight.shape == (1, x.shape[1]) and 0.5 < res.heldout_accuracy[res.chosen_c] <= 1.0


def test_more_than_two_classes_use_the_multinomial_fit():
    x, _ = _problem()
    y = np.digitize(x[:, 0], np.quantile(x[:, 0], [1 / 3, 2 / 3]))  # three classes from one feature
    res = probe.fit_probe(x, y, x[:30], seed=1)
    assert res.proba.shape == (30, 3) and res.head.weight.shape == (3, x.shape[1])
