"""Accuracy as an evaluate module: the share of predictions equal to their reference label.

Shipped inside berteval and loaded by local path, so it works offline:
`evaluate.load("<berteval>/metrics/accuracy")` (berteval.metrics.modules.load("accuracy") sets
the module cache first). The definition is berteval's own (`berteval.metrics.accuracy_score`), the
same function the light, torch-free code calls; this file gives it evaluate's interface (typed
features, `add_batch`, `compute`, `combine`). evaluate reads a module's imports line by line,
so each import stands on its own line.
"""

import datasets
import evaluate
from berteval.metrics import accuracy_score

_DESCRIPTION = """Accuracy: the number of predictions equal to their reference label, divided by the number of
examples. 1.0 is every example right. berteval reports it for SST-2 (sentiment) and NSP (is B the next sentence)."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted class ids.
    references (list of int): gold class ids, in the same order.
Returns:
    accuracy (float): in [0, 1].
Example:
    >>> acc = evaluate.load("berteval/metrics/accuracy")
    >>> acc.compute(predictions=[1, 0, 1], references=[1, 1, 1])
    {'accuracy': 0.6666666666666666}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Accuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"),
                                        "references": datasets.Value("int64")}),
            reference_urls=[],
        )

    def _compute(self, predictions, references):
        return {"accuracy": accuracy_score(predictions, references)}
