"""SQuAD v1.1 exact match and F1, written from the published definition.

An answer is normalised by lower-casing, removing punctuation, removing the articles
"a", "an" and "the" as whole words, and collapsing white space. Exact match is 1 when
the normalised prediction equals a normalised gold answer; F1 is the harmonic mean of
precision and recall over the bag of normalised tokens. Each question takes the
maximum over its gold answers; the dataset score is the mean over questions, on a
0-100 scale. Pure Python, offline (`evaluate.load("squad")` needs the hub).
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        # Both empty counts as agreement; one empty is a miss.
        return float(pred_tokens == gold_tokens)
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def score(predictions: dict[str, str], golds: dict[str, list[str]]) -> dict[str, float]:
    """{'exact_match', 'f1'} on 0-100 over every question in `golds` (a missing prediction scores 0)."""
    if not golds:
        raise ValueError("no gold answers to score against")
    em = f = 0.0
    for qid, answers in golds.items():
        pred = predictions.get(qid, "")
        em += max(exact_match(pred, a) for a in answers)
        f += max(f1(pred, a) for a in answers)
    n = len(golds)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f / n}
