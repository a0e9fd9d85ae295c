"""Explicit, local randomness: every sampler takes a generator made here from a seed,
never global state, so the same seed gives the same split, the same pairs and the same
record whatever ran before it in the process."""

from __future__ import annotations

import numpy as np

# Streams keep independent uses of one seed apart (the probe's held-out slice must not
# change when, say, NSP negatives are drawn with the same seed).
_STREAMS = {"split": 1, "probe": 2, "pairs": 3, "subset": 4, "train": 5, "loader": 6, "segments": 7, "masking": 8,
            "sizes": 9, "long_segments": 10, "long_masking": 11, "eval_masking": 12, "pretrain": 13,
            "folds": 14, "tiny_segments_order": 15, "tiny_segments": 16, "tiny_masking": 17,
            "segments_pass2": 18, "masking_pass2": 19, "order_pass2": 20, "segments_pass3": 21, "masking_pass3": 22,
            "order_pass3": 23}


def numpy_rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), _STREAMS[stream]])


def torch_generator(seed: int, stream: str):
    import torch  # only training needs it; listing and reading records stay torch-free

    gen = torch.Generator()
    gen.manual_seed(int(seed) * 1000 + _STREAMS[stream])
    return gen
