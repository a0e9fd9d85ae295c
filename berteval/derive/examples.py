"""Pre-training examples from the training text: articles -> WordPiece documents -> BERT-style
segment pairs (`segments`) -> optionally masked sequences (`masking`).

Shared by the two NSP-trained variants so both read exactly the same kind of pairs; the
record gets the text's and the pairs' checksums and counts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..errors import BertevalError
from ..seeds import numpy_rng
from . import text
from ..pretrain import masking, segments
from .base import Context


@dataclass
class Pairs:
    instances: list  # segments.Instance
    record: dict  # {"data": ..., "pairs": ...} for the derivation record

    @property
    def sha256(self) -> str:
        return self.record["pairs"]["pairs_sha256"]


def segment_pairs(ctx: Context, tokenizer, max_positions: int) -> Pairs:
    """The seeded BERT-style pairs of the training text, `dupe_factor` passes."""
    if ctx.hyper["max_length"] > max_positions:
        raise BertevalError(f"--max-length {ctx.hyper['max_length']} exceeds the model's {max_positions} positions")
    training = text.load(ctx.data_dir)
    docs = text.documents(training.articles, tokenizer)
    h = ctx.hyper
    instances, stats = segments.build(docs, max_length=h["max_length"], short_seq_prob=h["short_seq_prob"],
                                      dupe_factor=h["dupe_factor"], seed=ctx.seed)
    data = {**training.stats(), "sentences": stats.sentences, "tokens": stats.tokens,
            "sentence_splitter": "pysbd (language en, clean=False), per paragraph",
            "tokenizer": type(tokenizer).__name__}
    pairs = {**stats.as_dict(), "pairs_sha256": segments.checksum(instances),
             "labels": "0 = IsNext, 1 = NotNext"}
    return Pairs(instances, {"data": data, "pairs": pairs})


def masked_sequences(pairs: Pairs, tokenizer, rule: masking.MaskingRule, seed: int) -> tuple[list[dict], dict]:
    """One masked sequence per pair (each pass of the data masked afresh, as the pairs are
    rebuilt per pass): dicts of input_ids, token_type_ids, mlm_labels (int arrays), nsp_label."""
    rng = numpy_rng(seed, "masking")
    random_ids = masking.replacement_ids(tokenizer)
    digest = hashlib.sha256()
    out, n_masked, n_tokens = [], 0, 0
    kinds = np.zeros(3, dtype=np.int64)  # [MASK], random, unchanged
    for x in pairs.instances:
        ids, types = segments.encode(x, tokenizer.cls_token_id, tokenizer.sep_token_id)
        ids = np.array(ids, dtype=np.int64)
        special = np.isin(ids, [tokenizer.cls_token_id, tokenizer.sep_token_id])
        corrupted, labels = masking.mask_tokens(ids, ~special, rule, tokenizer.mask_token_id, random_ids, rng)
        sel = labels != masking.IGNORE
        n_masked += int(sel.sum())
        n_tokens += int((~special).sum())
        kinds += [int((corrupted[sel] == tokenizer.mask_token_id).sum()), 0, int((corrupted[sel] == ids[sel]).sum())]
        digest.update(corrupted.tobytes() + labels.tobytes())
        out.append({"input_ids": corrupted, "token_type_ids": np.array(types, dtype=np.int64), "mlm_labels": labels,
                    "nsp_label": x.label})
    kinds[1] = n_masked - kinds[0] - kinds[2]  # neither [MASK] nor the original: a random token
    stats = {**rule.as_dict(), "masked_tokens": n_masked, "maskable_tokens": n_tokens,
             "masked_share": round(n_masked / max(1, n_tokens), 4),
             "replaced_by_mask": int(kinds[0]), "replaced_by_random": int(kinds[1]), "unchanged": int(kinds[2]),
             "random_from": f"{len(random_ids)} ids: the vocabulary minus special and [unused] tokens",
             "masked_sha256": digest.hexdigest()}
    return out, stats
