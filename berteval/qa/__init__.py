"""Extractive span QA, in one place: question + context -> windows (`windows`), windows ->
start/end logits -> answer spans (`inference`, `decode`), the span heads and their batches
(`heads`, `vector`). The regimes that train and score a span head live with the other
regimes (`berteval.regimes.span`, `kfold`, `tuning`); SQuAD's exact match and F1 with the
other metrics (`berteval.metrics.squad`), its data with the other tasks (`berteval.tasks.squad`).
This package imports no regime and no task: they import it.

The defaults of BERT's SQuAD recipe are defined here once and read by the SQuAD task, runs,
the app, the bench and the CLI. This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QASettings:
    max_length: int = 384  # tokens per window: [CLS] question [SEP] context piece [SEP]
    doc_stride: int = 128  # tokens shared by neighbouring windows of one long context
    n_best: int = 20  # answers kept per question
    max_answer_length: int = 30  # longest answer, in tokens


DEFAULTS = QASettings()
