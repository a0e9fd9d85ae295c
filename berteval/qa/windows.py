"""Question + context -> model windows for span QA.

A context longer than the window is cut into overlapping windows (`max_length` tokens,
`doc_stride` tokens shared between neighbours, the fast tokenizer's `stride`), so an
answer past the first window is still seen whole in some window. Every window keeps
the character offsets of its context tokens (None for question and special tokens),
which is how decoding maps a token span back to the exact context text. For training,
each window's label is the token span of the answer when the window holds all of it,
else [CLS] (token 0), as in BERT's SQuAD recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import BertevalError
from . import DEFAULTS

MAX_QUESTION_TOKENS = 64  # long questions are cut so the context keeps most of the window


@dataclass
class Windows:
    example_index: np.ndarray  # (W,) the question each window belongs to
    features: list[dict]  # per window: input_ids, attention_mask, token_type_ids (unpadded)
    offsets: list[list[tuple[int, int] | None]]  # per window: character span of each context token
    start_positions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # (W,)
    end_positions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # (W,)

    def __len__(self) -> int:
        return len(self.features)

    def windows_of(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for w, ex in enumerate(self.example_index.tolist()):
            out.setdefault(ex, []).append(w)
        return out


def _trim_question(tokenizer, question: str) -> str:
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= MAX_QUESTION_TOKENS:
        return question
    return question[: enc["offset_mapping"][MAX_QUESTION_TOKENS - 1][1]]


def make_windows(tokenizer, questions: list[str], contexts: list[str], *, max_length: int = DEFAULTS.max_length,
                 doc_stride: int = DEFAULTS.doc_stride, answer_starts: list[int] | None = None,
                 answer_texts: list[str] | None = None) -> Windows:
    """Windows for every (question, context); with answers, training labels too."""
    for i, (q, c) in enumerate(zip(questions, contexts)):
        if not q.strip() or not c.strip():
            raise BertevalError(f"example {i}: the question and the context must both be non-empty")
    questions = [_trim_question(tokenizer, q.lstrip()) for q in questions]
    longest_q = max(len(ids) for ids in tokenizer(questions, add_special_tokens=False)["input_ids"])
    if doc_stride <= 0 or doc_stride >= max_length - longest_q - 3:  # 3 = [CLS] and two [SEP]
        raise BertevalError(f"doc_stride {doc_stride} does not fit: windows of {max_length} tokens hold a question of "
                            f"{longest_q} tokens; use a doc stride below {max_length - longest_q - 3}")
    enc = tokenizer(questions, contexts, truncation="only_second", max_length=max_length, stride=doc_stride,
                    return_overflowing_tokens=True, return_offsets_mapping=True)
    sample_map = np.asarray(enc["overflow_to_sample_mapping"], dtype=np.int64)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
    feats, offsets, starts, ends = [], [], [], []
    for w in range(len(enc["input_ids"])):
        seq = enc.sequence_ids(w)
        offs = [tuple(o) if seq[t] == 1 else None for t, o in enumerate(enc["offset_mapping"][w])]
        feats.append({k: enc[k][w] for k in keys})
        offsets.append(offs)
        if answer_starts is not None:
            ex = int(sample_map[w])
            s_char = answer_starts[ex]
            e_char = s_char + len(answer_texts[ex])
            s_tok, e_tok = _label(offs, s_char, e_char)
            starts.append(s_tok)
            ends.append(e_tok)
    return Windows(sample_map, feats, offsets, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))


def _label(offs: list[tuple[int, int] | None], s_char: int, e_char: int) -> tuple[int, int]:
    """Token span holding [s_char, e_char) in this window, or (0, 0) = [CLS] when it is not all here."""
    ctx = [t for t, o in enumerate(offs) if o is not None]
    if not ctx or offs[ctx[0]][0] > s_char or offs[ctx[-1]][1] < e_char:
        return 0, 0
    s_tok = next(t for t in ctx if offs[t][1] > s_char)
    e_tok = next(t for t in reversed(ctx) if offs[t][0] < e_char)
    return s_tok, e_tok
