"""Pearson and Spearman correlation (x 100) as an evaluate module: GLUE's STS-B metrics.

Shipped inside berteval and loaded by local path, offline. The definitions are berteval's own
(`berteval.metrics.pearson`, `berteval.metrics.spearman`: Pearson's r of the values, and of their ranks
with ties at their mean rank); GLUE reports both multiplied by 100. One import per line: evaluate
reads them line by line.
"""

import datasets
import evaluate
from berteval.metrics import pearson
from berteval.metrics import spearman

_DESCRIPTION = """Pearson's r and Spearman's rho between predicted and gold similarity scores, each x 100 (GLUE's
STS-B convention: 100 is a perfect linear, respectively monotonic, agreement)."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of float): predicted scores.
    references (list of float): gold scores (STS-B: 0-5), in the same order.
Returns:
    pearson (float), spearman (float): in [-100, 100].
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Correlation(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("float64"),
                                        "references": datasets.Value("float64")}),
            reference_urls=[],
        )

    def _compute(self, predictions, references):
        return {"pearson": 100.0 * pearson(predictions, references),
                "spearman": 100.0 * spearman(predictions, references)}
