"""Reference numbers from the literature: context for the measured rows, never ranked with them.

Each row is a published number with its citation (paper, table) and what differs from berteval's
setting. They are drawn apart from the measured ones everywhere: their own table, their own
marker (an open star in grey, legend "published"), never in a rank band, a finding or the CSV.
Checked against the papers' text: Devlin et al. 2019 (BERT), Table 2 (SQuAD v1.1 dev, BERT-base
single: EM 80.8, F1 88.5) and Table 5 (ablation of the pre-training tasks on BERT-base, dev sets:
SST-2 92.7 and SQuAD F1 88.5; "No NSP": SST-2 92.6, SQuAD F1 87.9); Reimers and Gurevych 2019
(Sentence-BERT), Table 5 (SentEval, logistic regression on frozen embeddings, SST column:
"BERT CLS-vector" 84.13, "Avg. BERT embeddings" 84.40).
"""

from __future__ import annotations

import pandas as pd

DEVLIN = "Devlin et al. 2019, BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"
REIMERS = "Reimers and Gurevych 2019, Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks"

COLUMNS = ["model", "task", "regime", "pooling", "metric", "value", "scale", "citation", "where", "note"]

# value on the paper's own 0-100 scale; `scale` says how berteval's records of that task are scaled.
REFERENCES = pd.DataFrame([
    ("BERT-base (uncased), fine-tuned", "sst2", "finetune", "pooler", "accuracy", 92.7, 1, DEVLIN, "Table 5",
     "GLUE SST-2 dev; all 110M weights fine-tuned on all 67k train sentences. BERT's released classifier reads "
     "the pooled [CLS] (the pooler); the paper calls it C"),
    ("BERT-base, pre-trained without NSP, fine-tuned", "sst2", "finetune", "pooler", "accuracy", 92.6, 1, DEVLIN,
     "Table 5 (No NSP)", "the same model pre-trained with masked LM only: the paper's own answer to what NSP buys"),
    ("BERT-base (uncased), fine-tuned", "squad", "finetune", "span", "exact_match", 80.8, 100, DEVLIN,
     "Table 2 (BERT-base single)", "SQuAD v1.1 dev; trained on all 87,599 train questions"),
    ("BERT-base (uncased), fine-tuned", "squad", "finetune", "span", "f1", 88.5, 100, DEVLIN,
     "Table 2 (BERT-base single), Table 5", "SQuAD v1.1 dev; trained on all 87,599 train questions"),
    ("BERT-base, pre-trained without NSP, fine-tuned", "squad", "finetune", "span", "f1", 87.9, 100, DEVLIN,
     "Table 5 (No NSP)", "SQuAD v1.1 dev"),
    ("BERT (frozen), CLS vector + logistic regression", "sst2", "probe", "cls", "accuracy", 84.13, 1, REIMERS,
     "Table 5 (BERT CLS-vector, SST)", "SentEval's binary SST, not GLUE's dev split: comparable in kind, not to the decimal"),
    ("BERT (frozen), mean of token states + logistic regression", "sst2", "probe", "mean", "accuracy", 84.40, 1,
     REIMERS, "Table 5 (Avg. BERT embeddings, SST)",
     "SentEval's binary SST, not GLUE's dev split: comparable in kind, not to the decimal"),
], columns=COLUMNS)


def references(task=None, regime=None) -> pd.DataFrame:
    """The reference rows, optionally for one task and regime; `shown` is the value on the records' scale."""
    r = REFERENCES
    if task not in (None, "", "all"):
        r = r[r["task"].isin([task] if isinstance(task, str) else list(task))]
    if regime not in (None, "", "all"):
        r = r[r["regime"].isin([regime] if isinstance(regime, str) else list(regime))]
    return r.assign(shown=[v / 100 if s == 1 else v for v, s in zip(r["value"], r["scale"])]).reset_index(drop=True)


def table(task=None, regime=None) -> pd.DataFrame:
    """What a reader sees: the published number as published, its citation and what differs."""
    r = references(task, regime)
    return pd.DataFrame({"published model": r["model"], "task": r["task"], "regime": r["regime"],
                         "head reads": r["pooling"], "metric": r["metric"], "published value": r["value"],
                         "source": [f"{c.split(',')[0]}, {w}" for c, w in zip(r["citation"], r["where"])],
                         "not the same as berteval's setting": r["note"]})
