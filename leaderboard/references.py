"""Reference numbers from the literature: context for the measured rows, never ranked with them.

Each row is a published number with its citation (paper, table) and what differs from berteval's
setting. They are drawn apart from the measured ones everywhere: their own table, their own
marker (an open star in grey, legend "published"), never in a rank band, a finding or the CSV.
Checked against the papers' text: Devlin et al. 2019 (BERT), Table 2 (SQuAD v1.1 dev, BERT-base
single: EM 80.8, F1 88.5) and Table 5 (ablation of the pre-training tasks on BERT-base, dev sets:
SST-2 92.7 and SQuAD F1 88.5; "No NSP": SST-2 92.6, SQuAD F1 87.9); Reimers and Gurevych 2019
(Sentence-BERT), Table 5 (SentEval, logistic regression on frozen embeddings, SST column:
"BERT CLS-vector" 84.13, "Avg. BERT embeddings" 84.40; MRPC column 71.13 and 69.45); BERT Table 5 also for
MRPC (86.7, No NSP 86.5) and QNLI (88.4, No NSP 84.9); Turc et al. 2019's compact-model table for BERT-Mini on
GLUE test; Liu et al. 2019 (RoBERTa) Table 2 for BERT's input format with and without NSP; Sanh et al. 2019
(DistilBERT) for SQuAD v1.1 dev.
"""

from __future__ import annotations

import pandas as pd

