"""What every leaderboard figure shares: the rows it can use, one panel per task, hover text, and failing soft.

Every figure is a pure function from the long records frame (`data.load`: a row per record) to a
`go.Figure`, and none raises: empty, partial or malformed data yields a figure whose title says
what is missing (`message`, `fails_soft`), because a tab that shows "no layer records yet" is
useful and a dead callback is not. Tasks score on different scales (SST-2 accuracy 0-1, SQuAD F1
0-100), so no figure puts two tasks on one y axis: `panels` gives each its own row, y range and
axis title (make_subplots rather than Plotly Express facets, which share them).
"""

from __future__ import annotations

import functools
import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from berteval.record_lookup import short_name

from .. import cells, data
from ..labels import regime_name, task_name
from .style import FONT, GAP_PX, PANEL_PX, fmt


def message(title: str, text: str) -> go.Figure:
    """A figure that says what is missing instead of drawing nothing."""
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(size=15, color="#555"), align="center")
    fig.update_layout(title=dict(text=title), height=260, font=FONT, template="plotly_white",
                      xaxis=dict(visible=False), yaxis=dict(visible=False), margin=dict(t=60, b=20))
    return fig


def fails_soft(title: str):
    """Last-resort net: a bug or data this module did not foresee becomes a figure, not a traceback."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(df, *args, **kwargs):
            try:
                return fn(df, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001: the point is to never raise into a UI callback
                return message(title, f"could not draw this figure: {type(exc).__name__}: {exc}")
        return inner
    return wrap


def usable(df, title: str, needed=("model", "task", "regime", "pooling", "layer", "seed", "value",
                                    "main_metric")) -> tuple[pd.DataFrame | None, go.Figure | None]:
    """The rows a figure can use, or a message figure saying why there are none."""
    if not isinstance(df, pd.DataFrame):
        return None, message(title, "no records loaded")
    missing = [c for c in needed if c not in df.columns]
    if missing:
        return None, message(title, f"the records frame lacks columns: {', '.join(missing)}")
    if df.empty:
        return None, message(title, "no result records yet: write some with `python -m berteval run ...`")
    df = df.copy()
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    df = df[df["value"].notna()]
    if df.empty:
        return None, message(title, "no record has a numeric main-metric value")
    if "layer_label" not in df:
        df["layer_label"] = df["layer"].map(data.layer_label)
    return df, None


def prepared(df, title: str, nothing: str, setups: str = "main", layer: int | None = -1, keep=None):
    """(the records behind the cells, the cells (cells.select: the table's rows), None), or a message figure saying
    `nothing` where no cell is left: the common first step of the metric figures. `keep` narrows the records
    further (e.g. to the poolings a figure draws)."""
    df, msg = usable(df, title)
    if msg:
        return None, None, msg
    df = cells.main_rows(df) if setups == "main" else df
    df = df if layer is None else df[df["layer"] == layer]
    if keep is not None:
        df = df[keep(df)]
    agg = cells.select(df, setups, layer)
    if agg.empty:
        return None, None, message(title, nothing)
    return df, agg, None


def panel_title(task: str, model: str | None = None, regime: str | None = None) -> str:
    """A panel's title in words: "SST-2 · all-MiniLM-L6-v2 · frozen probe" (not "sst2 · sentence-transformers/...")."""
    parts = [task_name(task)] + ([short_name(model)] if model else []) + ([regime_name(regime)] if regime else [])
    return " · ".join(parts)


def panels(titles: list[str], panel_px: int | list[int] = PANEL_PX) -> go.Figure:
    """One row per panel, each with its own y axis (tasks never share one); heights in pixels."""
    n = len(titles)
    heights = panel_px if isinstance(panel_px, list) else [panel_px] * n
    height = sum(heights) + (n - 1) * GAP_PX + 150
    fig = make_subplots(rows=n, cols=1, subplot_titles=titles, row_heights=heights,
                        vertical_spacing=(GAP_PX / height) if n > 1 else 0.0)
    fig.update_layout(height=height, font=FONT, template="plotly_white", margin=dict(l=90, r=40, t=120, b=60))
    # Subplot titles are annotations: left-align them and lift them clear of the top tick label.
    fig.update_annotations(font=dict(size=14), xanchor="left", x=0, yshift=12)
    return fig


def hover(row: pd.Series, scale: float) -> str:
    ci = (f"95% CI [{fmt(row['ci95_low'], scale)}, {fmt(row['ci95_high'], scale)}]"
          if row["n_seeds"] > 1 else "one seed: no interval")
    return (f"<b>{row['pooling']}</b> · layer {row['layer_label']} · {row['regime']}<br>"
            f"{row['main_metric']} {fmt(row['mean'], scale)} ± {fmt(row['std'], scale)} (std)<br>{ci}<br>"
            f"{row['n_seeds']} seed(s): {row['seeds']} · n eval {row['n_eval']:,} · n train {row['n_train']:,}"
            + (f"<br>rank band {int(row['band'])}" if pd.notna(row.get("band", math.nan)) else ""))


def y_range(panel: pd.DataFrame, scale: float, *extra: pd.Series) -> list[float]:
    """A y range around the means, their whiskers and any extra points (seeds). Autorange pads a lone
    point out to nonsense (0 to 1.5) and, with grouped scatter, pulls in zero."""
    half = panel["ci95_half"].fillna(0)
    v = pd.to_numeric(pd.concat([panel["mean"] - half, panel["mean"] + half, *extra]), errors="coerce").dropna()
    lo, hi = float(v.min()), float(v.max())
    pad = max((hi - lo) * 0.12, 0.01 * scale)
    return [lo - pad, hi + pad]


def legend_key(name: str, symbol: str, size: int) -> go.Scatter:
    # Legend-only marker in neutral grey: the real traces are coloured per pooling, and a legend
    # showing their first colour would read as "cls".
    return go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True, hoverinfo="skip",
                      marker=dict(symbol=symbol, size=size, color="#666", line=dict(width=2, color="#666")))
