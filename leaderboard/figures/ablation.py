"""The pooling ablation: per task and model, the main metric of every pooling and regime at the last layer.

Mean and 95% interval across seeds (diamonds with whiskers), each seed beside it (open circles), and
each head's rank band (`leaderboard.bands`) written beside it. Regimes are the outer label of a
two-level axis, in the regime registry's order; poolings in the pooling registry's. Each model, task
and regime shows its main setup only (the largest training set, data.main_setups: what the bands
rank): the smaller training sets of a learning curve are the learning-curve figure's, and a label
per setup ("cls (data 93823cd2b591 · train 3,600 · dtype fp32)") ran into the next panel.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from .. import bands, data
from ..labels import reading_order, regime_name, regime_order
from .base import fails_soft, hover, legend_key, panel_title, panels, prepared, y_range
from .style import LEGEND_TOP, colour, fmt, metric_scale, metric_title


@fails_soft("Pooling ablation")
def pooling_ablation(df: pd.DataFrame, band_frame: pd.DataFrame | None = None) -> go.Figure:
    """Per task and model: the main metric per pooling and regime at the last layer, 95% CI across seeds;
    each head's rank band (bands.py; from `band_frame`, default computed from `df`) written beside it."""
    title = ("Pooling ablation: main metric per pooling (last layer), mean and 95% CI across seeds<br>"
             "<sup>b1, b2, ...: rank band (heads in one band are not separated by the paired tests, Holm-corrected); "
             "each model's largest training set (smaller ones: the learning curves)</sup>")
    full = df
    df, agg, msg = prepared(df, title, "no last-layer records (layer -1): the per-layer figure shows the others")
    if msg:
        return msg
    band_frame = bands.rank_bands(full) if band_frame is None else band_frame
    if not band_frame.empty:
        agg = agg.merge(band_frame[["model", "task", "regime", "pooling", "layer", "n_train", "dtype", "band"]],
                        how="left", on=["model", "task", "regime", "pooling", "layer", "n_train", "dtype"])
    else:
        agg = agg.assign(band=math.nan)
    keys = reading_order(agg.groupby(["task", "model"]).groups, ("task", "model"))
    fig = panels([panel_title(task, model) for task, model in keys])
    for i, (task, model) in enumerate(keys, start=1):
        panel = agg[(agg["task"] == task) & (agg["model"] == model)]
        seeds = df[(df["task"] == task) & (df["model"] == model)]
        scale = metric_scale(panel["mean"])
        regimes = regime_order(panel["regime"])
        # Registry order within each regime; the regime is the outer label of a two-level axis.
        panel = panel.assign(_r=panel["regime"].map(regimes.index),
                             _p=panel["pooling"].map(data.pooling_order(panel["pooling"]).index))
        panel = panel.sort_values(["_r", "_p", "setup"])
        label = panel["pooling"] + panel["setup"].map(lambda s: f" ({s})" if s else "")
        x = [panel["regime"].map(regime_name).tolist(), label.tolist()]  # the regime in words: "frozen probe"
        fig.add_trace(go.Scatter(
            x=x, y=panel["mean"], mode="markers+text", name="mean of seeds", showlegend=False, offsetgroup="mean",
            text=[f"b{int(b)}" if pd.notna(b) else "" for b in panel["band"]], textposition="middle left",
            textfont=dict(size=12, color="#333"),
            marker=dict(symbol="diamond", size=15, color=[colour(p) for p in panel["pooling"]],
                        line=dict(width=1, color="#222")),
            error_y=dict(type="data", array=panel["ci95_half"].fillna(0), visible=True, thickness=2.2,
                         width=10, color="#222"),
            hovertext=[hover(r, scale) for _, r in panel.iterrows()], hoverinfo="text",
            customdata=panel["run_ids"].tolist(),  # each diamond's table row (cells.py)
        ), row=i, col=1)
        # Each seed as a small open circle beside its mean: with three seeds the points are the data.
        seeds = seeds.assign(setup=data.setup_labels(seeds))
        seeds_x = seeds["pooling"] + seeds["setup"].map(lambda s: f" ({s})" if s else "")
        fig.add_trace(go.Scatter(
            x=[seeds["regime"].map(regime_name).tolist(), seeds_x.tolist()],
            y=seeds["value"], mode="markers", name="single seed", showlegend=False, offsetgroup="seeds",
            marker=dict(symbol="circle-open", size=8, color=[colour(p) for p in seeds["pooling"]],
                        line=dict(width=2)),
            hovertext=[f"{r['pooling']} · seed {r['seed']}: {fmt(r['value'], scale)}" for _, r in seeds.iterrows()],
            hoverinfo="text",
        ), row=i, col=1)
        fig.update_yaxes(title_text=metric_title(panel["main_metric"].iloc[0], panel["mean"]),
                         range=y_range(panel, scale, seeds["value"]), row=i, col=1)
        fig.update_xaxes(title_text="pooling, grouped by regime", row=i, col=1)
    fig.add_trace(legend_key("mean of seeds (95% CI)", "diamond", 13))
    fig.add_trace(legend_key("one seed", "circle-open", 8))
    # scattermode "group" sets each seed's circles beside its diamond instead of under it.
    fig.update_layout(title=dict(text=title), scattermode="group", scattergap=0.6, legend=LEGEND_TOP)
    return fig
