"""The first view: one compact table per task and one plain sentence of what its records say.

The question the page is about is which vector a head should read: the `[CLS]` state, `pooler_output` or a
mean over tokens. So each task opens on models x poolings with `cls`, `pooler` and `mean` first (last layer,
each group's main setup, the mean over seeds), the row's best head of any pooling beside them, and a sentence
generated from the records: the best head measured, then, on the model with the most records, which of the
three reads best in each regime and whether the paired tests (McNemar or a paired bootstrap, largest p over
seeds, Holm-adjusted: bands.py) separate it from the other two. Bold marks a head in rank band 1 of its row
(nothing measured beats it). Everything else (every pooling and layer, the curves, the tests, the long
findings) is below it, on demand. A task whose records are all k-fold estimates (QNLI, scored over its dev
set alone) gets the same table from its estimates, said to be estimates and never bolded, since estimates
are never ranked. Pure functions of the records frame; `as_markdown` for the app, `as_html` for the report.
"""

from __future__ import annotations

import html
import math

import pandas as pd

from berteval.metrics import METRICS
from berteval.models.base import DEFAULT_MODEL_ID
from berteval.record_lookup import short_name

from . import cells, data
from .figures.style import fmt, metric_scale
from .labels import metric_name, reading_order, regime_name, regime_order, task_name, task_rank

CORE = ("cls", "pooler", "mean")  # the three vectors the seed question asks about, first in every view
COLUMNS = ["model", "regime", *CORE, "best head (any pooling)", "seeds"]  # the model first: the row's name in view
LEGEND = ("Last layer, mean over seeds; **bold**: rank band 1 of its row (no head measured beats it by the paired "
          "tests); —: not measured. Every pooling, layer, interval and test is below.")


def _scale(metric: str, values) -> float:
    m = METRICS.get(metric)
    return (100.0 if m.scale == "0-100" else 1.0) if m is not None else metric_scale(values)


def _higher(metric: str) -> bool:
    m = METRICS.get(metric)
    return True if m is None else m.greater_is_better


def _cell(text: str) -> str:
    # A record field in a Markdown table cell: a '|' would end the cell (record fields are neutralised already).
    return str(text).replace("|", "∣")


def _aggregate(rows: pd.DataFrame, band_frame: pd.DataFrame | None) -> pd.DataFrame:
    agg = cells.select(rows, "main", -1)  # the cells the table's main rows and every figure read
    if agg.empty:
        return agg.assign(band=pd.Series(dtype=float))
    if band_frame is not None and not band_frame.empty:
        keys = ["model", "task", "regime", "pooling", "layer", "n_train", "dtype"]
        agg = agg.merge(band_frame[[*keys, "band"]], how="left", on=keys)
    else:
        agg = agg.assign(band=math.nan)
    return agg


# The reference encoder: what `--model default` records (tests/leaderboard/test_cells.py checks it against the
# committed `default` records). Every derived encoder and twin is read against it.
REFERENCE_MODEL = DEFAULT_MODEL_ID


def _reference_model(g: pd.DataFrame) -> str:
    """The model the sentence speaks of: the reference encoder where it has `cls`/`pooler`/`mean` heads here, else the
    one with the most of them (then the shortest name). Ties went to the shortest name, so SST-2's sentence spoke of
    wiki-bert-mini, not of the reference (issue 42)."""
    counts = g.assign(core=g["pooling"].isin(CORE)).groupby("model")["core"].sum()
    if counts.get(REFERENCE_MODEL, 0) >= 2:
        return REFERENCE_MODEL
    return sorted(counts.index, key=lambda m: (-int(counts[m]), len(m), m))[0]


def _ranked(g: pd.DataFrame, metric: str) -> pd.DataFrame:
    return g.sort_values("mean", ascending=not _higher(metric), kind="stable")


def _verdict(top: str, others: list[str], tests: pd.DataFrame) -> tuple[str, str]:
    """How the paired tests read the lead of `top` over `others` (pooling names, last layer), short ("ahead of
    both") and as the sentence says it; `tests`: the pair tests of this row's model, task and regime (Holm-adjusted
    over all of them)."""
    if tests is None or tests.empty:
        return "no paired tests", "no paired tests"
    holm = f"Holm-adjusted over the row's {len(tests)} pairs" if len(tests) > 1 else "one pair tested"
    separated, tested = [], []
    for o in others:
        h1, h2 = sorted((f"{top}@last", f"{o}@last"))
        row = tests[(tests["head_1"] == h1) & (tests["head_2"] == h2)]
        if row.empty:
            continue
        tested.append(o)
        if bool(row.iloc[0]["separated"]) and row.iloc[0]["better"] == f"{top}@last":
            separated.append(o)
    if not tested:
        return "no paired tests", "no paired tests"
    if len(separated) == len(others):
        short = "ahead of " + ("both" if len(others) == 2 else "the other")
    elif separated:
        short = f"ahead of {_names(separated)}, not of {_names([o for o in others if o not in separated])}"
    else:
        return "not separated", \
            f"the paired tests do not separate {'the two' if len(others) == 1 else 'these three'}, {holm}"
    return short, f"the paired tests put it {short}, {holm}"


