"""A confidence the Answer tab can stand behind: is the answer in this text at all?

A span head always returns its best span, and its n-best probabilities are a softmax over its own
candidates: "BERT" gets 0.86 of the n-best for "Who won the 1998 FIFA World Cup?" asked of a text about
BERT. What separates a text that holds the answer from one that does not is the scores themselves:
the best span's start + end logit, and how far it stands above the `[CLS]` "null" score (start + end
logit of position 0, the no-answer reading SQuAD 2.0 heads use; the lowest over a question's windows).

`calibrate` measures both on SQuAD v1.1 questions asked of their own paragraph (the answer is
there) and of a paragraph of another article (seeded; the answer is not), articles split in two by a
seed: the threshold on the margin (best minus null) is chosen on one half (the one that classifies the
most pairs right) and its precision and recall are reported on the other, with the ROC AUC of both
scores. The questions must be ones the head never trained on (a head that memorised its questions
scores them too well): which ones is the caller's choice (`berteval.serve.confidence`, the command that
writes the result as a small JSON beside the head's record, which the page reads; the page says
"probably not in this text" below the threshold). Torch is used only through `inference.spans`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..seeds import numpy_rng
from .inference import null_scores, spans

SCHEMA = 1


@dataclass
class Calibration:
    head_run_id: str
    feature: str  # what the threshold is on
    threshold: float
    n_questions: int  # per half: each asked twice (own paragraph, another article's)
    auc_best_score: float  # ROC AUC on the report half: own paragraph vs another's
    auc_margin: float
    precision: float  # report half: of the pairs the threshold says hold an answer, the share that do
    recall: float  # of the pairs that hold one, the share the threshold keeps
    accuracy: float
    mean_best_score: dict  # {"own": ..., "other": ...} on the report half
    seed: int
    questions: str = ""  # where the questions come from (ones the head never trained on)
    schema: int = SCHEMA

    def to_json(self) -> dict:
        return asdict(self)


def question_scores(model, tokenizer, questions: list[str], contexts: list[str], settings, dtype: str = "fp32",
                    chunk: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(best span score, null score) per question: the n-best's top start + end logit, and the lowest
    `[CLS]` start + end logit over the question's windows."""
    best, null = [], []
    for i in range(0, len(questions), chunk):
        found = spans(model, tokenizer, questions[i : i + chunk], contexts[i : i + chunk], settings, dtype)
        best += [nb[0].score if nb else float("-inf") for nb in found.nbest]
        null += null_scores(found)
    return np.asarray(best), np.asarray(null)


def verdict(calibration: dict | None, best_score: float, null_score: float) -> bool | None:
    """True: the answer is probably in the text; False: probably not; None: no calibration for this head."""
    if not calibration:
        return None
    return bool(best_score - null_score >= calibration["threshold"])


def _pairs(dev, seed: int, per_half: int):
    """Two halves of questions (split by article), each with its own paragraph and another article's.
    `dev`: any Split of (question, context) texts with each one's article in `groups`."""
    rng = numpy_rng(seed, "split")
    titles = sorted(set(dev.groups))
    order = rng.permutation(len(titles))
    half = {titles[i]: int(k >= len(titles) // 2) for k, i in enumerate(order)}
    contexts = [c for _, c in dev.texts]
    out = []
    for h in (0, 1):
        idx = np.array([i for i, g in enumerate(dev.groups) if half[g] == h])
        idx = np.sort(rng.choice(idx, size=min(per_half, len(idx)), replace=False))
        other = []
        for i in idx:
            while True:
                j = int(rng.integers(len(dev.groups)))
                if dev.groups[j] != dev.groups[i]:
                    other.append(contexts[j])
                    break
        questions = [dev.texts[i][0] for i in idx]
        out.append((questions, [contexts[i] for i in idx], other))
    return out


def calibrate(qa_model, head_run_id: str, dev, settings, per_half: int = 1000, seed: int = 0,
              dtype: str = "fp32", source: str = "") -> Calibration:
    """`source`: where `dev`'s questions come from, in words (recorded as `questions`)."""
    from sklearn.metrics import roc_auc_score

    halves = []
    for questions, own, other in _pairs(dev, seed, per_half):
        b_own, n_own = question_scores(qa_model.model, qa_model.tokenizer, questions, own, settings, dtype)
        b_oth, n_oth = question_scores(qa_model.model, qa_model.tokenizer, questions, other, settings, dtype)
        y = np.r_[np.ones(len(questions)), np.zeros(len(questions))]
        halves.append((y, np.r_[b_own, b_oth], np.r_[b_own - n_own, b_oth - n_oth]))
    (y_fit, _, m_fit), (y_rep, b_rep, m_rep) = halves
    candidates = np.unique(m_fit)
    correct = [((m_fit >= t) == (y_fit == 1)).mean() for t in candidates]
    threshold = float(candidates[int(np.argmax(correct))])
    keep = m_rep >= threshold
    tp = float((keep & (y_rep == 1)).sum())
    return Calibration(
        head_run_id=head_run_id, feature="best span score minus [CLS] null score (start + end logits)",
        threshold=round(threshold, 4), n_questions=int(len(y_rep) // 2),
        auc_best_score=round(float(roc_auc_score(y_rep, b_rep)), 4), auc_margin=round(float(roc_auc_score(y_rep, m_rep)), 4),
        precision=round(tp / max(1.0, float(keep.sum())), 4), recall=round(tp / max(1.0, float((y_rep == 1).sum())), 4),
        accuracy=round(float((keep == (y_rep == 1)).mean()), 4),
        mean_best_score={"own": round(float(b_rep[y_rep == 1].mean()), 2), "other": round(float(b_rep[y_rep == 0].mean()), 2)},
        seed=seed, questions=source)
