"""Findings written from the records: one sentence per task, model and regime, generated, never typed.

Each sentence names the best last-layer head (its mean over seeds), then its margin over every
other head: the mean of the per-seed differences (paired by seed: the same seed means the same
held-out slice or training order) with its 95% Student-t interval (it measures how much the
margin moves between seeds, not the sampling of the evaluation set), and the paired test as the rank
bands read it (McNemar, the largest p over seeds, Holm-adjusted within the group; see bands.py).
For example: "SST-2, frozen probe, all-MiniLM-L6-v2: `mean` 0.809, ahead of `max` by 2.1 points
[95% CI 1.6, 2.7] (Holm p = 0.52, not significant) and of `cls` by 4.3 points [...] (Holm p = 0.012)."
Change a record and the sentence changes (tests/leaderboard/test_leaderboard.py does). Pure functions.
"""

from __future__ import annotations

import math

import pandas as pd

from berteval.record_lookup import short_name
from berteval.stats import summarise

from . import bands, data
from .figures.style import fmt, metric_scale
from .labels import metric_name, reading_order, regime_name, task_name


def points(diff: float, scale: float) -> float:
    # A difference of accuracies (0-1) reads as percentage points; SQuAD's EM/F1 already are.
    return diff * 100 if scale == 1 else diff


def _order(keys):
    """Reading order: tasks and regimes in their registries' order, models alphabetically."""
    return reading_order(keys)


def findings(df: pd.DataFrame, tests: pd.DataFrame | None = None) -> list[dict]:
    """[{task, model, regime, sentence, best, n_heads, steady_not_significant}] in reading order (task, model,
    regime). `tests`: the last-layer pair tests (bands.pair_tests) when the caller has them already, computed
    from `df` otherwise. `steady_not_significant`: a margin whose interval excludes 0 sits beside "not
    significant" (`as_markdown` then says why both hold)."""
    if df is None or df.empty or "value" not in df:
        return []
    main = data.main_setups(df)
    main = main[main["layer"] == -1]
    if main.empty:
        return []
    tests = bands.pair_tests(df, "last") if tests is None else tests
    out = []
    groups = {k: g for k, g in main.groupby(["task", "model", "regime"], sort=False)}
    usual = {task: data.usual_train(g) for task, g in main.groupby("task", sort=False)}
    for key in _order(groups):
        task, model, regime = key
        g = groups[key]
        agg = data.aggregate(g).sort_values("mean", ascending=False, kind="stable")
        scale = metric_scale(agg["mean"])
        metric = agg["main_metric"].iloc[0]
        best = agg.iloc[0]
        seeds = int(best["n_seeds"])
        head = (f"{task_name(task)}, {regime_name(regime)}, {short_name(model)}: `{best['pooling']}` "
                f"{'' if metric == 'accuracy' else metric_name(metric) + ' '}"
                f"{fmt(best['mean'], scale)}{data.trained_on(best['n_train'], usual[task])}")
        if len(agg) == 1:
            sentence = f"{head} (the only head measured here; {seeds} seed{'s' if seeds != 1 else ''})."
        else:
            t = tests[(tests["task"] == task) & (tests["model"] == model) & (tests["regime"] == regime)]
            parts = [_margin(g, best, other, scale, t) for _, other in agg.iloc[1:].iterrows()]
            sentence = f"{head}, ahead of " + _join([parts[0]] + [f"of {x}" for x in parts[1:]]) + "."
        out.append({"task": task, "model": model, "regime": regime, "sentence": sentence,
                    "best": best["pooling"], "n_heads": len(agg), "steady_not_significant": STEADY in sentence})
    return out


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _margin(g: pd.DataFrame, best: pd.Series, other: pd.Series, scale: float, tests: pd.DataFrame) -> str:
    a = g[g["pooling"] == best["pooling"]].set_index("seed")["value"]
    b = g[g["pooling"] == other["pooling"]].set_index("seed")["value"]
    common = sorted(set(a.index) & set(b.index))
    diff = summarise(points(a[s] - b[s], scale) for s in common)
    if diff.n == 0:  # no shared seed: the difference of the means, unpaired
        text = f"`{other['pooling']}` by {points(best['mean'] - other['mean'], scale):.1f} points (no shared seed)"
    else:
        text = f"`{other['pooling']}` by {diff.mean:.1f} points"
        if diff.n > 1 and not math.isnan(diff.ci95_low):
            text += f" [95% CI {diff.ci95_low:.1f}, {diff.ci95_high:.1f}]"
    ha, hb = bands.head_label(best["pooling"], -1), bands.head_label(other["pooling"], -1)
    h1, h2 = sorted((ha, hb))
    row = tests[(tests["head_1"] == h1) & (tests["head_2"] == h2)]
    if row.empty:
        return text + " (no paired test)"
    r = row.iloc[0]
    p_holm = float(r["p_holm"])
    p = "Holm p < 0.001" if p_holm < 0.001 else f"Holm p = {p_holm:.3f}"
    if r["separated"]:
        return text + f" ({p})"
    steady = diff.n > 1 and not math.isnan(diff.ci95_low) and (diff.ci95_low > 0 or diff.ci95_high < 0)
    return text + f" ({p}, not significant{STEADY if steady else ''})"


# Marks "not significant" beside an interval that excludes 0; WHY says, once, how both can hold.
STEADY = "†"
WHY = ("† The interval excludes 0 and the test says not significant: both hold. The 95% CI is a t-interval over "
       "seeds, so it measures how much the margin varies from seed to seed (every seed scores the same dev "
       "examples); the Holm-adjusted McNemar test asks whether those dev examples separate the two heads, "
       "counting only the examples they disagree on and correcting for every pair compared.")


def as_markdown(items: list[dict]) -> str:
    if not items:
        return "No findings yet: no records with a last-layer head."
    text = "\n".join(f"- {f['sentence']}" for f in items)
    return text + (f"\n\n{WHY}" if any(f.get("steady_not_significant") for f in items) else "")
