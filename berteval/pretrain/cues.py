"""The cue audit: can anything but meaning tell IsNext from NotNext in the training pairs?

Why: the first twins' NSP head learned whatever surface property separated the labels
(first the pair's length, then "B ends with a full stop"); a check for one cue invites the
next. So the audit is a classifier over every surface feature we can name, not one test:

- lengths of A and B (tokens after truncation), and of the whole pair;
- whether A ends, and whether B ends, a sentence (`.`, `!`, `?`, optionally followed by a
  closing quote or bracket); whether B or A starts mid-word (a `##` piece, a front cut);
- whether A and B start a paragraph;
- the first and last token of A and of B, bucketed: the 31 most frequent values of each
  position in the audited pairs, and "other";
- the share of `[UNK]` in A and in B; the share of digits-only pieces in B.

`audit` fits a 5-fold logistic regression on all of them together (one-hot buckets,
standardised numbers) and, for each feature alone, the best rule it allows (a threshold in
either direction for a number, the majority label per value for a bucket or a flag),
scored on the pairs it was chosen on, so an upper bound. Targets (issue 41): the
classifier at or below 0.55 and every single rule at or below 0.53 (chance is 0.50).
"""

from __future__ import annotations

import numpy as np

SENTENCE_END = (".", "!", "?")
CLOSERS = ('"', "'", ")", "]", "''")
BUCKETS = 31  # most frequent token values kept per position; the rest share one bucket
MAX_PAIRS = 50_000
CLASSIFIER_LIMIT = 0.55
SINGLE_RULE_LIMIT = 0.53
NUMERIC = ("len_a", "len_b", "len_pair", "unk_share_a", "unk_share_b", "digit_share_b")
FLAGS = ("a_ends_sentence", "b_ends_sentence", "a_starts_midword", "b_starts_midword", "a_paragraph_start",
         "b_paragraph_start")
TOKENS = ("a_first", "a_last", "b_first", "b_last")


def _ends_sentence(ids: tuple[int, ...], end_ids: set[int], closer_ids: set[int]) -> bool:
    if not ids:
        return False
    if ids[-1] in end_ids:
        return True
    return len(ids) >= 2 and ids[-1] in closer_ids and ids[-2] in end_ids


def features(pairs, tokenizer) -> dict[str, np.ndarray]:
    """Surface features of `pairs` (objects with tokens_a, tokens_b, a/b_paragraph_start), one array each."""
    vocab = tokenizer.get_vocab()
    end_ids = {vocab[t] for t in SENTENCE_END if t in vocab}
    closer_ids = {vocab[t] for t in CLOSERS if t in vocab}
    unk = tokenizer.unk_token_id
    inv = {i: t for t, i in vocab.items()}
    midword = np.array([inv.get(i, "").startswith("##") for i in range(len(vocab))])
    digit = np.array([inv.get(i, "").lstrip("#").isdigit() for i in range(len(vocab))])
    cols: dict[str, list] = {k: [] for k in (*NUMERIC, *FLAGS, *TOKENS)}
    for p in pairs:
        a, b = p.tokens_a, p.tokens_b
        cols["len_a"].append(len(a))
        cols["len_b"].append(len(b))
        cols["len_pair"].append(len(a) + len(b))
        cols["unk_share_a"].append(sum(t == unk for t in a) / max(1, len(a)))
        cols["unk_share_b"].append(sum(t == unk for t in b) / max(1, len(b)))
        cols["digit_share_b"].append(float(digit[list(b)].mean()) if b else 0.0)
        cols["a_ends_sentence"].append(_ends_sentence(a, end_ids, closer_ids))
        cols["b_ends_sentence"].append(_ends_sentence(b, end_ids, closer_ids))
        cols["a_starts_midword"].append(bool(a) and bool(midword[a[0]]))
        cols["b_starts_midword"].append(bool(b) and bool(midword[b[0]]))
        cols["a_paragraph_start"].append(p.a_paragraph_start)
        cols["b_paragraph_start"].append(p.b_paragraph_start)
        cols["a_first"].append(a[0] if a else -1)
        cols["a_last"].append(a[-1] if a else -1)
        cols["b_first"].append(b[0] if b else -1)
        cols["b_last"].append(b[-1] if b else -1)
    return {k: np.asarray(v, dtype=np.float64 if k in NUMERIC else np.int64) for k, v in cols.items()}


