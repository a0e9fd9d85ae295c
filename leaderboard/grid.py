"""One model's scores as a grid, written from the records: a row per task, a column per pooling, mean ± std.

The findings pages quote these grids (docs/findings/pair-tasks.md: each encoder's probes and fine-tunes on
MRPC, RTE, QNLI and STS-B); printing them from the records keeps every figure there traceable and lets a
reader regenerate a table after adding seeds. Each cell reads the main setup of its model x task x regime
(`data.main_setups`), last layer; a k-fold estimate (QNLI from dev alone) says so in its row label and is
never mixed into an official-dev row. A cell with fewer seeds than the grid's most says how many, so an
unfinished sweep cannot pass for a finished one; a reading never run is "not run".

`python -m leaderboard.grid --model default+mlm-nsp --regime finetune --tasks mrpc,rte,qnli,stsb` prints the
Markdown table and how long its records took (the sum of their wall times). Pure functions; light (no torch).
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from berteval.models.loading import DEFAULT_MODEL_ID

from . import data
from .figures.style import metric_scale
from .labels import metric_name, task_name, task_rank
from .overview import markdown_table

DEFAULT_ALIAS = "default"
NOT_RUN = "not run"


def recorded_name(model: str, known) -> str:
    """The name records carry for `model`: as given when records hold it, `default...` spelled as the embedded
    model's hub id (`default+mlm-nsp` -> sentence-transformers/all-MiniLM-L6-v2+mlm-nsp), else the one recorded
    name that ends with `/model` (`wiki-bert-mini` -> berteval/wiki-bert-mini)."""
    known = set(known)
    if model in known:
        return model
    if model == DEFAULT_ALIAS or model.startswith(DEFAULT_ALIAS + "+"):
        return DEFAULT_MODEL_ID + model[len(DEFAULT_ALIAS):]
    tails = sorted(k for k in known if k.endswith("/" + model))
    return tails[0] if len(tails) == 1 else model


def _fmt(mean: float, std: float, n: int, scale: float, most: int) -> str:
    # 0-1 metrics with four decimals, x100 ones (STS-B's Pearson, SQuAD's F1) with two, as the docs print them.
    digits = 2 if scale == 100 else 4
    text = f"{mean:.{digits}f}" if n < 2 else f"{mean:.{digits}f} ± {std:.{digits}f}"
    return text if n == most else f"{text} ({n} seed{'s' if n != 1 else ''})"


def grid(df: pd.DataFrame, model: str, regime: str, tasks=None, poolings=None) -> tuple[pd.DataFrame, float]:
    """The display grid (a `task (metric)` column, then one per pooling) and the summed wall seconds of the
    records it reads. Tasks in registry order, poolings in registry order unless `poolings` gives them."""
    if df is None or df.empty:
        return pd.DataFrame(columns=["task (metric)"]), 0.0
    rows = df[(df["model"] == recorded_name(model, df["model"].unique())) & (df["regime"] == regime)
              & (df["layer"] == -1)]
    if tasks:
        rows = rows[rows["task"].isin(list(tasks))]
    rows = data.main_setups(rows)
    if rows is None or rows.empty:
        return pd.DataFrame(columns=["task (metric)"]), 0.0
    cols = list(poolings) if poolings else data.pooling_order(rows["pooling"])
    agg = data.aggregate(rows)
    most = int(agg["n_seeds"].max())
    out = []
    for task in sorted(dict.fromkeys(agg["task"]), key=task_rank):
        g = agg[agg["task"] == task]
        estimate = bool(data.is_estimate(rows[rows["task"] == task]).any())
        base, _, note = task_name(task).partition(" (")  # "QNLI (5-fold over dev)" -> "QNLI", "5-fold over dev"
        label = (f"{base} ({metric_name(g['main_metric'].iloc[0])}" + (f", {note.rstrip(')')}" if note else "")
                 + (": an estimate)" if estimate else ")"))
        scale = metric_scale(g["mean"])
        cells = {}
        for p in cols:
            hit = g[g["pooling"] == p]
            cells[p] = NOT_RUN if hit.empty else _fmt(hit["mean"].iloc[0], hit["std"].iloc[0],
                                                       int(hit["n_seeds"].iloc[0]), scale, most)
        out.append({"task (metric)": label, **cells})
    return pd.DataFrame(out, columns=["task (metric)", *cols]), float(rows["wall_s"].fillna(0).sum())


def as_markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "No records for this model and regime."
    return markdown_table(table.rename(columns=lambda c: c if c == "task (metric)" else f"`{c}`")) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m leaderboard.grid",
                                 description="Print one model's scores as a Markdown grid (task x pooling, mean ± "
                                             "std over seeds) from the records, and the wall time they took.")
    ap.add_argument("--model", required=True, help="as recorded, or default[+derivation], or a twin's short name")
    ap.add_argument("--regime", default="probe", help="probe (default), finetune, ...")
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: every task with records)")
    ap.add_argument("--pooling", default="", help="comma-separated poolings, in column order (default: all found)")
    ap.add_argument("files", nargs="*", help="record files (.jsonl) or folders; default leaderboard/results/")
    args = ap.parse_args(argv)
    df, problems = data.load(args.files or None)
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    table, wall = grid(df, args.model, args.regime, split(args.tasks), split(args.pooling))
    print(as_markdown(table))
    if not table.empty:
        # A fine-tune's wall_s is its training and scoring; a probe's is its fit alone (its encoding, shared by
        # the command's cells, is the record's config.encode_wall_s).
        print(f"\nThe records' wall_s add up to {wall:,.0f} s ({wall / 60:,.1f} min).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
