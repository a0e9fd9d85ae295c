"""The per-layer ablation: which hidden layer to read, for cls and mean, where records exist at two or more layers."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .. import data
from ..labels import reading_order
from .base import fails_soft, hover, message, panel_title, panels, prepared, y_range
from .style import LEGEND_TOP, colour, metric_scale, metric_title

LAYER_POOLINGS = ["cls", "mean"]  # the poolings the per-layer ablation runs


def layer_sort(label: str):
    # Absolute indices bottom-up, then "last": the curve reads from embeddings to the top.
    return (1, 0) if label == "last" else (0, int(label))


@fails_soft("Per-layer curves")
def layer_curves(df: pd.DataFrame) -> go.Figure:
    """Main metric against hidden-state layer for cls and mean, where records exist at two or more layers."""
    title = "Per-layer ablation: which hidden layer to read (cls and mean), mean and 95% CI across seeds"
    # Each group's main setup (its largest training set): a learning curve's smaller sets read no other layer.
    _, agg, msg = prepared(df, title, "no cls or mean records", layer=None,
                           keep=lambda d: d["pooling"].isin(LAYER_POOLINGS))
    if msg:
        return msg
    # A curve needs two points: keep (task, model, regime, pooling, setup) lines with 2+ layers.
    lines = agg.groupby(["task", "model", "regime", "pooling", "setup"])["layer"].transform("nunique")
    agg = agg[lines >= 2]
    if agg.empty:
        return message(title, "no layer records: cls or mean need records at two or more layers "
                              "(e.g. `python -m berteval run ... --layers -1,5,3`)")
    keys = reading_order(agg.groupby(["task", "model", "regime"]).groups)
    fig = panels([panel_title(task, model, regime) for task, model, regime in keys])
    shown = set()
    for i, (task, model, regime) in enumerate(keys, start=1):
        panel = agg[(agg["task"] == task) & (agg["model"] == model) & (agg["regime"] == regime)]
        scale = metric_scale(panel["mean"])
        order = sorted(panel["layer_label"].unique(), key=layer_sort)
        for (pooling, setup), line in panel.groupby(["pooling", "setup"], sort=False):
            line = line.assign(_k=line["layer_label"].map(order.index)).sort_values("_k")
            name = pooling + (f" ({setup})" if setup else "")
            fig.add_trace(go.Scatter(
                x=line["layer_label"], y=line["mean"], mode="lines+markers", name=name, legendgroup=name,
                offsetgroup=name,
                showlegend=name not in shown, line=dict(color=colour(pooling), width=2.5,
                                                         dash="dot" if setup else "solid"),
                marker=dict(size=10, color=colour(pooling)),
                error_y=dict(type="data", array=line["ci95_half"].fillna(0), visible=True, thickness=2, width=8),
                hovertext=[hover(r, scale) for _, r in line.iterrows()], hoverinfo="text",
                customdata=line["run_ids"].tolist(),
            ), row=i, col=1)
            shown.add(name)
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order,
                         title_text="hidden-state layer (index; last = final layer)", row=i, col=1)
        fig.update_yaxes(title_text=metric_title(panel["main_metric"].iloc[0], panel["mean"]),
                         range=y_range(panel, scale), row=i, col=1)
    # Nudge each pooling's points sideways so whiskers of close curves do not merge into one bar.
    fig.update_layout(scattermode="group", scattergap=0.85, title=dict(text=title),
                      legend=dict(LEGEND_TOP, title="pooling"))
    return fig
