"""One tokenizer, many request threads: each encoding call holds its tokenizer's lock.

A fast tokenizer keeps its truncation and padding settings in the Rust object it wraps and
`transformers` sets them anew before each encoding (`set_truncation_and_padding`, then
`encode_batch`). The page shares one tokenizer per model between request threads, and their calls
differ: an Answer's windows truncate "only_second" at 384 tokens, Inside BERT cuts at 128, a reading
counts tokens without a cut. Two at once can encode under the other's settings; under 8 concurrent
long answers beside short ones one request failed with "Truncation error: Second sequence not
provided". Encoding takes milliseconds, so one lock per tokenizer costs nothing a visitor sees.
Applied once, when `berteval.serve` is imported (the app's process); the CLI's single-threaded
paths never import it.
"""

from __future__ import annotations

import functools
import threading

_GUARD = threading.Lock()  # creates each tokenizer's own lock once


def _lock_of(tokenizer) -> threading.RLock:
    lock = tokenizer.__dict__.get("_berteval_lock")
    if lock is None:
        with _GUARD:
            lock = tokenizer.__dict__.setdefault("_berteval_lock", threading.RLock())
    return lock


def serialise_fast_tokenizers() -> None:
    """Make every fast tokenizer's encoding call hold that tokenizer's lock (idempotent)."""
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    encode = TokenizersBackend._encode_plus
    if getattr(encode, "_berteval_locked", False):
        return

    @functools.wraps(encode)
    def locked(self, *args, **kwargs):
        with _lock_of(self):
            return encode(self, *args, **kwargs)

    locked._berteval_locked = True
    TokenizersBackend._encode_plus = locked
