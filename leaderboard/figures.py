"""The leaderboard's figures: pure functions from the long records frame to a Plotly figure.

Each takes the frame `data.load` returns (a row per record) and summarises it itself, so
the app and the report call them the same way. None of them raises: empty, partial or
malformed data yields a figure whose title says what is missing, because a leaderboard
tab that shows "no layer records yet" is useful and a dead callback is not.

Tasks score on different scales (SST-2 accuracy 0-1, SQuAD F1 0-100), so no figure puts
two tasks on one y axis or one colour scale: every task gets its own panel, and the
heatmap colours each task's row relative to itself. That is also why the panels are
built with make_subplots rather than Plotly Express facets: each panel needs its own y
range and its own axis title naming the metric and its scale. Pooling colours come from
the pooling registry, so a pooling looks the same in every figure.
"""

from __future__ import annotations

import functools
import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from berteval.pooling import POOLINGS

from . import bands, data

UNKNOWN_COLOUR = "#8c8c8c"  # poolings outside the registry ("span", "nsp-head"): neutral grey
# One colour per pooling, shared by every figure. The four first poolings keep the colours readers
# know; a pooling added to the registry later takes the next free colour of the palette, so adding a
# pooling never needs an edit here.
FIXED_COLOURS = {"cls": "#1f77b4", "pooler": "#d62728", "mean": "#2ca02c", "max": "#9467bd"}
PALETTE = ("#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79", "#637939", "#843c39")
REGIME_ORDER = ["probe", "finetune", "pretrained"]
LAYER_POOLINGS = ["cls", "mean"]  # the poolings the per-layer ablation runs
METRIC_NAMES = {"accuracy": "accuracy", "f1": "F1", "exact_match": "exact match"}
PANEL_PX = 330  # height of one panel; figures grow with the number of panels
GAP_PX = 130  # room between panels for this one's tick labels and axis title, then the next title
FONT = dict(family="Helvetica, Arial, sans-serif", size=13)
# plotly_white's look spelled out, for a figure drawn per request: assigning the template itself cost
# 14 ms of the 20 ms it took to build the Answer tab's logits chart (plotly 7 validates it each time).
_AXIS = dict(gridcolor="#EBF0F8", linecolor="#EBF0F8", zerolinecolor="#EBF0F8", automargin=True)
WHITE = dict(template="none", paper_bgcolor="white", plot_bgcolor="white", xaxis=_AXIS, yaxis=_AXIS,
             font=dict(FONT, color="#2a3f5f"), title=dict(x=0.05), hoverlabel=dict(align="left"))
ALPHA = 0.05
LEGEND_TOP = dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right")  # above the first panel


def colour(pooling: str) -> str:
    if pooling in FIXED_COLOURS:
        return FIXED_COLOURS[pooling]
    if pooling not in POOLINGS:
        return UNKNOWN_COLOUR
    others = [n for n in POOLINGS if n not in FIXED_COLOURS]
    return PALETTE[others.index(pooling) % len(PALETTE)]


def _regime_rank(regime: str) -> tuple:
    # probe, finetune, pretrained (cheapest to strongest), then anything new alphabetically
    return (REGIME_ORDER.index(regime) if regime in REGIME_ORDER else len(REGIME_ORDER), regime)


def _regime_order(names) -> list[str]:
    return sorted(dict.fromkeys(names), key=_regime_rank)


def _layer_sort(label: str):
    # Absolute indices bottom-up, then "last": the curve reads from embeddings to the top.
    return (1, 0) if label == "last" else (0, int(label))


def metric_scale(values) -> float:
    """1 for a 0-1 metric, 100 for a percentage (SQuAD's EM/F1): records do not say, the values do."""
    v = pd.to_numeric(pd.Series(list(values)), errors="coerce").dropna()
    return 100.0 if (not v.empty and v.abs().max() > 1.0) else 1.0


def metric_title(metric: str, values) -> str:
    name = METRIC_NAMES.get(metric, metric.replace("_", " "))
    return f"{name} (0–100)" if metric_scale(values) == 100 else f"{name} (0–1)"


