"""Span decoding for extractive QA: start/end logits per token -> answer strings.

Pure and torch-free (numpy only), so it is tested on hand-built fixtures. For each
question, across all of its windows: take the top-n start and top-n end tokens, keep
the pairs that lie inside the context (tokens with a character offset), with
end >= start and at most `max_answer_length` tokens, score each as start + end logit,
and return the n-best list with softmax probabilities over the kept candidates and
character offsets back into the original context.

One entry per answer text: the same text reached twice (from two overlapping windows, or
from a passage that repeats) is listed once, where it scored best. The top answer is the
same either way (a lower-scored copy never outranks the best one); what changes is that the
n-best list holds n different answers and its probabilities are not split across copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import DEFAULTS


@dataclass(frozen=True)
class Candidate:
    text: str
    start_char: int
    end_char: int  # exclusive
    score: float  # start logit + end logit
    probability: float  # softmax over this question's n-best scores
    window: int  # which window of the question it came from
    start_token: int
    end_token: int


def best_spans(
    start_logits: list[np.ndarray],
    end_logits: list[np.ndarray],
    offsets: list[list[tuple[int, int] | None]],
    context: str,
    n_best: int = DEFAULTS.n_best,
    max_answer_length: int = DEFAULTS.max_answer_length,
) -> list[Candidate]:
    """The n-best answers of one question.

    start_logits[w], end_logits[w]: (T,) logits of window w; offsets[w][t]: the
    (start, end) character span of token t in `context`, or None for tokens outside
    the context (question, special tokens, padding).
    """
    raw: list[tuple[float, int, int, int]] = []
    for w, (s_log, e_log, offs) in enumerate(zip(start_logits, end_logits, offsets)):
        s_log = np.asarray(s_log, dtype=np.float64)
        e_log = np.asarray(e_log, dtype=np.float64)
        in_context = np.array([o is not None for o in offs] + [False] * (len(s_log) - len(offs)))[: len(s_log)]
        if not in_context.any():
            continue
        # Only context tokens can start or end an answer; ranking among them alone means
        # a strong [CLS] or question token can never crowd real candidates out of the top n.
        ctx_idx = np.flatnonzero(in_context)
        starts = ctx_idx[np.argsort(-s_log[ctx_idx], kind="stable")[:n_best]]
        ends = ctx_idx[np.argsort(-e_log[ctx_idx], kind="stable")[:n_best]]
        for s in starts:
            for e in ends:
                if e < s or e - s + 1 > max_answer_length:
                    continue
                raw.append((float(s_log[s] + e_log[e]), w, int(s), int(e)))
    if not raw:
        return []
    raw.sort(key=lambda r: -r[0])  # stable: equal scores keep window and token order
    seen: set[str] = set()
    kept: list[tuple[float, int, int, int, int, int]] = []
    for score, w, s, e in raw:
        start_char, end_char = offsets[w][s][0], offsets[w][e][1]
        text = context[start_char:end_char]
        if text in seen:  # this answer is already listed, with a better (or equal, earlier) score
            continue
        seen.add(text)
        kept.append((score, w, s, e, start_char, end_char))
        if len(kept) == n_best:
            break
    scores = np.array([k[0] for k in kept])
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    return [
        Candidate(context[sc:ec], sc, ec, score, float(p), w, s, e)
        for (score, w, s, e, sc, ec), p in zip(kept, probs)
    ]
