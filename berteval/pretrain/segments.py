"""BERT-style segment pairs: the NSP examples (and the MLM sequences) of pre-training.

Written from BERT's published description of its pre-training data (Devlin et al. 2019,
Section 3.1 and Appendix A.1; the data-creation notes of its README), not from its code:

- A *document* is one article (here: one SQuAD train-subset article, its paragraphs in
  order); it is a list of sentences (pysbd, as in `berteval.nsp_pairs`), each a list of
  WordPiece ids. Sentences run on across paragraph breaks, as in BERT's input files.
- Walking a document, sentences are gathered into a *chunk* until it reaches a target
  length: `max_length - 3` tokens (room for [CLS] A [SEP] B [SEP]), or, with probability
  `short_seq_prob` (0.1), a length drawn uniformly from 2 to that, so the model also sees
  short inputs like those of fine-tuning. The paper calls any such span a "sentence".
- The chunk is cut at a random sentence boundary: A = the sentences before the cut.
  With probability 1/2, B = the rest of the chunk, the actual next segment (IsNext);
  otherwise B = sentences from a random place in a *different* document, filled up to the
  target (NotNext), and the chunk's unused sentences go back to be read again.
- A pair longer than `max_length - 3` loses tokens from the longer segment, each time
  from its front or back at random.
- Several passes (`dupe_factor`), each with fresh random cuts, targets and partners,
  make BERT's duplicated data; `masking` masks each copy independently.

Three choices differ from BERT's released script, each to match the description:
- the short target is drawn per pair (the script draws it once per document);
- a one-sentence chunk whose coin says IsNext takes the following sentences as B (the
  actual next segment) instead of being forced to NotNext; only a document's last lone
  sentence still must be NotNext;
- labels are exactly 50/50: the surplus of the larger label (those forced NotNext pairs) is
  dropped at random, and the stats say how many.

With `match_length` (pre-training from scratch, `berteval.pretrain.loop`), a NotNext B holds
exactly as many tokens as the actual continuation would have (from a random sentence start
of the other document that leaves enough), so the pair's length says nothing about its
label: filled "up to the target" from a random place, a NotNext B ran short whenever the
other document ended first, and a model learned that cue instead of coherence (a scratch
prototype's 0.72 held-out NSP accuracy came from it). The derived encoders keep the
original rule, so their committed pairs stay what their records say.

Randomness comes from one seeded generator (`seeds.numpy_rng(seed, "segments")`): the same
documents and seed give the same pairs. Labels are BERT's: 0 = IsNext, 1 = NotNext.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import numpy as np

from ..nsp_pairs import IS_NEXT, NOT_NEXT
from .pairs import _other, _truncate  # one truncation rule, one partner draw for both builders
from ..seeds import numpy_rng

MAX_LENGTH = 128  # BERT's phase-1 sequence length (90% of its pre-training steps)
SHORT_SEQ_PROB = 0.1

Document = list[list[int]]  # sentences of WordPiece ids


@dataclass(frozen=True)
class Instance:
    tokens_a: tuple[int, ...]
    tokens_b: tuple[int, ...]
    label: int  # IS_NEXT (0) or NOT_NEXT (1)
    doc: int  # the document A comes from
    b_doc: int  # the document B comes from (== doc for IsNext)

    @property
    def length(self) -> int:
        """Tokens with [CLS] A [SEP] B [SEP]."""
        return len(self.tokens_a) + len(self.tokens_b) + 3


@dataclass
class SegmentStats:
    documents: int = 0
    sentences: int = 0
    tokens: int = 0  # WordPiece tokens of the text (one pass)
    dupe_factor: int = 0
    built: int = 0  # pairs before balancing
    forced_not_next: int = 0  # a document's last lone sentence: no next segment exists
    no_continuation: int = 0  # match_length: such a sentence makes no pair at all
    dropped_to_balance: int = 0
    instances: int = 0
    is_next: int = 0
    not_next: int = 0
    short_target: int = 0  # pairs built with a short target length
    truncated: int = 0  # pairs that lost tokens to fit max_length
    mean_length: float = 0.0  # tokens per sequence with [CLS]/[SEP]
    by_label_mean_length: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _fill(doc: Document, start: int, target: int) -> tuple[list[int], int]:
    """Sentences of `doc` from `start` until at least `target` tokens: (tokens, index after the last used)."""
    out: list[int] = []
    j = start
    while j < len(doc):
        out.extend(doc[j])
        j += 1
        if len(out) >= target:
            break
    return out, j


def _goal(rng: np.random.Generator, short_seq_prob: float, max_tokens: int) -> tuple[bool, int]:
    """The next pair's target length: full, or with probability short_seq_prob uniform in [2, max_tokens]."""
    if rng.random() < short_seq_prob:
        return True, int(rng.integers(2, max_tokens + 1))
    return False, max_tokens


def _tokens(documents, d: int) -> int:
    counted = getattr(documents, "tokens", None)
    return counted(d) if counted is not None else sum(len(s) for s in documents[d])


def _random_span(doc: Document, want: int, rng: np.random.Generator) -> list[int]:
    """Exactly `want` tokens of `doc` (all of it if shorter), from a random sentence start that leaves enough."""
    lengths = np.array([len(s) for s in doc])
    remaining = np.cumsum(lengths[::-1])[::-1]  # tokens from each sentence to the document's end
    starts = np.flatnonzero(remaining >= want)
    start = int(starts[rng.integers(len(starts))]) if len(starts) else 0
    tokens, _ = _fill(doc, start, want)
    return tokens[:want]