def fmt(value: float, scale: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.1f}" if scale == 100 else f"{value:.3f}"


def fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _y_range(panel: pd.DataFrame, scale: float, *extra: pd.Series) -> list[float]:
    """A y range around the means, their whiskers and any extra points (seeds). Autorange pads a lone
    point out to nonsense (0 to 1.5) and, with grouped scatter, pulls in zero."""
    half = panel["ci95_half"].fillna(0)
    v = pd.to_numeric(pd.concat([panel["mean"] - half, panel["mean"] + half, *extra]), errors="coerce").dropna()
    lo, hi = float(v.min()), float(v.max())
    pad = max((hi - lo) * 0.12, 0.01 * scale)
    return [lo - pad, hi + pad]


def _legend_key(name: str, symbol: str, size: int) -> go.Scatter:
    # Legend-only marker in neutral grey: the real traces are coloured per pooling, and a legend
    # showing their first colour would read as "cls".
    return go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True, hoverinfo="skip",
                      marker=dict(symbol=symbol, size=size, color="#666", line=dict(width=2, color="#666")))


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


def _usable(df, title: str, needed=("model", "task", "regime", "pooling", "layer", "seed", "value",
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


def _prepared(df, title: str, keep, nothing: str):
    """(records kept by `keep`, their per-seed aggregate with setup labels, None), or a message figure
    saying `nothing` where no row is left: the common first step of the metric figures."""
    df, msg = _usable(df, title)
    if msg:
        return None, None, msg
    df = df[keep(df)]
    agg = data.aggregate(df)
    if agg.empty:
        return None, None, message(title, nothing)
    agg["setup"] = data.setup_labels(agg)
    return df, agg, None


def _panels(titles: list[str], panel_px: int | list[int] = PANEL_PX) -> go.Figure:
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


def _hover(row: pd.Series, scale: float) -> str:
    ci = (f"95% CI [{fmt(row['ci95_low'], scale)}, {fmt(row['ci95_high'], scale)}]"
          if row["n_seeds"] > 1 else "one seed: no interval")
    return (f"<b>{row['pooling']}</b> · layer {row['layer_label']} · {row['regime']}<br>"
            f"{row['main_metric']} {fmt(row['mean'], scale)} ± {fmt(row['std'], scale)} (std)<br>{ci}<br>"
            f"{row['n_seeds']} seed(s): {row['seeds']} · n eval {row['n_eval']:,} · n train {row['n_train']:,}"
            + (f"<br>rank band {int(row['band'])}" if pd.notna(row.get("band", math.nan)) else ""))


@fails_soft("Pooling ablation")
def pooling_ablation(df: pd.DataFrame, band_frame: pd.DataFrame | None = None) -> go.Figure:
    """Per task and model: the main metric per pooling and regime at the last layer, 95% CI across seeds;
    each head's rank band (bands.py; from `band_frame`, default computed from `df`) written beside it."""
    title = ("Pooling ablation: main metric per pooling (last layer), mean and 95% CI across seeds<br>"
             "<sup>b1, b2, ...: rank band (heads in one band are not separated by the paired tests, Holm-corrected)</sup>")
    full = df
    df, agg, msg = _prepared(df, title, lambda d: d["layer"] == -1,
                             "no last-layer records (layer -1): the per-layer figure shows the others")
    if msg:
        return msg
    band_frame = bands.rank_bands(full) if band_frame is None else band_frame
    if not band_frame.empty:
        agg = agg.merge(band_frame[["model", "task", "regime", "pooling", "layer", "n_train", "dtype", "band"]],
                        how="left", on=["model", "task", "regime", "pooling", "layer", "n_train", "dtype"])
    else:
        agg = agg.assign(band=math.nan)
    keys = sorted(agg.groupby(["task", "model"]).groups)
    fig = _panels([f"{task} · {model}" for task, model in keys])
    for i, (task, model) in enumerate(keys, start=1):
        panel = agg[(agg["task"] == task) & (agg["model"] == model)]
        seeds = df[(df["task"] == task) & (df["model"] == model)]
        scale = metric_scale(panel["mean"])
        regimes = _regime_order(panel["regime"])
        # Registry order within each regime; the regime is the outer label of a two-level axis.
        panel = panel.assign(_r=panel["regime"].map(regimes.index),
                             _p=panel["pooling"].map(data.pooling_order(panel["pooling"]).index))
        panel = panel.sort_values(["_r", "_p", "setup"])
        label = panel["pooling"] + panel["setup"].map(lambda s: f" ({s})" if s else "")
        x = [panel["regime"].tolist(), label.tolist()]
        fig.add_trace(go.Scatter(
            x=x, y=panel["mean"], mode="markers+text", name="mean of seeds", showlegend=False, offsetgroup="mean",
            text=[f"b{int(b)}" if pd.notna(b) else "" for b in panel["band"]], textposition="middle left",
            textfont=dict(size=12, color="#333"),
            marker=dict(symbol="diamond", size=15, color=[colour(p) for p in panel["pooling"]],
                        line=dict(width=1, color="#222")),
            error_y=dict(type="data", array=panel["ci95_half"].fillna(0), visible=True, thickness=2.2,
                         width=10, color="#222"),
            hovertext=[_hover(r, scale) for _, r in panel.iterrows()], hoverinfo="text",
        ), row=i, col=1)
        # Each seed as a small open circle beside its mean: with three seeds the points are the data.
        seeds = seeds.assign(setup=data.setup_labels(seeds))
        seeds_x = seeds["pooling"] + seeds["setup"].map(lambda s: f" ({s})" if s else "")
        fig.add_trace(go.Scatter(
            x=[seeds["regime"].tolist(), seeds_x.tolist()],
            y=seeds["value"], mode="markers", name="single seed", showlegend=False, offsetgroup="seeds",
            marker=dict(symbol="circle-open", size=8, color=[colour(p) for p in seeds["pooling"]],
                        line=dict(width=2)),
            hovertext=[f"{r['pooling']} · seed {r['seed']}: {fmt(r['value'], scale)}" for _, r in seeds.iterrows()],
            hoverinfo="text",
        ), row=i, col=1)
        fig.update_yaxes(title_text=metric_title(panel["main_metric"].iloc[0], panel["mean"]),
                         range=_y_range(panel, scale, seeds["value"]), row=i, col=1)
        fig.update_xaxes(title_text="regime / pooling", row=i, col=1)
    fig.add_trace(_legend_key("mean of seeds (95% CI)", "diamond", 13))
    fig.add_trace(_legend_key("one seed", "circle-open", 8))
    # scattermode "group" sets each seed's circles beside its diamond instead of under it.
    fig.update_layout(title=dict(text=title), scattermode="group", scattergap=0.6, legend=LEGEND_TOP)
    return fig


@fails_soft("Per-layer curves")
def layer_curves(df: pd.DataFrame) -> go.Figure:
    """Main metric against hidden-state layer for cls and mean, where records exist at two or more layers."""
    title = "Per-layer ablation: which hidden layer to read (cls and mean), mean and 95% CI across seeds"
    _, agg, msg = _prepared(df, title, lambda d: d["pooling"].isin(LAYER_POOLINGS), "no cls or mean records")
    if msg:
        return msg
    # A curve needs two points: keep (task, model, regime, pooling, setup) lines with 2+ layers.
    lines = agg.groupby(["task", "model", "regime", "pooling", "setup"])["layer"].transform("nunique")
    agg = agg[lines >= 2]
    if agg.empty:
        return message(title, "no layer records: cls or mean need records at two or more layers "
                              "(e.g. `python -m berteval run ... --layers -1,5,3`)")
    keys = sorted(agg.groupby(["task", "model", "regime"]).groups)
    fig = _panels([f"{task} · {model} · {regime}" for task, model, regime in keys])
    shown = set()
    for i, (task, model, regime) in enumerate(keys, start=1):
        panel = agg[(agg["task"] == task) & (agg["model"] == model) & (agg["regime"] == regime)]
        scale = metric_scale(panel["mean"])
        order = sorted(panel["layer_label"].unique(), key=_layer_sort)
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
                hovertext=[_hover(r, scale) for _, r in line.iterrows()], hoverinfo="text",
            ), row=i, col=1)
            shown.add(name)
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order,
                         title_text="hidden-state layer (index; last = final layer)", row=i, col=1)
        fig.update_yaxes(title_text=metric_title(panel["main_metric"].iloc[0], panel["mean"]),
                         range=_y_range(panel, scale), row=i, col=1)
    # Nudge each pooling's points sideways so whiskers of close curves do not merge into one bar.
    fig.update_layout(scattermode="group", scattergap=0.85, title=dict(text=title),
                      legend=dict(LEGEND_TOP, title="pooling"))
    return fig


