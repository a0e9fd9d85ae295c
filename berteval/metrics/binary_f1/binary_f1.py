"""F1 of the positive class as an evaluate module (GLUE's MRPC F1: the paraphrase class, label 1).

Shipped inside berteval and loaded by local path, offline. The definition is berteval's own
(`berteval.metrics.binary_f1_score`: 2 TP / (2 TP + FP + FN)); this file gives it evaluate's interface.
One import per line: evaluate reads them line by line.
"""

import datasets
import evaluate
from berteval.metrics import binary_f1_score

_DESCRIPTION = """F1 of the positive class: the harmonic mean of its precision and recall, 2 TP / (2 TP + FP + FN).
GLUE reports it for MRPC (label 1 = the two sentences are paraphrases) beside accuracy."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted class ids (0/1).
    references (list of int): gold class ids, in the same order.
Returns:
    f1 (float): in [0, 1].
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BinaryF1(evaluate.Metric):
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
        return {"f1": binary_f1_score(predictions, references)}
