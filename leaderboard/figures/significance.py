"""Which pairs of last-layer heads differ: the records' paired tests (McNemar exact), median p over seeds.

Last-layer heads only (the pooling ablation, what the bands rank first): with every layer's heads the SST-2
probe panel compared 19 heads in cells too small to read at 1280 px; the tests of heads at other layers are
in the report's paired-tests table and the layer ablation's bands."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .. import data
from ..labels import reading_order
from .base import fails_soft, message, panel_title, panels, usable
from .style import fmt_p

ALPHA = 0.05


def _significance_matrix(p: pd.DataFrame, labels: list[str]):
    """z (0 n.s., 1 p<.05, 2 p<.01 by median p over seeds), text and hover for a labels x labels grid."""
    z = [[None] * len(labels) for _ in labels]
    text = [[""] * len(labels) for _ in labels]
    hover = [[f"{a} vs {b}: not tested" for b in labels] for a in labels]
    for (a, b), g in p.groupby(["a", "b"]):
        if a not in labels or b not in labels:
            continue
        med = float(g["p_value"].median())
        all_sig = bool((g["p_value"] < ALPHA).all())
        a_only, b_only = pd.to_numeric(g["a_only"]).sum(min_count=1), pd.to_numeric(g["b_only"]).sum(min_count=1)
        counted = not (pd.isna(a_only) or pd.isna(b_only))  # a bootstrap (a correlation) has no discordant counts
        level = 2 if med < 0.01 else 1 if med < ALPHA else 0
        per_seed = "<br>".join(f"seed {s.seed}: p = {s.p_value:.3g}" + (f" ({a} right only {s.a_only}, {b} right only "
                               f"{s.b_only})" if counted else "") for s in g.sort_values("seed").itertuples())
        # The matrix is symmetric; counts read from the row's side in both triangles.
        for row, col, mine, theirs in ((a, b, a_only, b_only), (b, a, b_only, a_only)):
            i, j = labels.index(row), labels.index(col)
            z[i][j] = level
            text[i][j] = f"{fmt_p(med)}{'★' if all_sig else ''}" + (f"<br>{mine:.0f}:{theirs:.0f}" if counted else "")
            hover[i][j] = (f"<b>{row}</b> vs <b>{col}</b>, {len(g)} seed(s), median p = {med:.3g}"
                           f"{' (p<0.05 in every seed)' if all_sig else ''}<br>{per_seed}")
    return z, text, hover


@fails_soft("Significance")
def significance(df: pd.DataFrame) -> go.Figure:
    """Which pairs of last-layer heads differ: McNemar p-values (or a paired bootstrap's, for a correlation) from the
    records' paired tests, each group's main setup."""
    title = ("Paired tests between last-layer heads (McNemar exact, same examples, same seed): median p over seeds<br>"
             "<sup>★ = p<0.05 in every seed · a:b = examples only the row's / only the column's head gets right, "
             "summed over seeds</sup>")
    df, msg = usable(df, title, needed=("model", "task", "regime", "pooling", "layer", "seed", "value",
                                        "main_metric", "paired_tests"))
    if msg:
        return msg
    p = data.pairs(data.main_setups(df))  # a learning curve's small training sets are tested too: not here
    if not p.empty:
        p = p[(p["a_layer"] == -1) & (p["b_layer"] == -1)]
        p = p.assign(a=p["a_pooling"], b=p["b_pooling"])  # "cls", not "cls@last": every head here is last-layer
    if p.empty:
        return message(title, "no paired tests in these records (each record tests itself against earlier "
                              "records of its model, task, regime and seed)")
    keys = reading_order(p.groupby(["task", "model", "regime"]).groups)
    # Square-ish cells: each panel grows with the number of heads it compares.
    n_heads = [len(set(g["a"]) | set(g["b"])) for _, g in p.groupby(["task", "model", "regime"])]
    fig = panels([panel_title(task, model, regime) for task, model, regime in keys],
                  panel_px=[max(200, 62 * n) for n in n_heads])
    for i, (task, model, regime) in enumerate(keys, start=1):
        g = p[(p["task"] == task) & (p["model"] == model) & (p["regime"] == regime)]
        heads = pd.concat([g[["a_pooling", "a_layer", "a"]].set_axis(["pooling", "layer", "label"], axis=1),
                           g[["b_pooling", "b_layer", "b"]].set_axis(["pooling", "layer", "label"], axis=1)])
        order = data.pooling_order(heads["pooling"])
        heads = heads.drop_duplicates("label").assign(
            _p=lambda h: h["pooling"].map(order.index),
            _l=lambda h: h["layer"].map(lambda x: (1, 0) if x == -1 else (0, x)))
        labels = heads.sort_values(["_l", "_p"])["label"].tolist()
        z, text, hover = _significance_matrix(g, labels)
        fig.add_trace(go.Heatmap(z=z, x=labels, y=labels, text=text, texttemplate="%{text}",
                                 textfont=dict(size=11), hovertext=hover, hoverinfo="text",
                                 coloraxis="coloraxis", xgap=2, ygap=2), row=i, col=1)
        fig.update_yaxes(autorange="reversed", title_text="pooling", showgrid=False, row=i, col=1)
        fig.update_xaxes(title_text="pooling (compared with the row)", showgrid=False, row=i, col=1)
    fig.update_layout(
        title=dict(text=title), margin=dict(l=110, r=40, t=120, b=70),
        coloraxis=dict(cmin=0, cmax=2, colorscale=[[0, "#f2f2f2"], [0.33, "#f2f2f2"], [0.33, "#9ecae1"],
                                                   [0.67, "#9ecae1"], [0.67, "#2171b5"], [1, "#2171b5"]],
                       colorbar=dict(title=dict(text="median p"), tickvals=[1 / 3, 1, 5 / 3],
                                     ticktext=["n.s.", "p<0.05", "p<0.01"])),
    )
    return fig
