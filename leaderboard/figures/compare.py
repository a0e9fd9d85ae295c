"""Models side by side: a model x pooling view per task and regime, and what NSP training does to the pooler.

- `model_pooling_table` / `model_pooling_figure`: each task and regime its own panel (metric scales
  differ), poolings along x, one colour per model, mean and 95% interval across seeds; published
  reference numbers (`references.py`) drawn apart, as grey open stars, never ranked.
- `pooler_minus_cls` / `pooler_effect_figure`: the effect "`pooler` minus `cls`" per model, task and
  regime, paired by seed (the two heads of one seed share the held-out slice or training order):
  the per-seed differences, their mean and 95% Student-t interval. On an encoder whose pooler was
  never trained it should be about zero; an NSP-trained pooler is where it can move.
Pure functions of the records frame; each figure fails soft.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from berteval.record_lookup import short_name
from berteval.stats import summarise

from .. import cells, data, references
from ..labels import reading_order, regime_name, task_name
from .base import fails_soft, hover, message, panels, usable, y_range
from .style import FONT, LEGEND_SIDE, colour, fmt, metric_scale, metric_title

MODEL_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
REFERENCE_COLOUR = "#7f7f7f"
EFFECT_COLUMNS = ["model", "task", "regime", "n_seeds", "seeds", "diffs", "differences", "mean", "ci95_low",
                  "ci95_high", "scale", "pair_ids"]  # diffs, differences, mean and the interval in points


def _last_layer_main(df: pd.DataFrame) -> pd.DataFrame:
    main = cells.main_rows(df)
    return main[main["layer"] == -1]


def model_pooling_table(df: pd.DataFrame) -> pd.DataFrame:
    """Rows task x regime x model, one column per pooling: 'mean ± std (n)' at the last layer (main setup)."""
    if df is None or df.empty:
        return pd.DataFrame(columns=["task", "regime", "model"])
    agg = cells.select(df, "main", -1)
    if agg.empty:
        return pd.DataFrame(columns=["task", "regime", "model"])
    cols = data.pooling_order(agg["pooling"])
    rows = []
    for (task, regime, model), g in agg.groupby(["task", "regime", "model"], sort=True):
        scale = metric_scale(g["mean"])
        row = {"task": task, "regime": regime, "model": model}
        for _, r in g.iterrows():
            row[r["pooling"]] = f"{fmt(r['mean'], scale)} ± {fmt(r['std'], scale)} ({r['n_seeds']})"
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.reindex(columns=["task", "regime", "model", *cols]).fillna("—")


def _model_colours(models) -> dict[str, str]:
    return {m: MODEL_COLOURS[i % len(MODEL_COLOURS)] for i, m in enumerate(sorted(models))}


@fails_soft("Models side by side")
def model_pooling_figure(df: pd.DataFrame, with_references: bool = True) -> go.Figure:
    title = ("Models side by side: main metric per pooling (last layer), mean and 95% CI across seeds<br>"
             "<sup>grey open stars: published numbers for context (other models and protocols), never ranked</sup>")
    df, msg = usable(df, title)
    if msg:
        return msg
    agg = cells.select(df, "main", -1)
    if agg.empty:
        return message(title, "no last-layer records")
    keys = reading_order(agg.groupby(["task", "regime"]).groups, ("task", "regime"))
    fig = panels([f"{task_name(t)} · {regime_name(r)}" for t, r in keys])
    colours = _model_colours(agg["model"].unique())
    shown = set()
    for i, (task, regime) in enumerate(keys, start=1):
        panel = agg[(agg["task"] == task) & (agg["regime"] == regime)]
        scale = metric_scale(panel["mean"])
        refs = references.references(task, regime) if with_references else references.references().iloc[0:0]
        refs = refs[refs["metric"] == panel["main_metric"].iloc[0]]
        order = data.pooling_order(list(panel["pooling"]) + list(refs["pooling"]))
        for model, g in panel.groupby("model", sort=True):
            g = g.assign(_k=g["pooling"].map(order.index)).sort_values("_k")
            fig.add_trace(go.Scatter(
                x=g["pooling"], y=g["mean"], mode="markers", name=short_name(model), legendgroup=model,
                offsetgroup=model, showlegend=model not in shown,
                marker=dict(size=13, symbol="diamond", color=colours[model], line=dict(width=1, color="#222")),
                error_y=dict(type="data", array=g["ci95_half"].fillna(0), visible=True, thickness=2, width=8),
                hovertext=[f"<b>{short_name(model)}</b><br>{hover(r, scale)}" for _, r in g.iterrows()],
                hoverinfo="text", customdata=g["run_ids"].tolist()), row=i, col=1)
            shown.add(model)
        if not refs.empty:
            fig.add_trace(go.Scatter(
                x=refs["pooling"], y=refs["shown"], mode="markers", name="published (not ranked)",
                legendgroup="published", offsetgroup="published", showlegend="published" not in shown,
                marker=dict(size=15, symbol="star-open", color=REFERENCE_COLOUR, line=dict(width=2)),
                hovertext=[f"<b>published</b>: {r['model']}<br>{r['metric']} {r['value']} ("
                           f"{references.source(r['citation'], r['where'])})<br>{r['note']}" for _, r in refs.iterrows()],
                hoverinfo="text"), row=i, col=1)
            shown.add("published")
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order, title_text="pooling",
                         row=i, col=1)
        fig.update_yaxes(title_text=metric_title(panel["main_metric"].iloc[0], panel["mean"]),
                         range=y_range(panel, scale, refs["shown"]), row=i, col=1)
    fig.update_layout(title=dict(text=title), scattermode="group", scattergap=0.5,
                      legend=dict(LEGEND_SIDE, title="model"))
    return fig


def pooler_minus_cls(df: pd.DataFrame) -> pd.DataFrame:
    """The effect `pooler` - `cls` per model x task x regime (last layer, main setup), paired by seed."""
    if df is None or df.empty:
        return pd.DataFrame(columns=EFFECT_COLUMNS)
    main = _last_layer_main(df)
    rows = []
    for (model, task, regime), g in main.groupby(["model", "task", "regime"], sort=True):
        p = g[g["pooling"] == "pooler"].set_index("seed")["value"]
        c = g[g["pooling"] == "cls"].set_index("seed")["value"]
        p_ids, c_ids = (g[g["pooling"] == h].set_index("seed")["run_id"] for h in ("pooler", "cls"))
        seeds = sorted(set(p.index) & set(c.index))
        if not seeds:
            continue
        scale = metric_scale(g["value"])
        # In points: accuracy differences (0-1) times 100; SQuAD's EM/F1 already are points.
        factor = 100.0 if scale == 1 else 1.0
        diffs = [float(p[s] - c[s]) * factor for s in seeds]
        s = summarise(diffs)
        rows.append({"model": model, "task": task, "regime": regime, "n_seeds": s.n,
                     "seeds": ", ".join(str(x) for x in seeds), "diffs": diffs,
                     "differences": ", ".join(f"{d:+.2f}" for d in diffs),
                     "mean": s.mean, "ci95_low": s.ci95_low, "ci95_high": s.ci95_high, "scale": scale,
                     # the two heads' records, seed order: which table rows the difference is taken between
                     "pair_ids": [" ".join(ids[s] for s in seeds) for ids in (p_ids, c_ids)]})
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


@fails_soft("pooler minus cls")
def pooler_effect_figure(df: pd.DataFrame) -> go.Figure:
    title = ("Does a trained pooler help? pooler minus cls per model and regime, paired by seed<br>"
             "<sup>dot: mean of the per-seed differences (points); bar: 95% t-interval; open circles: each seed; "
             "0 = no difference</sup>")
    eff = pooler_minus_cls(df)
    if eff.empty:
        return message(title, "no model has both `pooler` and `cls` records at the last layer for one seed")
    eff = eff.assign(label=[f"{task_name(t)} · {regime_name(r)} · {short_name(m)}"
                            for m, t, r in zip(eff["model"], eff["task"], eff["regime"])])
    eff = eff.sort_values(["task", "regime", "model"], ascending=False, kind="stable")
    mean, lo, hi = eff["mean"], eff["ci95_low"], eff["ci95_high"]
    fig = go.Figure()
    fig.add_vline(x=0, line=dict(color="#888", dash="dash"))
    fig.add_trace(go.Scatter(
        x=mean, y=eff["label"], mode="markers", name="mean difference", showlegend=False,
        marker=dict(size=12, color=colour("pooler"), line=dict(width=1, color="#222")),
        error_x=dict(type="data", symmetric=False, array=(hi - mean).fillna(0), arrayminus=(mean - lo).fillna(0),
                     thickness=2, width=6, color="#222"),
        hovertext=[f"<b>{r.label}</b><br>pooler − cls = {m:+.2f} points"
                   + (f", 95% CI [{a:+.2f}, {b:+.2f}]" if not math.isnan(a) else ", one seed: no interval")
                   + f"<br>per seed ({r.seeds}): {r.differences}"
                   for r, m, a, b in zip(eff.itertuples(), mean, lo, hi)],
        hoverinfo="text", customdata=eff["pair_ids"].tolist()))
    for r in eff.itertuples():
        fig.add_trace(go.Scatter(x=r.diffs, y=[r.label] * len(r.diffs), mode="markers", showlegend=False,
                                 hoverinfo="skip", marker=dict(symbol="circle-open", size=8, color="#555")))
    fig.update_layout(title=dict(text=title), height=170 + 48 * len(eff), font=FONT, template="plotly_white",
                      margin=dict(l=330, r=40, t=100, b=60),
                      xaxis=dict(title="pooler − cls (points; + = the pooler reads better)", zeroline=False))
    return fig
