"""The leaderboard table: the per-seed aggregate, filtered, searched, sorted and exported as CSV.

One row per model x task x regime x pooling x layer (split further only where the setup
differs, e.g. a quick `--limit-train` run beside a full one). Numbers stay numbers so the
table sorts numerically and the CSV is re-readable; the `mean ± std` column is a display
convenience on top. Filters take what a UI hands over: None, "", "all", one value or a
list (an empty list means no restriction).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from berteval import markup
from berteval.store import write_atomic

from . import bands, cells, data

FILTERS = ("model", "task", "pooling", "regime")
COLUMNS = ["model", "task", "regime", "pooling", "layer", "main_metric", "mean ± std", "band", "mean", "std",
           "ci95_low", "ci95_high", "n_seeds", "seeds", "n_train", "n_eval", "data_short", "dtype",
           "model_revision", "task_version", "git_commits", "reproduce", "run_ids"]


def _mean_std(row: pd.Series) -> str:
    # Percent-scale metrics (SQuAD F1/EM) read best with one decimal, 0-1 metrics with four.
    digits = 1 if abs(row["mean"]) > 1 else 4
    return f"{row['mean']:.{digits}f} ± {row['std']:.{digits}f}"


def leaderboard_table(df: pd.DataFrame, model=None, task=None, pooling=None, regime=None, search: str | None = None,
                      sort_by: str | list[str] | None = None, ascending: bool | list[bool] = True,
                      band_frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """The aggregated table of the records in `df` (the long frame), after filters and a text search.

    `search` keeps rows where any cell contains every whitespace-separated word (case-insensitive).
    Default order: model, task, regime, then pooling in registry order, layers bottom-up, last layer last.
    `band` is each row's rank band (bands.py) from `band_frame` (default: computed from `df`; pass the bands of
    all records so a filter never changes a band); empty for a setup other than its group's main one.
    `reproduce` is the command that wrote the row's records, `run_ids` their record ids (seed order).
    """
    rows = data.filter_records(df, model=model, task=task, pooling=pooling, regime=regime)
    agg = cells.select(rows, "all", None).rename(columns={"layer_label": "layer_name"})
    if agg.empty:
        return pd.DataFrame(columns=COLUMNS)
    band_frame = bands.rank_bands(df) if band_frame is None else band_frame
    agg = agg.merge(_band_keys(band_frame), how="left", on=["model", "task", "regime", "pooling", "layer",
                                                              "n_train", "dtype"])
    agg["band"] = agg["band"].map(lambda b: "" if pd.isna(b) else int(b)).astype(object)
    agg["layer"] = agg["layer_name"]
    agg["mean ± std"] = agg.apply(_mean_std, axis=1)
    table = agg[COLUMNS]
    if search and search.strip():
        # pandas 3 keeps NaN through astype(str), so stringify cell by cell.
        text = table.map(lambda v: "" if pd.isna(v) else str(v)).agg(" ".join, axis=1).str.lower()
        for word in search.lower().split():
            table = table[text[table.index].str.contains(word, regex=False)]
    if sort_by:
        return table.sort_values(sort_by, ascending=ascending, kind="stable").reset_index(drop=True)
    order = data.pooling_order(table["pooling"])
    key = pd.DataFrame({"p": table["pooling"].map(order.index),
                        # layers bottom-up as numbers; "last" after every index
                        "l": table["layer"].map(lambda x: 10**6 if x == "last" else int(x))})
    from berteval.tasks import TASKS

    tasks = list(TASKS)  # the registry's reading order (SST-2 first), not the alphabet's
    key["t"] = table["task"].map(lambda t: tasks.index(t) if t in tasks else len(tasks))
    table = table.assign(_p=key["p"], _l=key["l"], _t=key["t"]).sort_values(["model", "_t", "regime", "_p", "_l"],
                                                                           kind="stable")
    return table.drop(columns=["_p", "_l", "_t"]).reset_index(drop=True)


def choices(df: pd.DataFrame) -> dict[str, list[str]]:
    """The values each filter can take, for dropdowns."""
    if df is None or df.empty:
        return {name: [] for name in FILTERS}
    return {name: sorted(str(v) for v in df[name].dropna().unique()) for name in FILTERS}


def to_csv(table: pd.DataFrame, path: str | os.PathLike | None = None) -> str:
    """The table as CSV text; also written to `path` when one is given (e.g. for a download button)."""
    # A cell a spreadsheet would run as a formula (a model named =HYPERLINK(...)) is written as text.
    safe = table.copy()
    for col in safe.columns:
        if safe[col].dtype == object or pd.api.types.is_string_dtype(safe[col]):
            safe[col] = safe[col].map(markup.csv_cell)
    text = safe.to_csv(index=False)
    if path is not None:
        write_atomic(Path(path), text.encode("utf-8"))  # whole or not at all, and an error that says which
    return text


def _band_keys(band_frame: pd.DataFrame) -> pd.DataFrame:
    """Bands keyed like the aggregate (bands cover each group's main setup: its n_train and dtype)."""
    cols = ["model", "task", "regime", "pooling", "layer", "n_train", "dtype", "band"]
    if band_frame is None or band_frame.empty or "n_train" not in band_frame:
        return pd.DataFrame(columns=cols)
    return band_frame[cols]
