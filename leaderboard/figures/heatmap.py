"""Task x pooling per model (last layer): the score as text, the colour ranking poolings within each task.

Each task's row is coloured relative to itself (its worst pooling 0, its best 1): tasks score on
different scales, so no colour scale spans two of them. Rows in the task and regime registries'
order, columns in the pooling registry's, the same for every model so panels line up.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from berteval.record_lookup import short_name

from .. import data
from ..labels import metric_name, reading_order, regime_name, task_name
from .base import fails_soft, panels, prepared
from .style import fmt, metric_scale


@fails_soft("Task x pooling heatmap")
def task_pooling_heatmap(df: pd.DataFrame) -> go.Figure:
    """Per model, tasks (and regimes) by poolings at the last layer; colour is relative within each row."""
    title = "Task × pooling per model (last layer): colour ranks poolings within each task, text is the score"
    _, agg, msg = prepared(df, title, "no last-layer records (layer -1)")
    if msg:
        return msg
    models = sorted(agg["model"].unique())
    # Each model's panel is as tall as its task rows, so a model with one row is one strip, not a wall.
    n_rows = [len(agg[agg["model"] == m][["task", "regime"]].drop_duplicates()) for m in models]
    fig = panels([short_name(m) for m in models], panel_px=[75 * k for k in n_rows])
    for i, model in enumerate(models, start=1):
        m = agg[agg["model"] == model]  # one setup per task and regime (cells.select): the table's main rows
        cols = data.pooling_order(agg["pooling"])  # the same columns for every model, so panels line up
        rows = reading_order(m.groupby(["task", "regime"]).groups, ("task", "regime"))
        z, text, hover, ids = [], [], [], []
        for task, regime in rows:
            r = m[(m["task"] == task) & (m["regime"] == regime)].set_index("pooling")
            scale = metric_scale(r["mean"])
            lo, hi = r["mean"].min(), r["mean"].max()
            zr, tr, hr, ir = [], [], [], []
            for p in cols:
                if p not in r.index:
                    zr.append(None), tr.append("—"), ir.append("")
                    hr.append(f"{task} · {regime} · {p}: not measured")
                    continue
                v = r.loc[p, "mean"]
                # 0 = this task's worst pooling, 1 = its best; a lone pooling sits in the middle.
                zr.append(0.5 if hi == lo else (v - lo) / (hi - lo))
                tr.append(f"{fmt(v, scale)}<br>±{fmt(r.loc[p, 'std'], scale)}")
                ir.append(r.loc[p, "run_ids"])
                hr.append(f"{task} · {regime} · {p}<br>{r.loc[p, 'main_metric']} {fmt(v, scale)} "
                          f"± {fmt(r.loc[p, 'std'], scale)} (std), {r.loc[p, 'n_seeds']} seed(s)"
                          + ("<br>the only pooling measured here: no rank" if hi == lo else ""))
            z.append(zr), text.append(tr), hover.append(hr), ids.append(ir)
        metric = dict(zip(m["task"], m["main_metric"]))
        ylabels = [f"{task_name(task)} · {regime_name(regime)}<br>({metric_name(metric[task])})" for task, regime in rows]
        fig.add_trace(go.Heatmap(
            z=z, x=cols, y=ylabels, text=text, texttemplate="%{text}", textfont=dict(size=13),
            hovertext=hover, hoverinfo="text", coloraxis="coloraxis", xgap=3, ygap=3, customdata=ids,
        ), row=i, col=1)
        fig.update_yaxes(autorange="reversed", title_text="task · regime", showgrid=False, row=i, col=1)
        fig.update_xaxes(title_text="pooling", showgrid=False, row=i, col=1)
    fig.update_layout(
        title=dict(text=title), margin=dict(l=140, r=40, t=110, b=60),
        coloraxis=dict(colorscale="Blues", cmin=0, cmax=1, colorbar=dict(
            title=dict(text="rank within task"), tickvals=[0, 1], ticktext=["worst", "best"])),
    )
    return fig
