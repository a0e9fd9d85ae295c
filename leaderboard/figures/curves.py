"""Curves from the records: learning curves, every layer, and span QA read from one vector.

Three figures for the wider ablations (issue 13), each a pure function of the records frame
(`data.load`), failing soft like every leaderboard figure:
- `learning_curves`: the main metric against the number of training examples the head was
  fit on (log x), one line per pooling and regime (probe solid, fine-tune dashed), the 95%
  interval across seeds as a band. A training size is a setup (`data.SETUP` holds n_train),
  so each point averages the seeds of one size and never mixes sizes.
- `every_layer`: the main metric against the hidden-state index for every pooling with
  records at two or more layers, in each model's main setup (its largest training set).
- `span_vector`: span QA's per-token head beside heads that read one pooled vector of the
  window, exact match and F1 with their intervals: what a single vector loses when the
  answer is a position.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from berteval.stats import summarise

from .. import cells, data
from ..labels import reading_order, regime_name, regime_rank
from .base import fails_soft, message, panel_title, panels, usable
from .style import LEGEND_SIDE, LEGEND_TOP, colour, fmt, metric_scale, metric_title

DASH = {"probe": "solid", "finetune": "dash"}  # other regimes: dotted
SPAN = "span"  # the per-token span head's pooling field
CURVE_COLUMNS = ("model", "task", "regime", "pooling", "layer", "seed", "value", "main_metric", "n_train", "dtype")


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    return f"rgba({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)}, {alpha})"


def _band(x: list, low: pd.Series, high: pd.Series, hue: str, group: str) -> go.Scatter:
    """The 95% interval as a filled polygon (out along the lower bound, back along the upper one)."""
    keep = low.notna().tolist()
    xs = [v for v, k in zip(x, keep) if k]
    lo, hi = low[low.notna()].tolist(), high[high.notna()].tolist()
    return go.Scatter(x=xs + xs[::-1], y=lo + hi[::-1], fill="toself", fillcolor=_rgba(hue, 0.14),
                      line=dict(width=0), hoverinfo="skip", showlegend=False, legendgroup=group, mode="lines")


def _point_hover(row: pd.Series, scale: float, x_text: str) -> str:
    ci = (f"95% CI [{fmt(row['ci95_low'], scale)}, {fmt(row['ci95_high'], scale)}]" if row["n_seeds"] > 1
          else "one seed: no interval")
    return (f"<b>{row['pooling']}</b> · {row['regime']} · {x_text}<br>{row['main_metric']} {fmt(row['mean'], scale)}"
            f" ± {fmt(row['std'], scale)} (std)<br>{ci}<br>{row['n_seeds']} seed(s): {row['seeds']} · {row['dtype']}")


def _lines(agg: pd.DataFrame, key: list[str], x: str) -> pd.DataFrame:
    """Rows of `agg` on lines of `key` with two or more distinct `x`; at a repeated x the main setup's cell, else the
    most-seeded one (every point is still a row of the table)."""
    agg = agg.sort_values(["main", "n_seeds"], ascending=False, kind="stable").drop_duplicates(key + [x])
    n = agg.groupby(key)[x].transform("nunique")
    return agg[n >= 2]


def _draw_line(fig, line: pd.DataFrame, x: list, name: str, dash: str, scale: float, x_text, row: int,
               shown: set) -> None:
    hue = colour(line["pooling"].iloc[0])
    if (line["n_seeds"] > 1).any():
        fig.add_trace(_band(x, line["ci95_low"], line["ci95_high"], hue, name), row=row, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=line["mean"], mode="lines+markers", name=name, legendgroup=name, showlegend=name not in shown,
        line=dict(color=hue, width=2.4, dash=dash), marker=dict(size=8, color=hue),
        hovertext=[_point_hover(r, scale, x_text(r)) for _, r in line.iterrows()], hoverinfo="text",
        customdata=line["run_ids"].tolist(),  # each point's table row (cells.py)
    ), row=row, col=1)
    shown.add(name)


@fails_soft("Learning curves")
def learning_curves(df: pd.DataFrame) -> go.Figure:
    """Main metric against training examples (log x), per pooling and regime, 95% interval bands across seeds."""
    title = ("Learning curves: dev score against the training examples the head was fit on (log scale)<br>"
             "<sup>lines: mean over seeds of one training size; bands: 95% interval across seeds; "
             "solid: frozen probe, dashed: fine-tuned</sup>")
    df, msg = usable(df, title, needed=CURVE_COLUMNS)
    if msg:
        return msg
    agg = cells.select(df[pd.to_numeric(df["n_train"]) > 0], "all", -1)  # every training size is a table row
    agg = _lines(agg, ["task", "model", "regime", "pooling", "dtype"], "n_train")
    if agg.empty:
        return message(title, "no learning-curve records: a pooling needs records at two or more training sizes "
                              "(`python -m berteval run ... --train-sizes 32,128,512,full`)")
    keys = reading_order(agg.groupby(["task", "model"]).groups, ("task", "model"))
    fig, shown = panels([panel_title(task, model) for task, model in keys], 420), set()
    dtypes = agg["dtype"].value_counts()
    for i, (task, model) in enumerate(keys, start=1):
        panel = agg[(agg["task"] == task) & (agg["model"] == model)]
        scale = metric_scale(panel["mean"])
        order = data.pooling_order(panel["pooling"])
        for (regime, pooling, dtype), line in sorted(panel.groupby(["regime", "pooling", "dtype"]),
                                                     key=lambda kv: (regime_rank(kv[0][0]), order.index(kv[0][1]))):
            line = line.sort_values("n_train")
            name = f"{pooling} · {regime_name(regime)}" + (f" · {dtype}" if dtype != dtypes.index[0] else "")
            _draw_line(fig, line, line["n_train"].tolist(), name, DASH.get(regime, "dot"), scale,
                       lambda r: f"fit on {int(r['n_train']):,} examples", i, shown)
        fig.update_xaxes(type="log", title_text="training examples the head was fit on (log scale)", row=i, col=1)
        fig.update_yaxes(title_text=metric_title(panel["main_metric"].iloc[0], panel["mean"]), row=i, col=1)
    fig.update_layout(title=dict(text=title), legend=dict(LEGEND_SIDE, title="pooling · regime"))
    return fig


def _layer_key(label: str) -> tuple:
    return (1, 0) if label == "last" else (0, int(label))  # embeddings (0) up to the last layer


@fails_soft("Every layer")
def every_layer(df: pd.DataFrame) -> go.Figure:
    """Main metric against the hidden-state layer, every pooling with two or more layers (main setup)."""
    title = ("Every layer: which hidden state to read, per pooling (0 = embeddings, last = final layer)<br>"
             "<sup>mean over seeds; bands: 95% interval across seeds; each model's largest training set</sup>")
    df, msg = usable(df, title)
    if msg:
        return msg
    agg = _lines(cells.select(df, "main", None), ["task", "model", "regime", "pooling"], "layer_label")
    if agg.empty:
        return message(title, "no layer records: a pooling needs records at two or more layers "
                              "(`python -m berteval run ... --layers 0,1,2,3,4,5,6`)")
    keys = reading_order(agg.groupby(["task", "model", "regime"]).groups)
    fig, shown = panels([panel_title(task, model, regime) for task, model, regime in keys], 420), set()
    for i, (task, model, regime) in enumerate(keys, start=1):
        panel = agg[(agg["task"] == task) & (agg["model"] == model) & (agg["regime"] == regime)]
        scale = metric_scale(panel["mean"])
        layers = sorted(panel["layer_label"].unique(), key=_layer_key)
        for pooling in data.pooling_order(panel["pooling"]):
            line = panel[panel["pooling"] == pooling]
            line = line.assign(_k=line["layer_label"].map(layers.index)).sort_values("_k")
            _draw_line(fig, line, line["layer_label"].tolist(), pooling, "solid", scale,
                       lambda r: f"layer {r['layer_label']}", i, shown)
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=layers,
                         title_text="hidden-state layer (0 = embeddings; last = final layer)", row=i, col=1)
        fig.update_yaxes(title_text=metric_title(panel["main_metric"].iloc[0], panel["mean"]), row=i, col=1)
    fig.update_layout(title=dict(text=title), legend=dict(LEGEND_TOP, title="pooling"))
    return fig


def span_heads(df: pd.DataFrame) -> pd.DataFrame:
    """Per task and model of the probe (its main setup: the table's rows), the per-token head and each one-vector
    head, EM and F1 across seeds."""
    rows = []
    probe = cells.main_rows(df)
    probe = probe[probe["regime"] == "probe"]
    span_tasks = set(probe.loc[probe["pooling"] == SPAN, "task"])
    for (task, model, dtype, pooling), g in probe[probe["task"].isin(span_tasks)].groupby(
            ["task", "model", "dtype", "pooling"]):
        row = {"task": task, "model": model, "dtype": dtype, "pooling": pooling, "n_seeds": len(g),
               "seeds": ", ".join(str(s) for s in sorted(g["seed"])),
               "run_ids": " ".join(g.sort_values("seed")["run_id"])}
        for metric in ("exact_match", "f1"):
            s = summarise(m.get(metric, math.nan) for m in g["metrics"])
            row.update({metric: s.mean, f"{metric}_half": (s.ci95_high - s.mean) if s.n > 1 else math.nan})
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    # A panel needs both kinds of head: the per-token one and at least one pooled vector.
    both = out.groupby(["task", "model"])["pooling"].transform(lambda p: (p == SPAN).any() and (p != SPAN).any())
    return out[both.astype(bool)]


@fails_soft("Span QA: every token or one vector")
def span_vector(df: pd.DataFrame) -> go.Figure:
    """Span QA probe: the per-token span head beside span heads that read one pooled vector of the window."""
    title = ("Span QA from one vector: the per-token head (two logits per token) against heads that read one "
             "pooled vector<br><sup>frozen encoder, same training questions, full dev; bars: mean over seeds, "
             "whiskers: 95% interval across seeds</sup>")
    df, msg = usable(df, title, needed=("model", "task", "regime", "pooling", "seed", "metrics", "dtype", "value"))
    if msg:
        return msg
    heads = span_heads(df)
    if heads.empty:
        return message(title, "no one-vector span records beside a per-token one: "
                              "`python -m berteval run --task squad --regime probe --pooling cls,pooler,mean`")
    keys = reading_order(heads.groupby(["task", "model"]).groups, ("task", "model"))
    fig = panels([panel_title(task, model, "probe") for task, model in keys], 360)
    for i, (task, model) in enumerate(keys, start=1):
        panel = heads[(heads["task"] == task) & (heads["model"] == model)]
        order = [SPAN] + data.pooling_order(p for p in panel["pooling"] if p != SPAN)
        panel = panel.assign(_k=panel["pooling"].map(order.index)).sort_values(["_k", "dtype"])
        mixed = panel["dtype"].nunique() > 1
        labels = [("every token" if p == SPAN else f"one vector: {p}") + (f" ({d})" if mixed else "")
                  for p, d in zip(panel["pooling"], panel["dtype"])]
        for metric, name, shade in (("exact_match", "exact match", 0.55), ("f1", "F1", 1.0)):
            fig.add_trace(go.Bar(
                x=labels, y=panel[metric], name=name, legendgroup=name, showlegend=i == 1, offsetgroup=name,
                marker=dict(color=[_rgba(colour(p) if p != SPAN else "#444444", shade) for p in panel["pooling"]],
                            line=dict(color="#222", width=1)),
                error_y=dict(type="data", array=panel[f"{metric}_half"].fillna(0), visible=True, color="#222"),
                text=[f"{v:.1f}" for v in panel[metric]], textposition="outside",
                # the F1 bars are the table's cells (F1 is SQuAD's main metric); exact match is not in the table
                customdata=panel["run_ids"].tolist() if metric == "f1" else None,
                hovertext=[f"<b>{lab}</b><br>{name} {v:.2f}<br>{n} seed(s): {s}" for lab, v, n, s in
                           zip(labels, panel[metric], panel["n_seeds"], panel["seeds"])], hoverinfo="text",
            ), row=i, col=1)
        top = float(pd.concat([panel["f1"] + panel["f1_half"].fillna(0), panel["exact_match"]]).max())
        fig.update_yaxes(title_text="SQuAD dev score (0–100)", range=[0, top * 1.25 + 1], row=i, col=1)
        fig.update_xaxes(title_text="what the span head reads", row=i, col=1)
    fig.update_layout(title=dict(text=title), barmode="group", legend=dict(LEGEND_TOP, title="metric"))
    return fig


FIGURES = {"learning_curves": learning_curves, "every_layer": every_layer, "span_vector": span_vector}

CAPTIONS = {
    "learning_curves": (
        "Learning curves",
        "Dev score against the number of training examples the head was fit on (log scale): each seed draws "
        "its own nested subset of the train set (its 32 examples are among its 128), 10% of the draw is held out "
        "to choose the probe's C or the fine-tune's epoch, and the rest trains. Solid lines: frozen probe "
        "(logistic regression); dashed: fine-tuned, every size for the same number of optimiser steps. Bands: "
        "95% Student-t interval across seeds. Sizes are never averaged together."),
    "every_layer": (
        "Every layer",
        "The frozen probe on each hidden state, from the embeddings (0) to the last layer, for every pooling "
        "measured at two or more layers, in each model's largest training set. Bands: 95% interval across seeds."),
    "span_vector": (
        "Span QA from one vector",
        "The per-token span head gives every token a start and an end logit. The one-vector heads read a single "
        "pooled vector of the window (cls, pooler or mean) and choose the start and the end among the window's "
        "positions, as a classifier chooses a class. Same frozen encoder, same training questions, the full "
        "SQuAD v1.1 dev set."),
}


def all_figures(df: pd.DataFrame) -> dict[str, go.Figure]:
    return {name: fn(df) for name, fn in FIGURES.items()}