def _with(regime: str) -> str:
    """The regime as the end of "`mean` reads best ...": "with a frozen probe", "fine-tuned", ..."""
    return {"probe": "with a frozen probe", "pretrained": "with the checkpoint's own head"}.get(
        regime, regime_name(regime) if regime_name(regime) != regime else f"under {regime}")


def _names(poolings: list[str]) -> str:
    names = [f"`{p}`" for p in poolings]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _best(g: pd.DataFrame, estimates_only: bool, usual) -> str:
    """"The best head measured is `mean`, frozen probe, on all-MiniLM-L6-v2 (0.810)"."""
    metric = g["main_metric"].iloc[0]
    scale = _scale(metric, g["mean"])
    label = "" if metric == "accuracy" else f"{metric_name(metric)} "
    best = _ranked(g, metric).iloc[0]
    what = "The best k-fold estimate" if estimates_only else "The best head measured"
    return (f"{what} is `{best['pooling']}`, {regime_name(best['regime'])}, on {short_name(best['model'])} "
            f"({label}{fmt(best['mean'], scale)}{data.trained_on(best['n_train'], usual)})")


def _reads(task: str, g: pd.DataFrame, tests: pd.DataFrame, estimates_only: bool) -> tuple[str, list[dict]]:
    """(the reference model, per regime: which of the three vectors reads best on it, the others, the verdict)."""
    metric = g["main_metric"].iloc[0]
    ref = _reference_model(g)
    out = []
    for regime in regime_order(g.loc[g["model"] == ref, "regime"]):
        r = g[(g["model"] == ref) & (g["regime"] == regime)]
        core = _ranked(r[r["pooling"].isin(CORE)], metric)
        if len(core) < 2:
            continue
        top, others = core.iloc[0], core.iloc[1:]
        t = tests[(tests["model"] == ref) & (tests["task"] == task) & (tests["regime"] == regime)] \
            if tests is not None and not tests.empty else None
        verdict = (("never ranked", "estimates are never ranked") if estimates_only
                   else _verdict(top["pooling"], list(others["pooling"]), t))
        span = r[r["pooling"] == "span"]
        out.append({"regime": regime, "top": top, "others": others, "verdict": verdict,
                    "span": None if span.empty else span.iloc[0]["mean"]})
    return ref, out


def _sentence(task: str, g: pd.DataFrame, tests: pd.DataFrame, estimates_only: bool, usual) -> str:
    scale = _scale(g["main_metric"].iloc[0], g["mean"])
    ref, reads = _reads(task, g, tests, estimates_only)
    clauses = []
    for x in reads:
        against = " and ".join(f"{fmt(o['mean'], scale)} for `{o['pooling']}`" for _, o in x["others"].iterrows())
        clause = (f"`{x['top']['pooling']}` reads best {_with(x['regime'])}, {fmt(x['top']['mean'], scale)} against "
                  f"{against} ({x['verdict'][1]})")
        if x["span"] is not None:  # span QA: the per-token head beside the one-vector heads
            clause += f", and the per-token `span` head reads {fmt(x['span'], scale)}"
        clauses.append(clause)
    text = _best(g, estimates_only, usual)
    if clauses:
        text += f"; of the three vectors on {short_name(ref)}, " + "; ".join(clauses)
    return text + "."


def _headline(task: str, g: pd.DataFrame, tests: pd.DataFrame, estimates_only: bool, usual) -> dict:
    """One line per task for the first screen: the best head measured, and the three vectors on the reference
    encoder per regime ("frozen probe: **`mean` 0.810**, `cls` 0.765, `pooler` 0.765 (ahead of both)")."""
    metric = g["main_metric"].iloc[0]
    scale = _scale(metric, g["mean"])
    best = _ranked(g, metric).iloc[0]
    ref, reads = _reads(task, g, tests, estimates_only)
    parts = []
    for x in reads:
        others = ", ".join(f"`{o['pooling']}` {fmt(o['mean'], scale)}" for _, o in x["others"].iterrows())
        span = f", `span` {fmt(x['span'], scale)}" if x["span"] is not None else ""
        parts.append(f"{regime_name(x['regime'])}: `{x['top']['pooling']}` **{fmt(x['top']['mean'], scale)}**, "
                     f"{others}{span} ({x['verdict'][0]})")
    return {"best": f"`{best['pooling']}` {fmt(best['mean'], scale)}, {regime_name(best['regime'])}, "
                    f"{short_name(best['model'])}{data.trained_on(best['n_train'], usual)}",
            "reference": short_name(ref), "reads": "; ".join(parts) or "—"}


