"""Encode once: one forward pass per example yields every requested pooling at every
requested layer, cached on disk.

An ablation over K poolings and L layers must cost one encoding, not K x L, and adding
a seed must cost none. So inputs are tokenised once, sorted by length and batched by a
token budget (padding only to the longest in each batch), run under
`torch.inference_mode()`, and every (pooling, layer) vector is taken from the same
hidden states. Results are cached under $BERTEVAL_CACHE keyed by model + revision +
data checksum + max length + dtype, one .npy per (pooling, layer), written atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from . import pooling as pooling_mod
from .config import cache_dir
from .errors import BertevalError
from .models import LoadedModel

FEATURE_FORMAT = 1  # bump when the way vectors are computed changes: old cache entries stop matching
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

Text = str | tuple[str, str]  # a sentence, or a sentence pair encoded as [CLS] A [SEP] B [SEP]


def feature_key(model: LoadedModel, data_sha256: str, max_length: int, dtype: str) -> str:
    blob = json.dumps(
        {
            "format": FEATURE_FORMAT,
            "model": model.model_id,
            "revision": model.revision,
            "data": data_sha256,
            "max_length": max_length,
            "dtype": dtype,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


@dataclass
class EncodeResult:
    vectors: dict[tuple[str, int], np.ndarray]  # (pooling, layer) -> (N, width) float32
    encoded: int  # how many examples this call ran through the encoder (0 on a warm cache)
    wall_s: float  # time spent encoding in this call
    cache_dir: Path


def tokenise(model: LoadedModel, texts: list[Text], max_length: int) -> dict:
    if texts and isinstance(texts[0], tuple):
        first, second = zip(*texts)
        return model.tokenizer(list(first), list(second), truncation="longest_first", max_length=max_length)
    return model.tokenizer(list(texts), truncation=True, max_length=max_length)


def _batches(lengths: np.ndarray, max_tokens: int, max_batch: int) -> list[np.ndarray]:
    """Length-sorted batches whose padded size stays within a token budget."""
    order = np.argsort(-lengths, kind="stable")
    out, start = [], 0
    while start < len(order):
        longest = int(lengths[order[start]])
        size = max(1, min(max_batch, max_tokens // max(longest, 1)))
        out.append(order[start : start + size])
        start += size
    return out


def autocast(dtype: str):
    """The compute-dtype context for a forward pass: bf16 autocast on CPU, or nothing for fp32."""
    if dtype not in DTYPES:
        raise BertevalError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    return torch.autocast("cpu", dtype=DTYPES[dtype]) if dtype != "fp32" else contextlib.nullcontext()


def padded_batches(model: LoadedModel, texts: list[Text], max_length: int, max_tokens: int = 4096,
                   max_batch: int = 256):
    """Tokenise once, then yield (indices into texts, padded batch of tensors), longest first."""
    enc = tokenise(model, texts, max_length)
    lengths = np.array([len(ids) for ids in enc["input_ids"]])
    keys = [k for k in enc.keys() if k in ("input_ids", "attention_mask", "token_type_ids")]
    for idx in _batches(lengths, max_tokens, max_batch):
        feats = [{k: enc[k][i] for k in keys} for i in idx]
        yield idx, dict(model.tokenizer.pad(feats, return_tensors="pt"))


@torch.inference_mode()
def encode_batch(
    model: LoadedModel,
    batch: dict,
    poolings: list[str],
    layers: list[int],
    dtype: str = "fp32",
) -> dict[tuple[str, int], torch.Tensor]:
    """One forward pass over a padded batch -> {(pooling, layer): (B, width) float32}."""
    specs = pooling_mod.POOLINGS
    need_all = any(layer != -1 for layer in layers) or any(specs[p].needs_all_states for p in poolings)
    with autocast(dtype):
        out = model.encoder(**batch, output_hidden_states=need_all)
        states = out.hidden_states if need_all else None
        result = {}
        for layer in layers:
            hidden = out.last_hidden_state if layer == -1 else out.hidden_states[layer]  # (B, T, H)
            for name in poolings:
                if specs[name].last_layer_only and layer != -1:
                    continue
                result[(name, layer)] = pooling_mod.apply(name, hidden, batch["attention_mask"], model.encoder, states)
    return {k: v.float() for k, v in result.items()}


def encode(
    model: LoadedModel,
    texts: list[Text],
    *,
    data_sha256: str,
    poolings: list[str],
    layers: list[int] = (-1,),
    max_length: int = 128,
    dtype: str = "fp32",
    max_tokens: int = 4096,  # measured: smaller padded batches run faster on this CPU than 16k-token ones
    max_batch: int = 256,
    use_cache: bool = True,
    progress: bool = True,
    desc: str = "encoding",
) -> EncodeResult:
    """Vectors for every (pooling, layer) asked for, from one pass over `texts`."""
    if dtype not in DTYPES:
        raise BertevalError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    for name in poolings:
        pooling_mod.check_available(name, model.heads)
    wanted = [
        (p, layer)
        for layer in layers
        for p in poolings
        if not (pooling_mod.POOLINGS[p].last_layer_only and layer != -1)
    ]
    folder = cache_dir() / "features" / feature_key(model, data_sha256, max_length, dtype)
    vectors: dict[tuple[str, int], np.ndarray] = {}
    if use_cache:
        for p, layer in wanted:
            f = folder / f"{p}@{layer}.npy"
            if f.is_file():
                arr = np.load(f)
                if arr.shape[0] == len(texts):
                    vectors[(p, layer)] = arr
    missing = [k for k in wanted if k not in vectors]
    if not missing:
        return EncodeResult(vectors, 0, 0.0, folder)

    t0 = time.perf_counter()
    miss_poolings = list(dict.fromkeys(p for p, _ in missing))
    miss_layers = list(dict.fromkeys(layer for _, layer in missing))
    out = {k: np.zeros((len(texts), pooling_mod.POOLINGS[k[0]].width(model.hidden_size)), dtype=np.float32)
           for k in missing}
    bar = tqdm(total=len(texts), desc=desc, unit="ex", disable=not progress, leave=False)
    for idx, batch in padded_batches(model, texts, max_length, max_tokens, max_batch):
        pooled = encode_batch(model, batch, miss_poolings, miss_layers, dtype)
        for k in missing:
            out[k][idx] = pooled[k].numpy()
        bar.update(len(idx))
    bar.close()
    wall = time.perf_counter() - t0

    if use_cache:
        folder.mkdir(parents=True, exist_ok=True)
        for (p, layer), arr in out.items():
            tmp = folder / f".{p}@{layer}.{os.getpid()}.npy"
            np.save(tmp, arr)
            os.replace(tmp, folder / f"{p}@{layer}.npy")  # atomic: a reader never sees half a file
        meta = {"model": model.model_id, "revision": model.revision, "data_sha256": data_sha256,
                "max_length": max_length, "dtype": dtype, "n": len(texts), "last_encode_wall_s": round(wall, 3)}
        (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    vectors.update(out)
    return EncodeResult(vectors, len(texts), wall, folder)
