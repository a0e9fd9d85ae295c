"""How every leaderboard figure looks: colours, fonts, the white layout, and how numbers are written.

One colour per pooling, shared by every figure: the four first poolings keep the colours readers
know, and a pooling added to the registry later takes the next free colour of the palette, so
adding a pooling never needs an edit here. Metric names come from the metrics registry
(`leaderboard.labels`); a metric's scale (0-1 or 0-100) is read from its values, since records
do not say. Pure: no data is read here.
"""

from __future__ import annotations

import math

import pandas as pd

from berteval.pooling import POOLINGS

from ..labels import metric_name

UNKNOWN_COLOUR = "#8c8c8c"  # poolings outside the registry ("span", "nsp-head"): neutral grey
FIXED_COLOURS = {"cls": "#1f77b4", "pooler": "#d62728", "mean": "#2ca02c", "max": "#9467bd"}
PALETTE = ("#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79", "#637939", "#843c39")
PANEL_PX = 330  # height of one panel; figures grow with the number of panels
GAP_PX = 130  # room between panels for this one's tick labels and axis title, then the next title
FONT = dict(family="Helvetica, Arial, sans-serif", size=13)
# plotly_white's look spelled out, for a figure drawn per request: assigning the template itself cost
# 14 ms of the 20 ms it took to build the Answer tab's logits chart (plotly 7 validates it each time).
_AXIS = dict(gridcolor="#EBF0F8", linecolor="#EBF0F8", zerolinecolor="#EBF0F8", automargin=True)
WHITE = dict(template="none", paper_bgcolor="white", plot_bgcolor="white", xaxis=_AXIS, yaxis=_AXIS,
             font=dict(FONT, color="#2a3f5f"), title=dict(x=0.05), hoverlabel=dict(align="left"))
LEGEND_TOP = dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right")  # above the first panel
# A legend of many entries (models, pooling x regime lines) right of the panels: above them it ran into the first
# panel's title at 1280 px.
LEGEND_SIDE = dict(orientation="v", y=1.0, yanchor="top", x=1.01, xanchor="left")


def colour(pooling: str) -> str:
    if pooling in FIXED_COLOURS:
        return FIXED_COLOURS[pooling]
    if pooling not in POOLINGS:
        return UNKNOWN_COLOUR
    others = [n for n in POOLINGS if n not in FIXED_COLOURS]
    return PALETTE[others.index(pooling) % len(PALETTE)]


def metric_scale(values) -> float:
    """1 for a 0-1 metric, 100 for a percentage (SQuAD's EM/F1): records do not say, the values do."""
    v = pd.to_numeric(pd.Series(list(values)), errors="coerce").dropna()
    return 100.0 if (not v.empty and v.abs().max() > 1.0) else 1.0


def metric_title(metric: str, values) -> str:
    name = metric_name(metric)
    return f"{name} (0–100)" if metric_scale(values) == 100 else f"{name} (0–1)"


def fmt(value: float, scale: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.1f}" if scale == 100 else f"{value:.3f}"


def fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"