@fails_soft("Task x pooling heatmap")
def task_pooling_heatmap(df: pd.DataFrame) -> go.Figure:
    """Per model, tasks (and regimes) by poolings at the last layer; colour is relative within each row."""
    title = "Task × pooling per model (last layer): colour ranks poolings within each task, text is the score"
    _, agg, msg = _prepared(df, title, lambda d: d["layer"] == -1, "no last-layer records (layer -1)")
    if msg:
        return msg
    models = sorted(agg["model"].unique())
    # Each model's panel is as tall as its task rows, so a model with one row is one strip, not a wall.
    n_rows = [len(agg[agg["model"] == m][["task", "regime"]].drop_duplicates()) for m in models]
    fig = _panels(models, panel_px=[75 * k for k in n_rows])
    for i, model in enumerate(models, start=1):
        m = agg[agg["model"] == model]
        # A cell averages seeds of one setup; when setups differ, the most-seeded one speaks.
        m = m.sort_values("n_seeds", ascending=False).drop_duplicates(["task", "regime", "pooling"])
        cols = data.pooling_order(agg["pooling"])  # the same columns for every model, so panels line up
        rows = sorted(m.groupby(["task", "regime"]).groups, key=lambda k: (k[0], _regime_rank(k[1])))
        z, text, hover = [], [], []
        for task, regime in rows:
            r = m[(m["task"] == task) & (m["regime"] == regime)].set_index("pooling")
            scale = metric_scale(r["mean"])
            lo, hi = r["mean"].min(), r["mean"].max()
            zr, tr, hr = [], [], []
            for p in cols:
                if p not in r.index:
                    zr.append(None), tr.append("—"), hr.append(f"{task} · {regime} · {p}: not measured")
                    continue
                v = r.loc[p, "mean"]
                # 0 = this task's worst pooling, 1 = its best; a lone pooling sits in the middle.
                zr.append(0.5 if hi == lo else (v - lo) / (hi - lo))
                tr.append(f"{fmt(v, scale)}<br>±{fmt(r.loc[p, 'std'], scale)}")
                hr.append(f"{task} · {regime} · {p}<br>{r.loc[p, 'main_metric']} {fmt(v, scale)} "
                          f"± {fmt(r.loc[p, 'std'], scale)} (std), {r.loc[p, 'n_seeds']} seed(s)"
                          + ("<br>the only pooling measured here: no rank" if hi == lo else ""))
            z.append(zr), text.append(tr), hover.append(hr)
        metric = dict(zip(m["task"], m["main_metric"]))
        ylabels = [f"{task} · {regime}<br>({METRIC_NAMES.get(metric[task], metric[task])})" for task, regime in rows]
        fig.add_trace(go.Heatmap(
            z=z, x=cols, y=ylabels, text=text, texttemplate="%{text}", textfont=dict(size=13),
            hovertext=hover, hoverinfo="text", coloraxis="coloraxis", xgap=3, ygap=3,
        ), row=i, col=1)
        fig.update_yaxes(autorange="reversed", title_text="task · regime", showgrid=False, row=i, col=1)
        fig.update_xaxes(title_text="pooling", showgrid=False, row=i, col=1)
    fig.update_layout(
        title=dict(text=title), margin=dict(l=140, r=40, t=110, b=60),
        coloraxis=dict(colorscale="Blues", cmin=0, cmax=1, colorbar=dict(
            title=dict(text="rank within task"), tickvals=[0, 1], ticktext=["worst", "best"])),
    )
    return fig


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
        a_only, b_only = pd.to_numeric(g["a_only"]).sum(), pd.to_numeric(g["b_only"]).sum()
        level = 2 if med < 0.01 else 1 if med < ALPHA else 0
        per_seed = "<br>".join(f"seed {s.seed}: p = {s.p_value:.3g} ({a} right only {s.a_only}, {b} right only "
                               f"{s.b_only})" for s in g.sort_values("seed").itertuples())
        # The matrix is symmetric; counts read from the row's side in both triangles.
        for row, col, mine, theirs in ((a, b, a_only, b_only), (b, a, b_only, a_only)):
            i, j = labels.index(row), labels.index(col)
            z[i][j] = level
            text[i][j] = f"{fmt_p(med)}{'★' if all_sig else ''}<br>{mine:.0f}:{theirs:.0f}"
            hover[i][j] = (f"<b>{row}</b> vs <b>{col}</b>, {len(g)} seed(s), median p = {med:.3g}"
                           f"{' (p<0.05 in every seed)' if all_sig else ''}<br>{per_seed}")
    return z, text, hover


