"""berteval's leaderboard: result records -> pandas -> Plotly figures, a table and an HTML report.

`views()` is what the app calls: it loads the records, applies the UI's filters and returns
every figure plus the table, so the Gradio tab only wires components to it. This package
may import pandas and plotly; it never imports gradio, and `berteval/` never imports it.
"""

from __future__ import annotations

import os
from typing import Iterable

from . import data, figures, table


def views(model=None, task=None, pooling=None, regime=None, search: str | None = None,
          paths: Iterable[str | os.PathLike] | None = None) -> dict:
    """Figures and table for the current filters.

    Filters take None/'all' (any), one value or a list; `paths` defaults to the committed
    results. Returns {"ablation", "layers", "heatmap", "significance": go.Figure,
    "table": DataFrame, "csv": str, "choices": {filter: values}, "problems": [str],
    "n_records": int}. Never raises on bad data: problems are listed and figures say what is missing.
    """
    df, problems = data.load(paths)
    rows = data.filter_records(df, model=model, task=task, pooling=pooling, regime=regime)
    tab = table.leaderboard_table(rows, search=search)
    return {
        **figures.all_figures(rows),
        "table": tab,
        "csv": table.to_csv(tab),
        "choices": table.choices(df),  # from all records, so a filter never hides its own options
        "problems": [str(p) for p in problems],
        "n_records": len(rows),
    }


__all__ = ["views", "data", "figures", "table"]