def _rows(g: pd.DataFrame, metric: str, ranked: bool, usual) -> pd.DataFrame:
    scale = _scale(metric, g["mean"])
    out = []
    keys = reading_order(g.groupby(["regime", "model"]).groups, ("regime", "model"))
    regimes = regime_order(g["regime"])
    # within a regime the reference encoder first (the sentence above speaks of it), then the rest alphabetically
    for regime, model in sorted(keys, key=lambda k: (regimes.index(k[0]), k[1] != REFERENCE_MODEL)):
        r = g[(g["regime"] == regime) & (g["model"] == model)]
        several = len(r) > 1

        def shown(row) -> str:
            value = fmt(row["mean"], scale)
            return f"**{value}**" if ranked and several and row.get("band") == 1 else value

        cells = {p: (shown(r[r["pooling"] == p].iloc[0]) if (r["pooling"] == p).any() else "—") for p in CORE}
        best = _ranked(r, metric).iloc[0]
        seeds = sorted(set(int(n) for n in r["n_seeds"]))
        # One train size per row: main_setups keeps one setup per model x task x regime.
        regime_label = regime_name(regime) + data.trained_on(r.iloc[0]["n_train"], usual)
        out.append({"regime": regime_label, "model": short_name(model), **cells,
                    "best head (any pooling)": f"`{best['pooling']}` {shown(best)}",
                    "seeds": f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])})
    return pd.DataFrame(out, columns=COLUMNS)


def _title(task: str, g: pd.DataFrame, metric: str) -> str:
    n_eval = int(g["n_eval"].max()) if not g.empty else 0
    scale = "0–100" if _scale(metric, g["mean"]) == 100 else "0–1"
    return f"{task_name(task)}: {metric_name(metric)} ({scale}) on {n_eval:,} dev examples"


def overview(rows: pd.DataFrame, band_frame: pd.DataFrame | None = None, tests: pd.DataFrame | None = None,
             estimates: pd.DataFrame | None = None) -> list[dict]:
    """[{task, title, sentence, table, estimates_only}] per task in the task registry's order.

    `rows`: the records (k-fold estimates left out; data.is_estimate), `band_frame` and `tests` as bands.py
    computes them from every record, `estimates`: the k-fold records (data.estimates) of the same filters."""
    agg = _aggregate(rows, band_frame) if rows is not None and not rows.empty else pd.DataFrame()
    whole = pd.DataFrame()
    if estimates is not None and not estimates.empty:
        est = estimates[estimates["kfold_whole"].astype(bool)] if "kfold_whole" in estimates else estimates
        if not est.empty:
            whole = _aggregate(est.assign(layer_label=est["layer"].map(data.layer_label), data_short="",
                                          model_revision="", task_version="", dtype="", git_short="",
                                          reproduce=""), None)
    tasks = sorted(set(agg["task"] if not agg.empty else []) | set(whole["task"] if not whole.empty else []),
                   key=task_rank)
    out = []
    for task in tasks:
        g = agg[agg["task"] == task] if not agg.empty else agg
        estimates_only = g.empty
        if estimates_only:
            g = whole[whole["task"] == task]
        metric = g["main_metric"].iloc[0]
        usual = data.usual_train(g)  # the train size the sentence and the table both measure rows against
        out.append({"task": task, "title": _title(task, g, metric),
                    "sentence": _sentence(task, g, tests, estimates_only, usual),
                    "headline": _headline(task, g, tests, estimates_only, usual),
                    "table": _rows(g, metric, ranked=not estimates_only, usual=usual), "estimates_only": estimates_only})
    return out