@fails_soft("Significance")
def significance(df: pd.DataFrame) -> go.Figure:
    """Which pairs of pooling@layer differ: McNemar p-values from the records' paired tests."""
    title = ("Paired tests (McNemar exact, same examples, same seed): median p over seeds<br>"
             "<sup>★ = p<0.05 in every seed · a:b = examples only the row's / only the column's head gets right, "
             "summed over seeds</sup>")
    df, msg = _usable(df, title, needed=("model", "task", "regime", "pooling", "layer", "seed", "value",
                                         "main_metric", "paired_tests"))
    if msg:
        return msg
    p = data.pairs(df)
    if p.empty:
        return message(title, "no paired tests in these records (each record tests itself against earlier "
                              "records of its model, task, regime and seed)")
    keys = sorted(p.groupby(["task", "model", "regime"]).groups)
    # Square-ish cells: each panel grows with the number of pooling@layer heads it compares.
    n_heads = [len(set(g["a"]) | set(g["b"])) for _, g in p.groupby(["task", "model", "regime"])]
    fig = _panels([f"{task} · {model} · {regime}" for task, model, regime in keys],
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
        fig.update_yaxes(autorange="reversed", title_text="pooling@layer", showgrid=False, row=i, col=1)
        fig.update_xaxes(title_text="pooling@layer (compared with the row)", showgrid=False, row=i, col=1)
    fig.update_layout(
        title=dict(text=title), margin=dict(l=110, r=40, t=120, b=70),
        coloraxis=dict(cmin=0, cmax=2, colorscale=[[0, "#f2f2f2"], [0.33, "#f2f2f2"], [0.33, "#9ecae1"],
                                                   [0.67, "#9ecae1"], [0.67, "#2171b5"], [1, "#2171b5"]],
                       colorbar=dict(title=dict(text="median p"), tickvals=[1 / 3, 1, 5 / 3],
                                     ticktext=["n.s.", "p<0.05", "p<0.01"])),
    )
    return fig


FIGURES = {
    "ablation": pooling_ablation,
    "layers": layer_curves,
    "heatmap": task_pooling_heatmap,
    "significance": significance,
}


def all_figures(df: pd.DataFrame, band_frame: pd.DataFrame | None = None) -> dict[str, go.Figure]:
    return {name: (fn(df, band_frame) if name == "ablation" else fn(df)) for name, fn in FIGURES.items()}