def _bucket(values: np.ndarray) -> np.ndarray:
    """Each value's rank among the BUCKETS most frequent, BUCKETS for the rest."""
    uniq, counts = np.unique(values, return_counts=True)
    top = uniq[np.argsort(-counts, kind="stable")[:BUCKETS]]
    out = np.full(len(values), BUCKETS, dtype=np.int64)
    for rank, v in enumerate(top):
        out[values == v] = rank
    return out


def _majority_rule(codes: np.ndarray, y: np.ndarray) -> float:
    """Accuracy of predicting, for each value, the label most pairs with that value carry."""
    correct = 0
    for v in np.unique(codes):
        sel = y[codes == v]
        correct += max(int(sel.sum()), len(sel) - int(sel.sum()))
    return correct / len(y)


def _threshold_rule(x: np.ndarray, y: np.ndarray) -> float:
    """Best accuracy of `x > t -> one label` over every threshold t and both directions."""
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    ones_below = np.concatenate([[0], np.cumsum(ys)])  # label-1 count among the first k
    k = np.arange(len(ys) + 1)
    valid = np.concatenate([[True], xs[1:] != xs[:-1], [True]])  # cut only between distinct values
    total_ones = ones_below[-1]
    # rule "above t -> 1": correct = zeros below + ones above
    acc_up = ((k - ones_below) + (total_ones - ones_below)) / len(y)
    best = np.maximum(acc_up, 1 - acc_up)[valid]
    return float(best.max())


def single_rules(cols: dict[str, np.ndarray], y: np.ndarray) -> dict[str, float]:
    out = {}
    for name, x in cols.items():
        if name in NUMERIC:
            out[name] = round(_threshold_rule(x, y), 4)
        elif name in TOKENS:
            out[name] = round(_majority_rule(_bucket(x), y), 4)
        else:
            out[name] = round(_majority_rule(x, y), 4)
    return out


def design_matrix(cols: dict[str, np.ndarray]) -> np.ndarray:
    parts = []
    for name in NUMERIC:
        x = cols[name]
        parts.append(((x - x.mean()) / (x.std() or 1.0))[:, None])
    for name in FLAGS:
        parts.append(cols[name][:, None].astype(np.float64))
    for name in TOKENS:
        codes = _bucket(cols[name])
        parts.append(np.eye(BUCKETS + 1)[codes][:, 1:])  # one-hot, first bucket as the reference
    return np.hstack(parts)


def audit(pairs, labels, tokenizer, seed: int = 0) -> dict:
    """The audit record of up to MAX_PAIRS pairs (the first ones): classifier accuracy, each rule, pass/fail."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    pairs = list(pairs)[:MAX_PAIRS]
    y = np.asarray(list(labels)[: len(pairs)], dtype=np.int64)
    if len(pairs) < 50 or len(set(y.tolist())) < 2:
        raise ValueError(f"the cue audit needs at least 50 pairs of both labels; got {len(pairs)}")
    cols = features(pairs, tokenizer)
    folds = StratifiedKFold(5, shuffle=True, random_state=seed)
    scores = cross_val_score(LogisticRegression(max_iter=2000), design_matrix(cols), y, cv=folds)
    rules = single_rules(cols, y)
    worst = max(rules, key=rules.get)
    classifier = round(float(scores.mean()), 4)
    return {"pairs": len(pairs), "is_next_share": round(float((y == 0).mean()), 4),
            "classifier_5fold_accuracy": classifier, "classifier_fold_accuracies": [round(float(s), 4) for s in scores],
            "single_feature_rule_accuracy": rules, "strongest_single_feature": worst,
            "limits": {"classifier": CLASSIFIER_LIMIT, "single_rule": SINGLE_RULE_LIMIT},
            "passed": bool(classifier <= CLASSIFIER_LIMIT and rules[worst] <= SINGLE_RULE_LIMIT),
            "b_ends_sentence_share": {
                "IsNext": round(float(cols["b_ends_sentence"][y == 0].mean()), 4),
                "NotNext": round(float(cols["b_ends_sentence"][y == 1].mean()), 4)}}
