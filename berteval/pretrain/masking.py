"""BERT's masked-LM corruption, written from the paper's definition (Devlin et al. 2019,
Section 3.1 and Appendix C.2).

Of the WordPiece tokens of A and B (never [CLS] or [SEP]) 15% are chosen for prediction,
at least one and at most `max_predictions` (20 for 128-token sequences, as in BERT). Each
chosen token is replaced by [MASK] 80% of the time, by a random token 10% of the time, and
left unchanged 10% of the time; the model must predict the original token at every chosen
position. Labels are -100 (ignored by the loss) everywhere else.

Random replacements are drawn uniformly from the ordinary vocabulary: every id except the
tokenizer's special tokens and BERT's reserved `[unused…]` slots (BERT's script draws from the
whole vocabulary; a reserved slot no text contains teaches nothing). Masking is static per
copy of the data, as in BERT: each `dupe_factor` pass is masked afresh.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

IGNORE = -100  # the label cross-entropy skips


@dataclass(frozen=True)
class MaskingRule:
    rate: float = 0.15  # share of a sequence's tokens chosen for prediction
    mask: float = 0.8  # of those: replaced by [MASK]
    random: float = 0.1  # ... by a random token; the rest stay as they are
    max_predictions: int = 20

    def as_dict(self) -> dict:
        return asdict(self)


def replacement_ids(tokenizer) -> np.ndarray:
    """Ids a random replacement may take: the vocabulary minus special and [unused] tokens."""
    special = set(tokenizer.all_special_ids)
    vocab = tokenizer.get_vocab()
    return np.array(sorted(i for t, i in vocab.items() if i not in special and not t.startswith("[unused")),
                    dtype=np.int64)


def mask_tokens(input_ids: np.ndarray, candidates: np.ndarray, rule: MaskingRule, mask_id: int,
                random_ids: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(corrupted ids, labels) of one sequence. `candidates` (T,) bool marks maskable positions."""
    positions = np.flatnonzero(candidates)
    labels = np.full(len(input_ids), IGNORE, dtype=np.int64)
    if len(positions) == 0:
        return input_ids.copy(), labels
    n = min(rule.max_predictions, max(1, int(round(len(positions) * rule.rate))))
    chosen = np.sort(rng.choice(positions, size=n, replace=False))
    labels[chosen] = input_ids[chosen]
    draw = rng.random(n)
    out = input_ids.copy()
    out[chosen[draw < rule.mask]] = mask_id
    swap = chosen[(draw >= rule.mask) & (draw < rule.mask + rule.random)]
    out[swap] = rng.choice(random_ids, size=len(swap))
    return out, labels
