"""Every Plotly figure of berteval: the leaderboard's and the app's, one module per figure (or family).

- the board's four main figures: `ablation` (pooling ablation with rank bands), `layers` (per-layer
  curves), `heatmap` (task x pooling per model), `significance` (paired tests); `FIGURES` and
  `all_figures` hand them to the app's tab and the report;
- the wider ablations: `curves` (learning curves, every layer, span QA from one vector) and `compare`
  (models side by side, pooler minus cls);
- the app's live chart: `qa_logits` (span QA's start and end logits per token).
`style` is how they all look (colours from the pooling registry, fonts, number formats) and `base`
what they share (usable rows, a panel per task, failing soft). Pure functions: DataFrame (or arrays)
in, `go.Figure` out; none raises.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from . import compare, curves, qa_logits
from .ablation import pooling_ablation
from .base import fails_soft, message
from .heatmap import task_pooling_heatmap
from .layers import layer_curves
from .significance import ALPHA, significance
from .style import UNKNOWN_COLOUR, colour, fmt, metric_scale, metric_title

FIGURES = {
    "ablation": pooling_ablation,
    "layers": layer_curves,
    "heatmap": task_pooling_heatmap,
    "significance": significance,
}


def all_figures(df: pd.DataFrame, band_frame: pd.DataFrame | None = None) -> dict[str, go.Figure]:
    return {name: (fn(df, band_frame) if name == "ablation" else fn(df)) for name, fn in FIGURES.items()}


__all__ = ["ALPHA", "FIGURES", "UNKNOWN_COLOUR", "all_figures", "colour", "compare", "curves", "fails_soft", "fmt",
           "layer_curves", "message", "metric_scale", "metric_title", "pooling_ablation", "qa_logits", "significance",
           "task_pooling_heatmap"]
