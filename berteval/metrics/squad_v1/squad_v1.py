"""SQuAD v1.1 exact match and F1 as an evaluate module (0-100, max over gold answers, mean over questions).

Shipped inside berteval and loaded by local path, offline (`evaluate.load("squad")` needs the
hub). The definition is berteval's own, written from the published one in
`berteval.metrics.squad` (normalise: lower case, no punctuation, no a/an/the, single spaces);
this file gives it evaluate's interface. One import per line: evaluate reads them line by line.
"""

import datasets
import evaluate
from berteval.metrics import squad

_CITATION = """@inproceedings{rajpurkar-etal-2016-squad,
  title = {{SQ}u{AD}: 100,000+ Questions for Machine Comprehension of Text},
  author = {Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy},
  booktitle = {Proceedings of EMNLP},
  year = {2016},
  pages = {2383--2392}
}"""

_DESCRIPTION = """SQuAD v1.1 exact match (EM) and token F1. A prediction and each gold answer are normalised
(lower-cased, punctuation removed, the articles a/an/the removed, white space collapsed); EM is 1 when they
are equal, F1 the harmonic mean of token precision and recall. Each question takes its best gold answer;
the score is the mean over questions, on 0-100. An empty prediction scores 0 (unless a gold answer is empty too)."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): one answer per question ("" where a system gave none).
    references (list of list of str): the gold answers of each question, in the same order.
Returns:
    exact_match (float), f1 (float): both 0-100.
Example:
    >>> squad_v1 = evaluate.load("berteval/metrics/squad_v1")
    >>> squad_v1.compute(predictions=["the Broncos"], references=[["Denver Broncos", "Broncos"]])
    {'exact_match': 100.0, 'f1': 100.0}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SquadV1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Sequence(datasets.Value("string"))}),
            reference_urls=["https://rajpurkar.github.io/SQuAD-explorer/"],
        )

    def _compute(self, predictions, references):
        # Position i is question i; the scorer takes the same dicts the rest of berteval passes.
        preds = {str(i): p for i, p in enumerate(predictions)}
        golds = {str(i): list(g) for i, g in enumerate(references)}
        return squad.score(preds, golds)
