"""Rank bands: within one model, task and regime, heads the evidence cannot separate share a band.

The evidence is the records' own paired tests (McNemar's exact test, same seed, same examples).
Per pair of heads:
- **seeds combined by the largest p-value** (an intersection-union test): the pair counts as
  separated only if it is separated in every seed it was tested in, in the same direction. The
  seeds of a run share the evaluation examples (only the probe's held-out slice or the training
  order differs), so their tests are far from independent; pooling the discordant counts or
  Fisher-combining the p-values would count each sentence up to three times. The largest p is
  valid whatever the dependence, and conservative.
- **Holm's correction over all pairs of the group** (family-wise error 5%): a group with 8 heads
  has 28 pairs, and uncorrected, one in twenty null pairs would look significant. Holm controls
  the family-wise error under any dependence between the tests (they share heads and examples),
  and is uniformly more powerful than Bonferroni; Benjamini-Hochberg would control only the false
  discovery rate, and a leaderboard claim "A beats B" should hold for every pair claimed.
A head's band is 1 + the number of heads that are separated from it and better (the "rank upper
bound" of arena-style leaderboards): heads in band 1 are not beaten by anything measured. Groups
without paired tests (e.g. a task whose predictions carry no per-example correctness) fall back
to 95% intervals across seeds: two heads are separated when their intervals do not overlap.
Pure functions of the records frame; never raise on partial data.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import data

ALPHA = 0.05
GROUP = ["model", "task", "regime"]
PAIR_COLUMNS = [*GROUP, "head_1", "head_2", "seeds", "p_seeds", "p_max", "p_holm", "only_1", "only_2",
                "consistent", "better", "separated"]
BAND_COLUMNS = [*GROUP, "pooling", "layer", "layer_label", "head", "mean", "n_seeds", "band", "n_better", "basis",
                "n_train", "dtype"]


def holm(pvalues) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: the i-th smallest of m is multiplied by
    m - i + 1, made monotone, capped at 1."""
    p = np.asarray(list(pvalues), dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def head_label(pooling: str, layer) -> str:
    return f"{pooling}@{data.layer_label(int(layer))}"


def pair_tests(df: pd.DataFrame, family: str = "last") -> pd.DataFrame:
    """One row per pair of heads per model x task x regime (main setup): per-seed p-values, the combined
    (largest) p, its Holm adjustment within the family, summed discordant counts, and which head is better.

    `family="last"`: the heads read from the last layer (the pooling ablation, what the leaderboard ranks);
    `family="all"`: every head of the group, other layers included (the layer ablation)."""
    if df is None or df.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    p = data.pairs(data.main_setups(df))
    if family == "last" and not p.empty:
        p = p[(p["a_layer"] == -1) & (p["b_layer"] == -1)]
    if p.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    rows = []
    for keys, g in p.groupby(GROUP, sort=False):
        pairs: dict[tuple[str, str], list[tuple[int, float, int, int, int]]] = {}
        for r in g.itertuples():
            h1, h2 = sorted((r.a, r.b))
            x1, x2 = (r.a_only, r.b_only) if r.a == h1 else (r.b_only, r.a_only)
            ahead = int(r.direction) if r.a == h1 else -int(r.direction)  # +1: head_1 ahead (counts or a bootstrap)
            count = lambda x: 0 if x is None or (isinstance(x, float) and np.isnan(x)) else int(x)  # noqa: E731
            pairs.setdefault((h1, h2), []).append((int(r.seed), float(r.p_value), count(x1), count(x2), ahead))
        group_rows = []
        for (h1, h2), tests in sorted(pairs.items()):
            tests.sort()
            signs = {ahead for *_, ahead in tests}
            consistent = len(signs) == 1 and 0 not in signs
            p_max = max(pv for _, pv, *_ in tests) if consistent else 1.0
            better = (h1 if signs == {1} else h2) if consistent else ""
            group_rows.append({**dict(zip(GROUP, keys)), "head_1": h1, "head_2": h2,
                               "seeds": ", ".join(str(s) for s, *_ in tests),
                               "p_seeds": ", ".join(f"{pv:.3g}" for _, pv, *_ in tests), "p_max": p_max,
                               "only_1": sum(t[2] for t in tests), "only_2": sum(t[3] for t in tests),
                               "consistent": consistent, "better": better})
        for row, adj in zip(group_rows, holm(r["p_max"] for r in group_rows)):
            row["p_holm"] = adj
            row["separated"] = bool(row["consistent"] and adj < ALPHA)
        rows.extend(group_rows)
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def rank_bands(df: pd.DataFrame) -> pd.DataFrame:
    """Every head of every model x task x regime (main setup) with its band (1 = nothing measured beats it)."""
    if df is None or df.empty:
        return pd.DataFrame(columns=BAND_COLUMNS)
    agg = data.aggregate(data.main_setups(df))
    if agg.empty:
        return pd.DataFrame(columns=BAND_COLUMNS)
    tests = {"last": pair_tests(df, "last"), "all": pair_tests(df, "all")}
    rows = []
    for keys, whole in agg.groupby(GROUP, sort=False):
        whole = whole.assign(head=[head_label(p, lay) for p, lay in zip(whole["pooling"], whole["layer"])])
        # Last-layer heads are ranked among themselves (the pooling ablation); heads read from other layers
        # among every head of the group (the layer ablation), each family with its own Holm correction.
        rows.extend(_family_bands(keys, whole[whole["layer"] == -1], tests["last"], "last", only=None))
        rows.extend(_family_bands(keys, whole, tests["all"], "all", only=set(whole.loc[whole["layer"] != -1, "head"])))
    return pd.DataFrame(rows, columns=BAND_COLUMNS)


def _family_bands(keys, g: pd.DataFrame, tests: pd.DataFrame, family: str, only: set | None) -> list[dict]:
    rows = []
    if g.empty or (only is not None and not only):
        return rows
    t = tests[(tests["model"] == keys[0]) & (tests["task"] == keys[1]) & (tests["regime"] == keys[2])]
    separated = {(r.head_1, r.head_2): r.better for r in t.itertuples() if r.separated}
    where = "last-layer heads" if family == "last" else "heads at every layer"
    if len(g) == 1:
        basis = "the only head measured"
    elif not t.empty:
        basis = f"paired tests among {where} (McNemar, largest p over seeds, Holm over {len(t)} pairs)"
    else:
        basis = f"95% intervals across seeds among {where} (no paired tests)"
        separated = _interval_separations(g)
    for r in g.itertuples():
        if only is not None and r.head not in only:
            continue
        # Heads separated from this one and better than it.
        n_better = sum(separated.get(tuple(sorted((r.head, o.head)))) == o.head for o in g.itertuples() if o.head != r.head)
        rows.append({**dict(zip(GROUP, keys)), "pooling": r.pooling, "layer": r.layer, "layer_label": r.layer_label,
                     "head": r.head, "mean": r.mean, "n_seeds": r.n_seeds, "band": 1 + n_better,
                     "n_better": n_better, "basis": basis, "n_train": r.n_train, "dtype": r.dtype})
    return rows


def _interval_separations(g: pd.DataFrame) -> dict[tuple[str, str], str]:
    out = {}
    rows = list(g.itertuples())
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if any(math.isnan(x) for x in (a.ci95_low, a.ci95_high, b.ci95_low, b.ci95_high)):
                continue
            if a.ci95_low > b.ci95_high or b.ci95_low > a.ci95_high:
                out[tuple(sorted((a.head, b.head)))] = a.head if a.mean > b.mean else b.head
    return out

