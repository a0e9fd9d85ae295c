"""berteval's leaderboard: result records -> pandas -> Plotly figures, a table and an HTML report.

`board.current()` is what the app calls: one version of the records with every view of them
(the first view per task, the table, the findings, each figure) computed once per filter, so the
Gradio tab only wires components to it. `views()` returns all of them at once for one set of
filters. This package may import pandas and plotly; it never imports gradio, and `berteval/`
never imports it.
"""

from __future__ import annotations

import os
from typing import Iterable

# pandas and plotly come with the app extra (requirements.txt installs them). Without them the package still
# imports, so `python -m leaderboard` can say what to install (MISSING) instead of a traceback.
INSTALL = "pip install -r requirements.txt (or, for the package, pip install -e '.[app]')"
try:
    from . import bands, board, data, disagreements, figures, findings, labels, overview, references, table, urlstate
    from .figures import compare, curves
except ModuleNotFoundError as exc:
    if (exc.name or "").split(".")[0] not in ("pandas", "plotly"):
        raise
    MISSING: str | None = exc.name.split(".")[0]
else:
    MISSING = None


def missing_message() -> str:
    return f"the leaderboard needs {MISSING}, which is not installed: {INSTALL}"


def views(model=None, task=None, pooling=None, regime=None, search: str | None = None,
          paths: Iterable[str | os.PathLike] | None = None, repo: str | None = None) -> dict:
    """Figures and table for the current filters.

    Filters take None/'all' (any), one value or a list; `paths` defaults to the committed
    results (or $BERTEVAL_RESULTS_REPO's snapshot, see data.load). Returns {"ablation", "layers",
    "heatmap", "significance", "models", "pooler_effect", "learning_curves", "every_layer",
    "span_vector": go.Figure, "first_view": Markdown (one compact view per task: models x poolings, the
    best head, one plain sentence; overview.py), "findings": Markdown (one generated sentence per task,
    model and regime), "references": DataFrame (published numbers, never ranked), "table": DataFrame (with
    rank band, reproduce command and record ids), "frame": the records frame without the k-fold estimates,
    "csv": str, "choices": {filter: values}, "problems": [str], "n_records": int, "estimates": the k-fold
    records the filters name (split "validation, k-fold ..."), left out of everything else}. Each is
    computed once per records version and filter (board.py). Never raises on bad data: problems are listed
    and figures say what is missing.
    """
    if MISSING:
        raise ModuleNotFoundError(missing_message(), name=MISSING)
    b = board.current(paths, repo=repo)
    f = (model, task, pooling, regime)
    return {
        **{name: b.figure(name, *f) for name in board.FIGURE_FUNCTIONS},
        # A finding compares heads, so the pooling filter does not narrow it (model, task and regime do).
        "first_view": b.first_view(model, task, regime),
        "findings": b.findings(model, task, regime),
        "references": b.references(task, regime),
        "frame": b.frame,
        "table": b.table(*f, search=search),
        "csv": b.csv(*f, search=search),
        "choices": b.choices,
        "problems": list(b.problems),
        "estimates": b.estimates(model, task, regime),
        "n_records": len(b.rows(*f)),
    }


__all__ = ["views", "bands", "board", "compare", "curves", "data", "disagreements", "figures", "findings", "labels",
           "overview", "references", "table", "urlstate"]