def _one_pass(documents, max_tokens: int, short_seq_prob: float, rng: np.random.Generator,
              stats: SegmentStats, match_length: bool = False):
    """Yield the pairs of one pass over `documents` (a sequence of Documents, indexable)."""
    n_docs = len(documents)
    for d in range(n_docs):
        doc = documents[d]
        chunk: list[list[int]] = []
        length = 0
        goal_short, goal = _goal(rng, short_seq_prob, max_tokens)
        i = 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if match_length and len(chunk) == 1 and i == len(doc) - 1:
                # A document's last lone sentence has no continuation, so only NotNext could be built, and
                # its B length would follow no IsNext one: no pair (counted).
                stats.no_continuation += 1
                break
            if i == len(doc) - 1 or length >= goal:
                a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
                tokens_a = [t for s in chunk[:a_end] for t in s]
                is_next = rng.random() < 0.5
                b_doc = d
                if is_next and len(chunk) >= 2:
                    tokens_b = [t for s in chunk[a_end:] for t in s]
                elif is_next and i + 1 < len(doc):
                    # A lone sentence: B is what actually follows it, filled up to the target.
                    tokens_b, after = _fill(doc, i + 1, max(1, goal - len(tokens_a)))
                    i = after - 1
                else:
                    if is_next:  # the document's last lone sentence has no next segment
                        stats.forced_not_next += 1
                        is_next = False
                    want = max(1, goal - len(tokens_a))
                    if match_length and len(chunk) >= 2:
                        want = sum(len(s) for s in chunk[a_end:])  # what the actual continuation holds
                    elif match_length and i + 1 < len(doc):
                        want = len(_fill(doc, i + 1, want)[0])
                    b_doc = _other(d, n_docs, rng)
                    # A partner document too short for the continuation's length (a stub) would leave B
                    # short: a length cue. Draw again (a few times) for one that holds enough.
                    for _ in range(20 if match_length else 0):
                        if _tokens(documents, b_doc) >= want:
                            break
                        b_doc = _other(d, n_docs, rng)
                    other = documents[b_doc]
                    if match_length:
                        tokens_b = _random_span(other, want, rng)
                    else:
                        tokens_b, _ = _fill(other, int(rng.integers(len(other))), want)
                    i -= len(chunk) - a_end  # the unused sentences are read again
                if _truncate(tokens_a, tokens_b, max_tokens, rng):
                    stats.truncated += 1
                stats.short_target += goal_short
                yield Instance(tuple(tokens_a), tuple(tokens_b), IS_NEXT if is_next else NOT_NEXT, d, b_doc)
                chunk, length = [], 0
                goal_short, goal = _goal(rng, short_seq_prob, max_tokens)
            i += 1


def build(documents: list[Document], *, max_length: int = MAX_LENGTH, short_seq_prob: float = SHORT_SEQ_PROB,
          dupe_factor: int = 1, seed: int = 0) -> tuple[list[Instance], SegmentStats]:
    """`dupe_factor` passes over `documents` (see the module docstring), exactly half IsNext,
    in pass and document order."""
    documents = [[s for s in doc if s] for doc in documents]
    documents = [doc for doc in documents if doc]
    if len(documents) < 2:
        raise ValueError("NotNext segments come from another document: need at least two non-empty documents")
    rng = numpy_rng(seed, "segments")
    stats = SegmentStats(documents=len(documents), sentences=sum(map(len, documents)),
                         tokens=sum(len(s) for doc in documents for s in doc), dupe_factor=dupe_factor)
    built: list[Instance] = []
    for _ in range(dupe_factor):
        built += _one_pass(documents, max_length - 3, short_seq_prob, rng, stats)
    labels = np.array([x.label for x in built])
    n_next, n_not = int((labels == IS_NEXT).sum()), int((labels == NOT_NEXT).sum())
    surplus_label = NOT_NEXT if n_not > n_next else IS_NEXT
    surplus = abs(n_not - n_next)
    candidates = np.flatnonzero(labels == surplus_label)
    drop = set(rng.choice(candidates, surplus, replace=False).tolist()) if surplus else set()
    instances = [x for k, x in enumerate(built) if k not in drop]
    stats.built, stats.dropped_to_balance, stats.instances = len(built), len(drop), len(instances)
    stats.is_next = sum(x.label == IS_NEXT for x in instances)
    stats.not_next = stats.instances - stats.is_next
    stats.mean_length = round(float(np.mean([x.length for x in instances])), 2)
    stats.by_label_mean_length = {
        name: round(float(np.mean([x.length for x in instances if x.label == lab])), 2)
        for name, lab in (("IsNext", IS_NEXT), ("NotNext", NOT_NEXT))}
    return instances, stats


def encode(instance: Instance, cls_id: int, sep_id: int) -> tuple[list[int], list[int]]:
    """(input_ids, token_type_ids) of [CLS] A [SEP] B [SEP]; segment 0 through the first [SEP]."""
    ids = [cls_id, *instance.tokens_a, sep_id, *instance.tokens_b, sep_id]
    types = [0] * (len(instance.tokens_a) + 2) + [1] * (len(instance.tokens_b) + 1)
    return ids, types


def checksum(instances: list[Instance]) -> str:
    """sha256 over every pair's ids and label, in order: names the exact pair set."""
    digest = hashlib.sha256()
    for x in instances:
        digest.update(f"{x.label}|{x.doc}|{x.b_doc}|{' '.join(map(str, x.tokens_a))}|"
                      f"{' '.join(map(str, x.tokens_b))}\n".encode())
    return digest.hexdigest()
