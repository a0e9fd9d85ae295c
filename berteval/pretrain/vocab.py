"""An uncased WordPiece vocabulary trained on the pre-training text, saved as BERT's tokenizer.

BERT's uncased vocabulary (Devlin et al. 2019, Section 3; Wu et al. 2016 for WordPiece) is
learned from its pre-training corpus; the twins learn theirs from their own training
articles (never from held-out or dev text) with the `tokenizers` library's WordPiece
trainer behind BERT's normaliser (lower-casing, accent stripping, Chinese characters split)
and pre-tokeniser (whitespace and punctuation). `VOCAB_SIZE` = 8,192 rather than BERT's
30,522, for two reasons: the word-embedding table is one tensor, and a committed file must
stay under 9 MB (a Space refuses larger files without LFS), so at hidden 256 in fp32 it can
hold at most ~8,800 rows (8,192 x 256 x 4 bytes = 8.4 MB); and with ~30-40 M training tokens
a smaller vocabulary gives each piece more occurrences to learn from. The result is a
`BertTokenizerFast` (transformers' BERT tokenizer), so any transformers user loads it with
`AutoTokenizer`.

The trainer is not deterministic: two trainings on the same lines give different vocabularies
(measured here: 12 of 8,192 pieces differ and 7,733 ids move), because `tokenizers` assigns
the ids of continuation pieces in hash-map order and breaks ties between equally frequent
merges by id (huggingface/tokenizers issue 1794, open). So the vocabulary is a recorded
artifact (its sha256 in every record, the file in every published model), and `reuse` takes
a saved one (`pretrain --vocab <folder>`, e.g. a published twin's) to rebuild the very same
examples.
"""

from __future__ import annotations

import hashlib
import time
from typing import Iterable

VOCAB_SIZE = 8_192
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0-4, as BERT's files order them first
MIN_FREQUENCY = 2
LIMIT_ALPHABET = 1_000  # characters kept as single pieces (BERT keeps a few thousand; most are rare scripts)


def _ordered(vocab: dict) -> list[str]:
    return sorted(vocab, key=vocab.get)


def _sha256(ordered: list[str]) -> str:
    """The vocabulary's checksum: its pieces in id order, one per line (what `train` and `reuse` record)."""
    return hashlib.sha256("\n".join(ordered).encode()).hexdigest()


def train(lines: Iterable[str], vocab_size: int = VOCAB_SIZE):
    """(BertTokenizerFast, record) trained on `lines`."""
    import tokenizers
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    t0 = time.perf_counter()
    wp = BertWordPieceTokenizer(lowercase=True, strip_accents=None, clean_text=True, handle_chinese_chars=True)
    wp.train_from_iterator(lines, vocab_size=vocab_size, min_frequency=MIN_FREQUENCY, limit_alphabet=LIMIT_ALPHABET,
                           special_tokens=list(SPECIAL), show_progress=False)
    ordered = _ordered(wp.get_vocab())
    tokenizer = BertTokenizerFast(vocab={t: i for i, t in enumerate(ordered)}, do_lower_case=True)
    record = {"trainer": f"tokenizers=={tokenizers.__version__} WordPiece (BertWordPieceTokenizer: lower-case, "
                         f"accents stripped, Chinese characters split)",
              "vocab_size": len(ordered), "requested_vocab_size": vocab_size, "min_frequency": MIN_FREQUENCY,
              "limit_alphabet": LIMIT_ALPHABET, "special_tokens": list(SPECIAL),
              "vocab_sha256": _sha256(ordered),
              "train_s": round(time.perf_counter() - t0, 1)}
    return tokenizer, record


def reuse(folder) -> tuple[object, dict]:
    """(BertTokenizerFast, record) of a saved vocabulary: a tokenizer folder or a model folder holding one."""
    from pathlib import Path

    from transformers import BertTokenizerFast

    from ..errors import BertevalError

    path = Path(folder)
    if not (path / "tokenizer.json").is_file() and not (path / "vocab.txt").is_file():
        raise BertevalError(f"--vocab {folder}: no tokenizer.json or vocab.txt there (give a tokenizer folder or a "
                            f"published twin's folder)")
    tokenizer = BertTokenizerFast.from_pretrained(str(path), local_files_only=True)
    ordered = _ordered(tokenizer.get_vocab())
    # BERT's own files put [unused] pieces before [UNK] (all-MiniLM-L6-v2: [PAD] 0, [UNK] 100, [CLS] 101, ...):
    # what the examples need is that every special token is there and [PAD] is 0 (the arrays pad with 0).
    absent = [t for t in SPECIAL if t not in tokenizer.get_vocab()]
    if absent or ordered[0] != "[PAD]":
        raise BertevalError(f"--vocab {folder}: lacks BERT's special tokens {absent} or does not give [PAD] id 0 "
                            f"(id 0 is {ordered[0]!r})")
    if len(ordered) > 65_535:
        raise BertevalError(f"--vocab {folder}: {len(ordered):,} pieces do not fit the examples' uint16 ids")
    return tokenizer, {"trainer": "reused", "source": path.name, "vocab_size": len(ordered), "train_s": 0.0,
                       "vocab_sha256": _sha256(ordered)}

