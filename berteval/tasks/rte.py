"""GLUE RTE: does sentence A entail sentence B? (0 = entailment, 1 = not entailment).

Train on GLUE train (2,490 pairs), report accuracy on GLUE dev (277). Data: `berteval.tasks.glue`.
"""

from __future__ import annotations

from . import glue
from .base import PAIR, TaskSpec

TASK = TaskSpec(
    name="rte",
    version="1",
    description="GLUE RTE textual entailment: train on train (2,490), report accuracy on dev (277); labels "
                "0 = entailment, 1 = not entailment",
    kind=PAIR,
    hub_source=f"{glue.HUB_ID} (rte)",
    local_layout=glue.RTE.layout,
    metrics=("accuracy",),
    labels=glue.RTE.labels,
    label="RTE",
    load=lambda data_dir: glue.load(glue.RTE, data_dir),
)
