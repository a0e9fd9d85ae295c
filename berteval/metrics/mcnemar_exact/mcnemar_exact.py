"""McNemar's exact test as an evaluate comparison module: do two classifiers differ on the same examples?

Shipped inside berteval and loaded by local path, offline. Only the discordant examples
count (one system right, the other wrong); under the null hypothesis they split 50/50, so
the two-sided p-value is a binomial test on them. The definition is berteval's own
(`berteval.stats.mcnemar_exact`, what every record's `paired_tests` holds); this file gives
it evaluate's comparison interface. One import per line: evaluate reads them line by line.
"""

import datasets
import evaluate
import numpy as np
from berteval import stats

_CITATION = """@article{mcnemar1947,
  title = {Note on the sampling error of the difference between correlated proportions or percentages},
  author = {McNemar, Quinn},
  journal = {Psychometrika},
  volume = {12},
  number = {2},
  pages = {153--157},
  year = {1947}
}"""

_DESCRIPTION = """McNemar's exact test for two classifiers scored on the same examples. Counts the examples
only the first gets right and only the second gets right, and tests whether they split evenly (a two-sided
exact binomial test). Examples both get right, or both wrong, say nothing about which is better."""

_KWARGS_DESCRIPTION = """
Args:
    predictions1 (list of int): the first system's predicted labels.
    predictions2 (list of int): the second system's predicted labels, same examples and order.
    references (list of int): the gold labels.
Returns:
    n_only_1_correct (int), n_only_2_correct (int): the discordant counts.
    p_value (float): two-sided exact p-value.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class McnemarExact(evaluate.Comparison):
    def _info(self):
        return evaluate.ComparisonInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions1": datasets.Value("int64"),
                                        "predictions2": datasets.Value("int64"),
                                        "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions1, predictions2, references):
        gold = np.asarray(references)
        test = stats.mcnemar_exact(np.asarray(predictions1) == gold, np.asarray(predictions2) == gold)
        return {"n_only_1_correct": test["n_only_self_correct"], "n_only_2_correct": test["n_only_other_correct"],
                "p_value": test["p_value"]}
