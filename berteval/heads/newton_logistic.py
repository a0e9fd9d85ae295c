"""Binary L2-regularised logistic regression, solved exactly along a path of C values.

The probe's objective is scikit-learn's: minimise 0.5 ||w||^2 + C sum_i logloss(y_i, x_i.w + b)
with the intercept b unpenalised, on standardised features. scikit-learn's lbfgs stops at
a gradient tolerance (1e-4) after hundreds of cheap steps in compiled loops that use one
core; here Newton's method takes a handful of steps, each one (d x d) Hessian product that
BLAS spreads over every core, and it is warm-started along the C grid (the optimum for
C = 0.01 is close to the one for 0.1), so three values of C cost little more than one.

Precision: gradients, objective and the Newton system are float64; only the Hessian's
(d, n) x (n, d) product runs in float32 (the costly part; an approximate Hessian still
converges to the exact optimum, because the gradient is exact). That also lets most
steps reuse the last Hessian product X'SX instead of paying for a new one (the one costly
part: 0.13 s of a 63,349 x 384 SST-2 fit here, against 8 ms for a gradient): a step keeps
it while it still shrinks the Newton decrement at least `FAST`-fold per step, or once the
decrement is under `REUSE_BELOW` of the objective (the point barely moves any more), and at
the first steps of the next C, which starts where the previous C ended. On SST-2's four
poolings (AMD EPYC, 2 threads) a path from zero then took 4-5 products in 13-17 Newton
steps (1.5 s a fit), one started at a sibling seed's optimum (`start`) 1-2 in 11-13
(0.55-0.84 s); recomputing X'SX at every step had taken 13 products, 3.1 s.
A backtracking line search keeps every step downhill. Stops when the Newton decrement is
below `tol` relative to the objective (far tighter than lbfgs' stop), so the solution is
the optimum, whatever the starting point (in objective value: along directions the data
hardly constrain, e.g. a near-constant feature, the weights of two starts may differ
while every prediction agrees).
"""

from __future__ import annotations

import numpy as np


def _objective(x, y, w, b: float, c: float) -> tuple[float, np.ndarray]:
    """(the objective at (w, b), the logits z = x w + b it was computed from, (n,))."""
    z = x @ w + b  # (n,)
    return float(0.5 * w @ w + c * np.sum(np.logaddexp(0.0, z) - y * z)), z


# X'SX is recomputed only when the last step with it shrank the Newton decrement less than FAST-fold
# (a stale curvature converging slowly) and that decrement is still above REUSE_BELOW of the objective.
REUSE_BELOW = 1e-6
FAST = 100.0


def fit_path(x: np.ndarray, y: np.ndarray, c_grid, tol: float = 1e-10, max_iter: int = 100,
             start: tuple[np.ndarray, float] | None = None) -> dict[float, tuple[np.ndarray, float, int]]:
    """{C: (w (d,), b, Newton steps)} for each C, solved in ascending order, each from the previous optimum;
    the smallest from `start` (w, b), e.g. the optimum of a near-identical problem, or from zero.
    x: (n, d) standardised float64; y: (n,) in {0, 1}."""
    import torch  # the Hessian product: torch's BLAS uses every core (or the GPU, berteval.devices)

    from .. import devices

    n, d = x.shape
    device = devices.current()
    x32 = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)  # (n, d)
    y = y.astype(np.float64)
    w, b = (np.array(start[0], dtype=np.float64), float(start[1])) if start is not None else (np.zeros(d), 0.0)
    xsx = xs = None  # X'SX (d, d) and X's (d,), S the curvature where they were last computed
    out = {}
    for c in sorted(c_grid):
        # A new C: its first steps reuse the curvature at the previous optimum (if any), where they start.
        decrement = before = np.inf  # the Newton decrement of the last step and of the one before it
        f0, z = _objective(x, y, w, b, c)  # kept from the accepted line-search point on later steps
        for step_no in range(1, max_iter + 1):
            p = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid, overflow-free
            r, s = p - y, p * (1.0 - p)  # residual and curvature, (n,)
            grad = np.concatenate([w + c * (x.T @ r), [c * r.sum()]])  # (d + 1,)
            slow = step_no > 2 and decrement * FAST > before and decrement >= REUSE_BELOW * max(1.0, abs(f0))
            if xsx is None or slow:
                weighted = x32 * torch.from_numpy(s.astype(np.float32)).to(device)[:, None]  # (n, d)
                xsx, xs, s_sum = (weighted.T @ x32).double().cpu().numpy(), x.T @ s, s.sum()
            hess = np.empty((d + 1, d + 1))
            hess[:d, :d] = c * xsx + np.eye(d)
            hess[:d, d] = hess[d, :d] = c * xs
            hess[d, d] = c * s_sum + 1e-12
            direction = np.linalg.solve(hess, grad)
            before, decrement = decrement, float(grad @ direction)
            t = 1.0
            while t > 1e-8:  # backtracking (Armijo): never a step uphill
                w1, b1 = w - t * direction[:d], b - t * direction[d]
                f1, z1 = _objective(x, y, w1, b1, c)
                if f1 <= f0 - 1e-4 * t * decrement:
                    break
                t *= 0.5
            w, b, f_prev, f0, z = w1, b1, f0, f1, z1
            if decrement < tol * max(1.0, abs(f_prev)):
                break
        out[c] = (w.copy(), float(b), step_no)
    return out
