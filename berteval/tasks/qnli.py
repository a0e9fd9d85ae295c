"""GLUE QNLI from its dev set alone: does the sentence answer the question? (0 = entailment, 1 = not).

QNLI's train set (104,743 pairs) is not to be had here, so the task is scored by 5-fold cross-validation
over the 5,463 dev pairs (folds fixed by seed 0; every pair scored once, by a head trained on the other
four folds). Its records are estimates: the leaderboard shows them apart and never ranks them with
official-dev rows, as the SQuAD k-fold records. Data: `berteval.tasks.glue`.
"""

from __future__ import annotations

from . import glue
from .base import PAIR, TaskSpec

FOLDS = 5
FOLD_SEED = 0

TASK = TaskSpec(
    name="qnli",
    version="1",
    description=f"GLUE QNLI question/sentence entailment from dev alone: {FOLDS}-fold cross-validation over the "
                f"5,463 dev pairs (folds by seed {FOLD_SEED}), accuracy of the out-of-fold predictions; an "
                f"estimate, never ranked with official-dev rows",
    kind=PAIR,
    hub_source=f"{glue.HUB_ID} (qnli)",
    local_layout=glue.QNLI.layout,
    metrics=("accuracy",),
    labels=glue.QNLI.labels,
    label="QNLI (5-fold over dev)",
    load=lambda data_dir: glue.load(glue.QNLI, data_dir),
    dev_folds=FOLDS,
)
