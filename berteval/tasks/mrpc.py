"""GLUE MRPC: are two news sentences paraphrases? (0 = not equivalent, 1 = equivalent).

Train on GLUE train (3,668 pairs), report accuracy and the paraphrase class's F1 on GLUE dev (408), the
pair encoded as BERT encodes one (`[CLS] A [SEP] B [SEP]`). Data: `berteval.tasks.glue`.
"""

from __future__ import annotations

from . import glue
from .base import PAIR, TaskSpec

TASK = TaskSpec(
    name="mrpc",
    version="1",
    description="GLUE MRPC paraphrase pairs: train on train (3,668), report accuracy and F1 of the paraphrase "
                "class on dev (408); labels 0 = not equivalent, 1 = equivalent",
    kind=PAIR,
    hub_source=f"{glue.HUB_ID} (mrpc)",
    local_layout=glue.MRPC.layout,
    metrics=("accuracy", "binary_f1"),
    labels=glue.MRPC.labels,
    label="MRPC",
    load=lambda data_dir: glue.load(glue.MRPC, data_dir),
)
