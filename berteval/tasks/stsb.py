"""GLUE STS-B: how similar are two sentences, from 0 (unrelated) to 5 (the same meaning)? A regression.

Train on GLUE train (5,749 pairs), report Pearson and Spearman correlation (x 100, GLUE's convention) on
GLUE dev (1,500). A probe is a ridge regression on the pooled vector; a fine-tune one output with a
squared-error loss (as `BertForSequenceClassification` with `num_labels=1`). Data: `berteval.tasks.glue`.
"""

from __future__ import annotations

from . import glue
from .base import PAIR_REGRESSION, TaskSpec

TASK = TaskSpec(
    name="stsb",
    version="1",
    description="GLUE STS-B semantic similarity (0-5): train on train (5,749), report Pearson and Spearman "
                "correlation x 100 on dev (1,500)",
    kind=PAIR_REGRESSION,
    hub_source=f"{glue.HUB_ID} (stsb)",
    local_layout=glue.STSB.layout,
    metrics=("pearson", "spearman"),
    labels=(),
    label="STS-B",
    load=lambda data_dir: glue.load(glue.STSB, data_dir),
)
