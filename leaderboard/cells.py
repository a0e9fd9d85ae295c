"""Which cells a view reads: the one selection the table, the first view and every figure share.

A cell is one model x task x regime x pooling x layer in one setup (train size, dtype, data, ...), its seeds
averaged (`data.aggregate`). A model, task and regime can hold several setups: a learning curve's small training
sets beside the full one, a quick `--limit-train` run. Each view used to pick among them its own way, and they
disagreed: the heatmap took "the most-seeded setup", so with every learning-curve size at 5 seeds its SST-2 row
read cells trained on 115 to 1,843 sentences while the table and the first view read the full train set
(issue 42). Here the choice is made once: `mark_main` flags, over every record, the records of each group's main
setup (`data.main_setups`: the largest training set, then the most records), and `select` aggregates the rows a
filter leaves, keeping that flag. Because the flag is decided before any filter, filtering by pooling or model can
never move a cell to another setup. Each cell keeps `run_ids`, its records' ids in seed order: the figures carry
them as `customdata`, so a test (and a reader of the figure's JSON) can match every drawn number to its table row.
"""

from __future__ import annotations

import pandas as pd

from . import data

MAIN = data.MAIN_FLAG  # bool column of the long frame: the record belongs to its group's main setup


def mark_main(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with the MAIN column, decided over all of `df` (pass every ranked record, before any filter)."""
    if df is None or df.empty:
        return df if df is None else df.assign(**{MAIN: pd.Series(dtype=bool)})
    plain = df.drop(columns=[MAIN]) if MAIN in df else df
    keep = data.main_setups(plain).index
    return df.assign(**{MAIN: df.index.isin(keep)})


def main_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The records of each group's main setup: the flag where `mark_main` set it, else decided over `df` itself."""
    if df is None or df.empty:
        return df
    flagged = df if MAIN in df else mark_main(df)
    return df[flagged[MAIN].astype(bool).to_numpy()]


def select(rows: pd.DataFrame, setups: str = "main", layer: int | None = -1) -> pd.DataFrame:
    """The cells of `rows` (the long frame a filter left), aggregated over seeds.

    `setups`: "main" (each model x task x regime's main setup: the first view, the bands and every figure but the
    learning curves) or "all" (the table, and the learning curves, whose points are training sizes). `layer`: -1
    for the last layer (the pooling ablation, the heatmap), None for every layer. Columns: data.AGG_COLUMNS plus
    `main` (bool) and `setup` (what differs within the group, e.g. "train 115"; '' where one setup exists)."""
    if rows is None or rows.empty:
        return pd.DataFrame(columns=[*data.AGG_COLUMNS, "main", "setup"])
    flagged = rows if MAIN in rows else mark_main(rows)
    if setups == "main":
        flagged = flagged[flagged[MAIN].astype(bool).to_numpy()]
    elif setups != "all":
        raise ValueError(f"setups must be 'main' or 'all', not {setups!r}")
    if layer is not None:
        flagged = flagged[flagged["layer"] == layer]
    agg = data.aggregate(flagged)
    if agg.empty:
        return pd.DataFrame(columns=[*data.AGG_COLUMNS, "main", "setup"])
    # A cell is main when its records are: the aggregate groups by setup, so its records agree.
    main_ids = set(flagged.loc[flagged[MAIN].astype(bool).to_numpy(), "run_id"])
    agg["main"] = [ids.split(" ")[0] in main_ids for ids in agg["run_ids"]]
    agg["setup"] = data.setup_labels(agg)
    return agg
