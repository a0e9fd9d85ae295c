"""One model's scores as a grid, written from the records: a row per task, a column per pooling, mean ± std.

The findings pages quote these grids (docs/findings/pair-tasks.md: each encoder's probes and fine-tunes on
MRPC, RTE, QNLI and STS-B); printing them from the records keeps every figure there traceable and lets a
reader regenerate a table after adding seeds. Each cell reads the main setup of its model x task x regime
(`data.main_setups`), last layer; a k-fold estimate (QNLI from dev alone) says so in its row label and is
never mixed into an official-dev row. A cell with fewer seeds than the grid's most says how many, so an
unfinished sweep cannot pass for a finished one; a reading never run is "not run".

`python -m leaderboard.grid --model default+mlm-nsp --regime finetune --tasks mrpc,rte,qnli,stsb` prints the
Markdown table and how long its records took (the sum of their wall times); `--task mrpc --models
default,default+mlm-nsp,wiki-bert-mini` turns it round: one task, a row per model. Pure functions; light (no
torch).
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from berteval.models.base import DEFAULT_MODEL_ID

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


def _cells(agg: pd.DataFrame, cols: list[str], scale: float, most: int) -> dict[str, str]:
    """One display row's pooling cells from the aggregate rows of one task (and model)."""
    cells = {}
    for p in cols:
        hit = agg[agg["pooling"] == p]
        cells[p] = NOT_RUN if hit.empty else _fmt(hit["mean"].iloc[0], hit["std"].iloc[0],
                                                   int(hit["n_seeds"].iloc[0]), scale, most)
    return cells


def _task_label(task: str, agg: pd.DataFrame, rows: pd.DataFrame) -> str:
    """"MRPC (accuracy)"; a k-fold task says it is an estimate ("QNLI (accuracy, 5-fold over dev: an estimate)")."""
    estimate = bool(data.is_estimate(rows[rows["task"] == task]).any())
    base, _, note = task_name(task).partition(" (")  # "QNLI (5-fold over dev)" -> "QNLI", "5-fold over dev"
    return (f"{base} ({metric_name(agg['main_metric'].iloc[0])}" + (f", {note.rstrip(')')}" if note else "")
            + (": an estimate)" if estimate else ")"))


def _select(df: pd.DataFrame, regime: str, recorded_models=None, tasks=None) -> pd.DataFrame | None:
    """The main-setup, last-layer records of `regime` (for `recorded_models`, names as the records carry them,
    and `tasks` when given)."""
    rows = df[(df["regime"] == regime) & (df["layer"] == -1)]
    if recorded_models is not None:
        rows = rows[rows["model"].isin(list(recorded_models))]
    if tasks:
        rows = rows[rows["task"].isin(list(tasks))]
    return data.main_setups(rows)


def grid(df: pd.DataFrame, model: str, regime: str, tasks=None, poolings=None) -> tuple[pd.DataFrame, float]:
    """The display grid (a `task (metric)` column, then one per pooling) and the summed wall seconds of the
    records it reads. Tasks in registry order, poolings in registry order unless `poolings` gives them."""
    if df is None or df.empty:
        return pd.DataFrame(columns=["task (metric)"]), 0.0
    rows = _select(df, regime, [recorded_name(model, df["model"].unique())], tasks)
    if rows is None or rows.empty:
        return pd.DataFrame(columns=["task (metric)"]), 0.0
    cols = list(poolings) if poolings else data.pooling_order(rows["pooling"])
    agg = data.aggregate(rows)
    most = int(agg["n_seeds"].max())
    out = []
    for task in sorted(dict.fromkeys(agg["task"]), key=task_rank):
        g = agg[agg["task"] == task]
        out.append({"task (metric)": _task_label(task, g, rows), **_cells(g, cols, metric_scale(g["mean"]), most)})
    return pd.DataFrame(out, columns=["task (metric)", *cols]), float(rows["wall_s"].fillna(0).sum())


def task_grid(df: pd.DataFrame, task: str, models: list[str], regime: str,
              poolings=None) -> tuple[pd.DataFrame, float, str]:
    """One task across models: a row per model (in the order given, named as given), a column per pooling;
    the summed wall seconds of its records and the task's label. A model with no records of the task shows
    every cell "not run", so a missing encoder is visible, not dropped. Seeds are counted against the most any
    cell of the table has."""
    empty = pd.DataFrame(columns=["model"])
    if df is None or df.empty:
        return empty, 0.0, task_name(task)
    known = df["model"].unique()
    recorded = {m: recorded_name(m, known) for m in models}
    rows = _select(df, regime, recorded.values(), [task])
    if rows is None or rows.empty:
        return empty, 0.0, task_name(task)
    cols = list(poolings) if poolings else data.pooling_order(rows["pooling"])
    agg = data.aggregate(rows)
    most = int(agg["n_seeds"].max())
    scale = metric_scale(agg["mean"])
    out = [{"model": f"`{m}`", **_cells(agg[agg["model"] == recorded[m]], cols, scale, most)} for m in models]
    return (pd.DataFrame(out, columns=["model", *cols]), float(rows["wall_s"].fillna(0).sum()),
            _task_label(task, agg, rows))


def as_markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "No records for this model and regime."
    return markdown_table(table.rename(columns=lambda c: c if c in ("task (metric)", "model") else f"`{c}`")) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m leaderboard.grid",
                                 description="Print scores as a Markdown grid (mean ± std over seeds) from the "
                                             "records, and the wall time they took: one model's task x pooling "
                                             "(--model), or one task's model x pooling (--task with --models).")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="as recorded, or default[+derivation], or a twin's short name")
    which.add_argument("--task", help="one task: a row per model of --models")
    ap.add_argument("--models", default="", help="with --task: comma-separated models, in row order")
    ap.add_argument("--regime", default="probe", help="probe (default), finetune, ...")
    ap.add_argument("--tasks", default="", help="with --model: comma-separated task names (default: every task "
                                                "with records)")
    ap.add_argument("--pooling", default="", help="comma-separated poolings, in column order (default: all found)")
    ap.add_argument("files", nargs="*", help="record files (.jsonl) or folders; default leaderboard/results/")
    args = ap.parse_args(argv)
    split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    if args.task and not split(args.models):
        ap.error("--task needs --models, e.g. --models default,default+mlm-nsp,wiki-bert-mini")
    df, problems = data.load(args.files or None)
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    if args.task:
        table, wall, label = task_grid(df, args.task, split(args.models), args.regime, split(args.pooling))
        if table.empty:
            # A typo or a regime never run: say which tasks the records do hold for it.
            held = sorted(set(df["task"][df["regime"] == args.regime]), key=task_rank) if not df.empty else []
            print(f"No {args.regime} records of task {args.task!r} for {args.models}; tasks with {args.regime} "
                  f"records: {', '.join(held) or 'none'}.")
            return 0
        print(f"{label}:\n")
    else:
        table, wall = grid(df, args.model, args.regime, split(args.tasks), split(args.pooling))
    print(as_markdown(table))
    if not table.empty:
        # A fine-tune's wall_s is its training and scoring; a probe's is its fit alone (its encoding, shared by
        # the command's cells, is the record's config.encode_wall_s).
        print(f"\nThe records' wall_s add up to {wall:,.0f} s ({wall / 60:,.1f} min).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
