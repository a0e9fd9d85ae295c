"""NSP segment pairs with no surface cue: the pre-training examples of the second-generation twins.

Written from BERT's description (Devlin et al. 2019, Section 3.1, Appendix A.1): a pair is
`[CLS] A [SEP] B [SEP]`; A is one or more consecutive sentences of a document; for half the
pairs B is the text that actually follows (IsNext), for the other half text from a random
other document (NotNext); the pair fills a target length (BERT's `max_length - 3`, or with
probability 0.1 a shorter one) and a pair too long loses tokens from its longer segment,
front or back at random.

Why a new builder (the first generation's is `berteval.pretrain.segments`): there a NotNext B
was cut at an exact token count to match the continuation's length, so it almost always
ended mid-sentence while an IsNext B ended a sentence, and the NSP head learned "B ends with
a full stop" (docs/findings/pretraining.md). Here both labels are built by ONE rule, so no
surface property of B can depend on the label:

- A is chosen before the coin is tossed (sentences from the walk's position until the pair's
  target `goal`; a random cut among them), so nothing about A depends on the label.
- B is always *whole sentences* filled from a start sentence until A + B reaches `goal` (or
  the source document ends): the start is the sentence after A (IsNext) or a random sentence
  of another document (NotNext). Same fill rule, so the same overshoot past `goal`.
- Both then pass the same truncation (`_truncate`), so B ends mid-sentence, or starts
  mid-word, equally often under both labels.
- A NotNext B never starts at a document's first sentence, because an IsNext B never can
  (an article's opening "X is a ..." sentence would otherwise mark NotNext), and it opens a
  paragraph exactly when the IsNext B would have.
- No B ever runs out: where the document ends before an IsNext B could be full, no pair of
  either label starts (decided before the coin), and a NotNext B starts where its document
  has enough text left. A B that ran out would be short and untruncated, so it would end a
  sentence: the first generation's cue again, through the back door.

`berteval.pretrain.cues` audits the result with a classifier on surface features; the
builder records each sentence's paragraph start so that audit can test that cue too.
Labels are BERT's: 0 = IsNext, 1 = NotNext; exactly 50/50 after balancing (the caller).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IS_NEXT, NOT_NEXT = 0, 1
SHORT_SEQ_PROB = 0.1


@dataclass(frozen=True)
class Pair:
    tokens_a: tuple[int, ...]
    tokens_b: tuple[int, ...]
    label: int  # IS_NEXT (0) or NOT_NEXT (1)
    a_paragraph_start: bool  # A's first sentence opens a paragraph
    b_paragraph_start: bool  # B's first sentence opens a paragraph (before truncation)

    @property
    def length(self) -> int:
        """Tokens with [CLS] A [SEP] B [SEP]."""
        return len(self.tokens_a) + len(self.tokens_b) + 3


@dataclass
class PairStats:
    documents: int = 0
    pairs: int = 0
    is_next: int = 0
    not_next: int = 0
    no_continuation: int = 0  # a document's end: too little text left for a full IsNext B, so no pair
    short_target: int = 0
    truncated: int = 0
    b_ran_out: dict = None  # per label: B's source document ended before the goal

    def __post_init__(self):
        self.b_ran_out = self.b_ran_out or {"IsNext": 0, "NotNext": 0}


def _goal(rng: np.random.Generator, short_seq_prob: float, max_tokens: int) -> tuple[bool, int]:
    """The pair's target length: `max_tokens`, or with probability short_seq_prob uniform in [2, max_tokens]."""
    if rng.random() < short_seq_prob:
        return True, int(rng.integers(2, max_tokens + 1))
    return False, max_tokens


def _fill(doc: list[list[int]], start: int, want: int) -> tuple[list[int], int, bool]:
    """Whole sentences of `doc` from `start` until at least `want` tokens:
    (tokens, index after the last used, whether the document ended first)."""
    out: list[int] = []
    j = start
    while j < len(doc) and len(out) < want:
        out.extend(doc[j])
        j += 1
    return out, j, len(out) < want


def _truncate(a: list[int], b: list[int], max_tokens: int, rng: np.random.Generator) -> bool:
    """Trim the longer segment (B on a tie), from its front or back at random, until the pair fits."""
    cut = False
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
        cut = True
    return cut


