"""The examples behind the paired tests, for the app's leaderboard tab and the report.

`berteval.disagree.compare` does the work (the same code as `python -m berteval disagree`); this
module picks the records from the leaderboard's frame, turns the result into a table, and writes
the report's section: for every tested pair of last-layer heads (main setup, lowest seed), the
counts line and the examples each head gets right that the other gets wrong, most confidently
wrong first. Predictions are read beside each record's file (`predictions/<task>/<run_id>.json`),
so records from a downloaded snapshot work the same as the committed ones. Texts need the data
dir (`--data-dir` / $BERTEVAL_DATA); without it ids and labels still show. Never raises.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from berteval import disagree
from berteval.errors import BertevalError
from berteval.record_lookup import short_name
from berteval.records import read_records

from . import data
from .labels import regime_name, task_name

COLUMNS = ["right", "id", "gold", "head A", "head B", "text"]
EMPTY = pd.DataFrame(columns=COLUMNS)


def heads(df: pd.DataFrame, task, model, regime, seed) -> list[str]:
    """The heads (pooling@layer) one run has, for the two pickers."""
    if df is None or df.empty:
        return []
    g = data.filter_records(df, task=task, model=model, regime=regime)
    if seed not in (None, "", "all"):
        g = g[g["seed"].astype(str) == str(seed)]
    return sorted({_head(p, lay) for p, lay in zip(g["pooling"], g["layer"])},
                  key=lambda h: (h.split("@")[1] if "@" in h else "", h))


def _head(pooling: str, layer: int) -> str:
    return pooling if int(layer) == -1 else f"{pooling}@{int(layer)}"


def _record(df: pd.DataFrame, task, model, regime, seed, head: str):
    pooling, layer = disagree.parse_head(head)
    rows = df[(df["task"] == task) & (df["model"] == model) & (df["regime"] == regime)
              & (df["seed"].astype(str) == str(seed)) & (df["pooling"] == pooling) & (df["layer"] == layer)]
    if rows.empty:
        raise BertevalError(f"no record of {head} for {short_name(model)} {task} {regime} seed {seed}")
    rows = data.main_setups(rows)
    file = rows.iloc[0]["file"]
    recs, _ = read_records([file])
    rec = next(r for r in recs if r.run_id == rows.iloc[0]["run_id"])
    return rec, Path(file).parent


def view(df: pd.DataFrame, task, model, regime, seed, head_a: str, head_b: str, data_dir=None,
         limit: int | None = 50) -> tuple[str, pd.DataFrame]:
    """(a Markdown summary, a table of disagreeing examples) for two heads of one run; a message on any problem."""
    try:
        if not all(x not in (None, "", "all") for x in (task, model, regime, seed, head_a, head_b)):
            return "Pick a task, model, regime and seed (the filters above), then two heads.", EMPTY
        if head_a == head_b:
            return "Pick two different heads.", EMPTY
        a, root = _record(df, task, model, regime, seed, head_a)
        b, _ = _record(df, task, model, regime, seed, head_b)
        d = disagree.compare(task, a, b, root=root, data_dir=data_dir)
    except BertevalError as exc:
        return f"⚠️ {exc}", EMPTY
    except Exception as exc:  # noqa: BLE001: a view never raises into the UI
        return f"⚠️ could not compare these heads: {type(exc).__name__}: {exc}", EMPTY
    counts = d.mcnemar_counts()
    summary = f"**{d.header()}** ({task_name(task)}, {regime_name(regime)}, {short_name(model)}, seed {seed}, " \
              f"{d.n_eval:,} examples)."
    if counts is not None:
        summary += f" The records' McNemar test counted {counts[0]} and {counts[1]}."
    if limit is not None and d.n > 2 * limit:
        summary += f" Showing the {limit} most confidently wrong of each kind."
    if d.note:
        summary += f"\n\n{d.note}."
    rows = [{"right": d.name_a if e in d.a_only else d.name_b, "id": e.id, "gold": e.gold,
             "head A": disagree._pred(e.pred_a, e.conf_a), "head B": disagree._pred(e.pred_b, e.conf_b),
             "text": e.text or ""} for e in d.examples(limit)]
    return summary, pd.DataFrame(rows, columns=COLUMNS).rename(
        columns={"head A": f"{d.name_a} says", "head B": f"{d.name_b} says"})


def report_html(df: pd.DataFrame, data_dir=None, per_kind: int = 3) -> str:
    """For every tested pair of last-layer heads (main setup, lowest seed): counts and the top examples."""
    if df is None or df.empty:
        return "<p>No records.</p>"
    main = data.main_setups(df)
    main = main[main["layer"] == -1]
    p = data.pairs(main)
    if p.empty:
        return "<p>No paired tests in these records.</p>"
    p = p[(p["a_layer"] == -1) & (p["b_layer"] == -1)]
    out = []
    no_text = False
    for (task, model, regime), g in p.groupby(["task", "model", "regime"], sort=True):
        seed = int(g["seed"].min())
        items = []
        for r in g[g["seed"] == seed].itertuples():
            summary, table = view(main, task, model, regime, seed, r.a_pooling, r.b_pooling, data_dir, per_kind)
            if not table.empty and table["text"].eq("").all():
                table, no_text = table.drop(columns=["text"]), True
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
                           for row in table.itertuples(index=False))
            head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
            # Under the group's heading the counts line says it all (the view's sentence repeats the context).
            first = summary.splitlines()[0]
            line = first.split("**")[1] if first.count("**") >= 2 else first
            items.append(f"<details><summary><b>{html.escape(line)}</b></summary>"
                         f'<div class="scroll"><table class="examples"><thead><tr>{head}</tr></thead>'
                         f"<tbody>{rows}</tbody></table></div></details>")
        out.append(f"<h3>{html.escape(task_name(task))} · {html.escape(regime_name(regime))} · "
                   f"{html.escape(short_name(model))} (seed {seed})</h3>" + "".join(items))
    note = ("<p><i>Texts are not shown: this report was written without a data dir (<code>python -m leaderboard "
            "--data-dir ../shared/data</code> or <code>BERTEVAL_DATA</code> adds them).</i></p>" if no_text else "")
    return note + "".join(out)