def markdown_table(df: pd.DataFrame) -> str:
    """A frame as a Markdown table, each cell neutralised for Markdown (the first view, the twins, the grids)."""
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns)
    body = "\n".join("| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False))
    return f"{head}\n{body}"


def as_markdown(items: list[dict]) -> str:
    """Each task's view; with several tasks, first one row per task (headline_table): the answer to each task on
    one screen, its every-model view below."""
    if not items:
        return "No records match these filters."
    parts = []
    if len(items) > 1:
        parts.append("#### What the records say, per task\n" + headline_markdown(items))
    for it in items:
        note = (" *k-fold estimates only (each dev example scored by a head trained on the other folds): shown "
                "apart, never ranked with official-dev rows.*" if it["estimates_only"] else "")
        parts.append(f"#### {it['title']}\n{it['sentence']}{note}\n\n{markdown_table(it['table'])}")
    return "\n\n".join(parts) + "\n\n" + LEGEND


HEADLINE_COLUMNS = ["task", "best head measured", "the three vectors on {ref}, per regime"]


def headline_table(items: list[dict]) -> pd.DataFrame:
    """One row per task: what the first screen shows (the best head; cls, pooler and mean on the reference encoder,
    the best in bold, with what the paired tests say)."""
    ref = next((it["headline"]["reference"] for it in items), "")
    cols = [c.format(ref=ref) for c in HEADLINE_COLUMNS]
    rows = [[task_name(it["task"]) + (" (estimate)" if it["estimates_only"] and "fold" not in task_name(it["task"])
                                      else ""),
             it["headline"]["best"], it["headline"]["reads"]] for it in items]
    return pd.DataFrame(rows, columns=cols)


def headline_markdown(items: list[dict]) -> str:
    return markdown_table(headline_table(items)) if items else "No records match these filters."


def headline_html(items: list[dict]) -> str:
    if not items:
        return "<p>No records.</p>"
    t = headline_table(items)
    head = "".join(f"<th>{_inline(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{_inline(v)}</td>" for v in row) + "</tr>" for row in t.itertuples(index=False))
    return f'<table class="compact headline"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _inline(text: str) -> str:
    """`code` and **bold** of a generated sentence or cell as HTML; everything else escaped."""
    out = []
    for i, part in enumerate(html.escape(str(text)).split("`")):
        if i % 2:
            out.append(f"<code>{part}</code>")
        else:
            bits = part.split("**")
            out.append("".join(f"<b>{b}</b>" if j % 2 else b for j, b in enumerate(bits)))
    return "".join(out)


def as_html(items: list[dict]) -> str:
    if not items:
        return "<p>No records.</p>"
    parts = []
    for it in items:
        t = it["table"]
        head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
        body = "".join("<tr>" + "".join(f"<td>{_inline(v)}</td>" for v in row) + "</tr>"
                       for row in t.itertuples(index=False))
        note = (" <i>k-fold estimates only: shown apart, never ranked with official-dev rows.</i>"
                if it["estimates_only"] else "")
        parts.append(f'<div class="task-view"><h3>{html.escape(it["title"])}</h3><p>{_inline(it["sentence"])}{note}'
                     f'</p><table class="compact"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>')
    return "".join(parts) + f'<p class="caption">{_inline(LEGEND)}</p>'


def estimate_tables(est: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The k-fold records per task, one table each with that task's own metrics (SQuAD EM and F1, QNLI
    accuracy, ...): [(task title, DataFrame)]. Folds and the whole estimate alike, in file order."""
    if est is None or est.empty:
        return []
    from berteval.tasks import TASKS

    out = []
    for task in sorted(est["task"].unique(), key=task_rank):
        g = est[est["task"] == task]
        names = list(TASKS[task].metrics) if task in TASKS else sorted({k for m in g["metrics"] for k in m})
        rows = []
        for r in g.itertuples():
            row = {"regime": regime_name(r.regime), "model": short_name(r.model), "pooling": r.pooling,
                   "seed": r.seed, "train": f"{int(r.n_train):,}", "scored": f"{int(r.n_eval):,}"}
            for name in names:
                v = (r.metrics or {}).get(name)
                row[metric_name(name)] = "—" if v is None else (f"{v:.2f}" if _scale(name, [v]) == 100 else f"{v:.4f}")
            # the split last: the longest cell ("validation, k-fold by article (k=2): fold 1, 24 held-out articles")
            row["record"], row["split"] = f"`{r.run_id}`", str(r.split).removeprefix("validation, ")
            rows.append(row)
        out.append((task_name(task), pd.DataFrame(rows)))
    return out


def estimates_markdown(est: pd.DataFrame) -> str:
    """The k-fold records as Markdown tables, one per task (empty when there are none)."""
    tables = estimate_tables(est)
    if not tables:
        return ""
    parts = [f"**{title}**\n\n{markdown_table(t)}" for title, t in tables]
    return ("**Shown apart, never ranked: k-fold estimates.** Each dev example is scored by a head trained on "
            "the other folds (dev articles for SQuAD, dev pairs for QNLI), so these are not official-dev scores "
            "and never share a rank or a figure with them.\n\n" + "\n\n".join(parts))