def _other(d: int, n_docs: int, rng: np.random.Generator) -> int:
    """A document index uniform over every document but `d`."""
    b = int(rng.integers(n_docs - 1))
    return b + (b >= d)


def _partner(documents, d: int, want: int, paragraph_start: bool, rng: np.random.Generator) -> tuple[int, int]:
    """(document, start sentence) of a NotNext B: a random sentence of another document, other than its first (an
    IsNext B never starts a document), with at least `want` tokens left, so B never runs out (an IsNext B never
    does either: `one_pass` makes no pair where it would), and opening a paragraph exactly when the IsNext B
    would have (`paragraph_start`): left free, a random sentence opens one at another rate than the sentence
    after A does, a cue the audit found (0.525 at 32 tokens). A document with no such start is replaced."""
    n_docs = len(documents)
    for _ in range(50):
        b_doc = _other(d, n_docs, rng)
        lengths = np.array([len(x) for x in documents[b_doc]])
        if len(lengths) < 2:
            continue
        left = np.cumsum(lengths[::-1])[::-1][1:]  # tokens from each sentence k >= 1 to the end
        opens = np.asarray(_paragraph_starts(documents, b_doc, len(lengths))[1:], dtype=bool)
        ok = np.flatnonzero((left >= want) & (opens == paragraph_start))
        if len(ok):
            return b_doc, 1 + int(ok[rng.integers(len(ok))])
    raise ValueError(f"no other document holds {want} tokens after its first sentence: too little text for pairs")


def _paragraph_starts(documents, d: int, n: int) -> list[bool]:
    flags = getattr(documents, "paragraph_starts", None)
    return flags(d) if flags is not None else [k == 0 for k in range(n)]


def one_pass(documents, max_tokens: int, short_seq_prob: float, rng: np.random.Generator, stats: PairStats):
    """Yield the pairs of one pass over `documents` (indexable; each a list of sentences of ids)."""
    n_docs = len(documents)
    stats.documents += n_docs
    for d in range(n_docs):
        doc = documents[d]
        paragraph = _paragraph_starts(documents, d, len(doc))
        i = 0
        while i < len(doc):
            goal_short, goal = _goal(rng, short_seq_prob, max_tokens)
            chunk, j, _ = _fill(doc, i, goal)  # the sentences A is cut from
            n_chunk = j - i
            if j == len(doc) and n_chunk == 1:
                stats.no_continuation += 1  # nothing follows this sentence: IsNext impossible, so no pair at all
                break
            a_end = i + (int(rng.integers(1, n_chunk)) if n_chunk >= 2 else 1)
            tokens_a = [t for s in doc[i:a_end] for t in s]
            want = max(1, goal - len(tokens_a))
            avail = sum(len(x) for x in doc[a_end:])  # what an IsNext B could hold before the document ends
            if avail < want:
                # Too near the end for a full B: an IsNext B would run out (short, never truncated, so always
                # ending a sentence) where a NotNext B need not. Decided before the coin, so no pair of either
                # label starts here; this text was already read as the previous pair's B.
                stats.no_continuation += 1
                break
            is_next = bool(rng.random() < 0.5)
            if is_next:
                tokens_b, after, ran_out = _fill(doc, a_end, want)
                b_paragraph, next_i = paragraph[a_end], after
            else:
                b_doc, start = _partner(documents, d, want, bool(paragraph[a_end]), rng)
                tokens_b, _, ran_out = _fill(documents[b_doc], start, want)
                b_paragraph = _paragraph_starts(documents, b_doc, len(documents[b_doc]))[start]
                next_i = a_end  # A's unused chunk sentences are read again, as BERT does
            stats.b_ran_out["IsNext" if is_next else "NotNext"] += ran_out
            stats.truncated += _truncate(tokens_a, tokens_b, max_tokens, rng)
            stats.short_target += goal_short
            stats.pairs += 1
            stats.is_next += is_next
            stats.not_next += not is_next
            yield Pair(tuple(tokens_a), tuple(tokens_b), IS_NEXT if is_next else NOT_NEXT,
                       bool(paragraph[i]), bool(b_paragraph))
            i = next_i


def encode(pair: Pair, cls_id: int, sep_id: int) -> list[int]:
    """input_ids of [CLS] A [SEP] B [SEP] (segment 0 through the first [SEP])."""
    return [cls_id, *pair.tokens_a, sep_id, *pair.tokens_b, sep_id]