DEVLIN = "Devlin et al. 2019, BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"
REIMERS = "Reimers and Gurevych 2019, Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks"
TURC = "Turc et al. 2019, Well-Read Students Learn Better: On the Importance of Pre-training Compact Models"
LIU = "Liu et al. 2019, RoBERTa: A Robustly Optimized BERT Pretraining Approach"
SANH = "Sanh et al. 2019, DistilBERT, a distilled version of BERT: smaller, faster, cheaper and lighter"

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
    ("BERT-base (uncased), fine-tuned", "mrpc", "finetune", "pooler", "accuracy", 86.7, 1, DEVLIN, "Table 5",
     "GLUE MRPC dev accuracy, 110M weights fine-tuned"),
    ("BERT-base, pre-trained without NSP, fine-tuned", "mrpc", "finetune", "pooler", "accuracy", 86.5, 1, DEVLIN,
     "Table 5 (No NSP)", "GLUE MRPC dev accuracy"),
    ("BERT-base (uncased), fine-tuned", "qnli", "finetune", "pooler", "accuracy", 88.4, 1, DEVLIN, "Table 5",
     "GLUE QNLI dev, trained on QNLI's 104,743 train pairs (not here: berteval's QNLI is 5-fold over dev)"),
    ("BERT-base, pre-trained without NSP, fine-tuned", "qnli", "finetune", "pooler", "accuracy", 84.9, 1, DEVLIN,
     "Table 5 (No NSP)", "GLUE QNLI dev, trained on QNLI train (berteval's QNLI is 5-fold over dev)"),
    ("BERT-Mini (4 layers, 256; 11M), fine-tuned", "sst2", "finetune", "pooler", "accuracy", 85.9, 1, TURC,
     "compact models table (GLUE test)", "GLUE test set (not dev), pre-trained far longer than the twins"),
    ("BERT-Mini (4 layers, 256; 11M), fine-tuned", "mrpc", "finetune", "pooler", "binary_f1", 81.1, 1, TURC,
     "compact models table (GLUE test: F1/accuracy 81.1/71.8)", "GLUE test set"),
    ("BERT-Mini (4 layers, 256; 11M), fine-tuned", "mrpc", "finetune", "pooler", "accuracy", 71.8, 1, TURC,
     "compact models table (GLUE test: F1/accuracy 81.1/71.8)", "GLUE test set"),
    ("BERT-Mini (4 layers, 256; 11M), fine-tuned", "rte", "finetune", "pooler", "accuracy", 57.9, 1, TURC,
     "compact models table (GLUE test)", "GLUE test set"),
    ("BERT-Mini (4 layers, 256; 11M), fine-tuned", "stsb", "finetune", "pooler", "pearson", 75.4, 100, TURC,
     "compact models table (GLUE test: Pearson/Spearman 75.4/73.3)", "GLUE test set"),
    ("BERT-Mini (4 layers, 256; 11M), fine-tuned", "qnli", "finetune", "pooler", "accuracy", 84.1, 1, TURC,
     "compact models table (GLUE test)", "GLUE test set, trained on QNLI train"),
    ("BERT (frozen, 110M), CLS vector + logistic regression", "mrpc", "probe", "cls", "accuracy", 71.13, 1, REIMERS,
     "Table 5 (BERT CLS-vector, MRPC)", "SentEval's MRPC: the two sentences encoded apart, not GLUE's pair input"),
    ("BERT (frozen, 110M), mean of token states + logistic regression", "mrpc", "probe", "mean", "accuracy", 69.45, 1,
     REIMERS, "Table 5 (Avg. BERT embeddings, MRPC)",
     "SentEval's MRPC, sentences encoded apart (SimCSE's Table E.1 reprints it as 69.54; its row average 84.94 fits "
     "69.45 only)"),
    ("RoBERTa-base reimplementation of BERT, SEGMENT-PAIR + NSP", "sst2", "finetune", "cls", "accuracy", 92.9, 1,
     LIU, "Table 2", "BookCorpus + Wikipedia, 1M steps of 256; with the NSP loss"),
    ("RoBERTa-base reimplementation, DOC-SENTENCES, no NSP", "sst2", "finetune", "cls", "accuracy", 92.7, 1, LIU,
     "Table 2", "the NSP loss removed (their best input format)"),
    ("RoBERTa-base reimplementation of BERT, SEGMENT-PAIR + NSP", "squad", "finetune", "span", "f1", 90.4, 100,
     LIU, "Table 2 (SQuAD 1.1/2.0 90.4/78.7)", "with the NSP loss"),
    ("RoBERTa-base reimplementation, DOC-SENTENCES, no NSP", "squad", "finetune", "span", "f1", 90.6, 100, LIU,
     "Table 2 (SQuAD 1.1/2.0 90.6/79.7)", "the NSP loss removed: matches or helps"),
    ("DistilBERT (66M), fine-tuned", "squad", "finetune", "span", "f1", 85.8, 100, SANH,
     "Table 2 of arXiv v4 (SQuAD EM/F1 77.7/85.8; 79.1/86.9 with distillation during fine-tuning)",
     "SQuAD v1.1 dev; trained on the official train set"),
    ("DistilBERT (66M), fine-tuned", "squad", "finetune", "span", "exact_match", 77.7, 100, SANH,
     "Table 2 of arXiv v4", "SQuAD v1.1 dev"),
], columns=COLUMNS)


def source(citation: str, where: str) -> str:
    """A reference's short source: authors and year (the citation up to its first comma), then where in the paper."""
    return f"{citation.split(',')[0]}, {where}"


# The published SQuAD v1.1 dev F1 the Answer tab prints beside its own head's figure (issue 26), each with the
# model's size: reference row -> the words naming it.
SQUAD_SCALE = (("BERT-base (uncased), fine-tuned", "BERT-base (110M parameters)"),
               ("DistilBERT (66M), fine-tuned", "DistilBERT (66M)"))


def squad_scale() -> str:
    """One sentence: the SQuAD anchors from the reference rows, with where each is published."""
    rows = references("squad", "finetune")
    rows = rows[rows["metric"] == "f1"]
    parts = []
    for model, words in SQUAD_SCALE:
        row = rows[rows["model"] == model].iloc[0]
        parts.append(f"{words} F1 {row['value']:g} ({source(row['citation'], row['where'].split(' (')[0])})")
    return ("Published, for scale (larger models fine-tuned on the official train set; not measured here): "
            + "; ".join(parts) + ".")


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
                         "source": [source(c, w) for c, w in zip(r["citation"], r["where"])],
                         "not the same as berteval's setting": r["note"]})
