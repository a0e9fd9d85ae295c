"""Frozen probe for a score (STS-B): a ridge regression on cached vectors.

The regression counterpart of `heads.probe`: standardised features, L2-penalised least squares
(scikit-learn's `Ridge`, exact), its penalty chosen on the same seeded held-out slice of *train*
(`probe.heldout_split`) by the held-out Pearson correlation, ties to the stronger penalty; dev is
touched once. The fitted head is one affine map on raw vectors (the standardisation folded in),
saved like the classifier probe's, so the app can apply it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .probe import LinearHead, _standardise, heldout_split

ALPHA_GRID = (1.0, 10.0, 100.0, 1000.0)


@dataclass
class RidgeResult:
    head: LinearHead  # weight (1, H): the predicted score = x @ weight.T + bias
    pred: np.ndarray  # (N_eval,) predicted scores
    chosen_alpha: float
    heldout_pearson: dict[float, float]
    n_train: int
    n_heldout: int


def fit_ridge(x_train: np.ndarray, y_train, x_eval: np.ndarray, seed: int, alpha_grid=ALPHA_GRID) -> RidgeResult:
    from sklearn.linear_model import Ridge

    from ..metrics import pearson

    y = np.asarray(y_train, dtype=np.float64)
    tr, ho = heldout_split(len(y), seed)
    xs, mean, scale = _standardise(x_train[tr])
    heads, scores = {}, {}
    for alpha in alpha_grid:
        reg = Ridge(alpha=alpha).fit(xs, y[tr])
        coef = reg.coef_[None, :] / scale
        head = LinearHead(coef, np.array([reg.intercept_ - float((reg.coef_ * mean / scale).sum())]))
        heads[alpha] = head
        scores[alpha] = pearson(head.logits(x_train[ho])[:, 0], y[ho])
    best = max(alpha_grid, key=lambda a: (scores[a], a))  # ties: the stronger penalty
    return RidgeResult(heads[best], heads[best].logits(x_eval)[:, 0], best, scores, len(tr), len(ho))
