"""berteval's leaderboard: result records -> pandas -> Plotly figures, a table and an HTML report.

`views()` is what the app calls: it loads the records, applies the UI's filters and returns
every figure plus the table, so the Gradio tab only wires components to it. This package
may import pandas and plotly; it never imports gradio, and `berteval/` never imports it.
"""

from __future__ import annotations

import os
from typing import Iterable

from . import bands, data, disagreements, figures, findings, labels, references, table, urlstate
from .figures import compare, curves


def views(model=None, task=None, pooling=None, regime=None, search: str | None = None,
          paths: Iterable[str | os.PathLike] | None = None, repo: str | None = None) -> dict:
    """Figures and table for the current filters.

    Filters take None/'all' (any), one value or a list; `paths` defaults to the committed
    results (or $BERTEVAL_RESULTS_REPO's snapshot, see data.load). Returns {"ablation", "layers",
    "heatmap", "significance", "models", "pooler_effect", "learning_curves", "every_layer",
    "span_vector": go.Figure, "findings": Markdown (one
    generated sentence per task, model and regime), "references": DataFrame (published numbers,
    never ranked), "table": DataFrame (with rank band, reproduce command and record ids), "frame":
    the unfiltered records frame, "csv": str, "choices": {filter: values}, "problems": [str],
    "n_records": int, "estimates": the k-fold records (split "validation, k-fold by article"), left out of
    everything else}. Never raises on bad data: problems are listed and figures say what is missing.
    """
    df, problems = data.load(paths, repo=repo)
    apart = data.estimates(df)  # k-fold estimates: shown apart, never ranked with official-dev records
    df = df[~data.is_estimate(df)]
    rows = data.filter_records(df, model=model, task=task, pooling=pooling, regime=regime)
    band_frame = bands.rank_bands(df)  # from every record: a filter never changes a band
    tab = table.leaderboard_table(rows, search=search, band_frame=band_frame)
    return {
        **figures.all_figures(rows, band_frame),
        **curves.all_figures(rows),  # learning curves, every layer, span QA from one vector
        "models": compare.model_pooling_figure(rows),
        "pooler_effect": compare.pooler_effect_figure(rows),
        # A finding compares heads, so the pooling filter does not narrow it (model, task and regime do).
        "findings": findings.as_markdown(findings.findings(
            data.filter_records(df, model=model, task=task, regime=regime))),
        "references": references.table(task, regime),
        "frame": df,
        "table": tab,
        "csv": table.to_csv(tab),
        "choices": table.choices(df),  # from all records, so a filter never hides its own options
        "problems": [str(p) for p in problems],
        "estimates": apart,
        "n_records": len(rows),
    }


__all__ = ["views", "bands", "compare", "curves", "data", "disagreements", "figures", "findings", "labels", "references",
           "table", "urlstate"]
