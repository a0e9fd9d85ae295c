"""Encode once: one forward pass per example yields every requested pooling at every
requested layer, cached on disk.

An ablation over K poolings and L layers must cost one encoding, not K x L, and adding
a seed must cost none. So inputs are tokenised once, sorted by length and batched by a
token budget (padding only to the longest in each batch), run under
`torch.inference_mode()`, and every (pooling, layer) vector is taken from the same
hidden states. The budget is the device's (`device_budget`: 4,096 tokens on the CPU, sized from
free memory on a GPU), and a batch that runs out of GPU memory is retried at half of it
(`each_batch`), not a failed run. The encoder is frozen here, so `--dtype bf16` runs it on bf16 weights
(`berteval.precision`); pooling reads the states as float32. Results are cached under
$BERTEVAL_CACHE keyed by model + revision + data checksum + max length + dtype (+ the bf16
path), one .npy per (pooling, layer).

The cache trusts nothing on disk: a cut file used to crash every rerun, and a same-size
corruption gave silently wrong accuracies under the same run ids. So each array has a
proof beside it (`<pooling>@<layer>.json`: sha256 and size of the .npy, its shape and
dtype, and the key it was built for), checked on every read; an array that is missing
its proof, cut, corrupted or built for another key is reported in one line, deleted
and recomputed. Writes are temp file + rename under the folder's lock, and temp files
left by killed writers are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from . import devices
from . import pooling as pooling_mod
from . import precision
from .config import cache_dir
from .errors import BertevalError
from .models import LoadedModel

FEATURE_FORMAT = 1  # bump when the way vectors are computed changes: old cache entries stop matching
# Padded tokens per encoder batch, per dtype. fp32: measured, smaller padded batches ran faster on a
# 2-core CPU than 16k-token ones. bf16 (weights): the fp32 figure until measured; bf16 halves the
# activations' bytes, so a larger budget may pay (`python -m berteval bench --bf16-budgets ...`).
MAX_TOKENS = {"fp32": 4096, "bf16": 4096}


def token_budget(dtype: str) -> int:
    """Padded tokens per batch for a frozen encoder in `dtype` on the CPU (an unknown dtype is refused here)."""
    precision.check(dtype)
    return MAX_TOKENS[dtype]


def device_budget(dtype: str) -> int:
    """Padded tokens per batch for a frozen model in `dtype` on the process's device: the CPU's `token_budget`,
    or on a GPU what its free memory holds (`berteval.devices.token_budget`). Every frozen forward path that
    batches by tokens (the encoder, the token probe's states, a checkpoint's NSP head) starts from it."""
    return devices.token_budget(token_budget(dtype))

Text = str | tuple[str, str]  # a sentence, or a sentence pair encoded as [CLS] A [SEP] B [SEP]

log = logging.getLogger(__name__)  # unconfigured, a warning still reaches stderr as its one line


def key_fields(model: LoadedModel, data_sha256: str, max_length: int, dtype: str,
               how: str = precision.FROZEN) -> dict:
    """Everything that decides the vectors: the cache folder's name is its hash, each proof names it in full.
    bf16 on bf16 weights adds its path; fp32 keys (and autocast's) are as they always were. A device that runs
    bf16 as something else (a GPU without bf16) adds what ran (`precision.fallback`; never on the CPU)."""
    return {"format": FEATURE_FORMAT, "model": model.model_id, "revision": model.revision, "data": data_sha256,
            "max_length": max_length, "dtype": dtype, **precision.identity(dtype, how),
            **precision.fallback(dtype, how)}


def feature_key(model: LoadedModel, data_sha256: str, max_length: int, dtype: str, how: str = precision.FROZEN) -> str:
    blob = json.dumps(key_fields(model, data_sha256, max_length, dtype, how), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


# --- the cache: every array with its proof -------------------------------------------------------------

TEMP_SUFFIX = ".tmp"  # `.<file>.<host>.<pid>.tmp`: a write in progress, or left behind by a killed one
HOST = socket.gethostname().replace(".", "_")  # a cache on a shared disk: judge only this machine's writers


@contextlib.contextmanager
def _locked(folder: Path):
    """The folder's lock, held exclusively while checking, deleting or writing its files: a reader never
    pairs one writer's array with another writer's proof."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock; so does the process dying


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{HOST}.{os.getpid()}{TEMP_SUFFIX}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk or a file-size limit leaves no half temporary behind
        raise


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _check(folder: Path, name: str, key: dict, shape: tuple[int, int]) -> tuple[np.ndarray | None, str | None]:
    """(the cached array, None) when its proof holds; (None, what is wrong) when it does not; (None, None)
    when nothing is cached under `name`. Call with the folder locked."""
    npy, proof_file = folder / f"{name}.npy", folder / f"{name}.json"
    if not npy.is_file():
        return None, ("its array is missing" if proof_file.is_file() else None)
    if not proof_file.is_file():
        return None, "it has no proof (checksum) beside it: written by an older berteval or by a killed write"
    try:
        proof = json.loads(proof_file.read_text())
        data = npy.read_bytes()
        if proof.get("key") != key or proof.get("name") != name:
            return None, "its proof names another key"
        if len(data) != proof["bytes"]:
            return None, f"it is cut or padded: {len(data):,} bytes, its proof says {proof['bytes']:,}"
        if hashlib.sha256(data).hexdigest() != proof["sha256"]:
            return None, "it is corrupted: its sha256 does not match its proof"
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:  # unreadable proof or array
        return None, f"it cannot be read ({type(exc).__name__}: {exc})"
    if arr.shape != shape or arr.dtype != np.float32 or list(arr.shape) != proof.get("shape"):
        return None, f"its shape is {arr.shape} {arr.dtype}, expected {shape} float32"
    return arr, None


def _store(folder: Path, name: str, key: dict, arr: np.ndarray) -> None:
    """Write the array, then its proof (call with the folder locked). A kill between the two leaves an
    array without a matching proof, which the next read reports and recomputes."""
    data = _npy_bytes(arr)
    (folder / f"{name}.json").unlink(missing_ok=True)
    _write_atomic(folder / f"{name}.npy", data)
    proof = {"name": name, "key": key, "shape": list(arr.shape), "dtype": str(arr.dtype), "bytes": len(data),
             "sha256": hashlib.sha256(data).hexdigest()}
    _write_atomic(folder / f"{name}.json", json.dumps(proof, indent=1).encode())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def remove_stale_temps(root: Path | None = None) -> list[Path]:
    """Delete temp files whose writer is gone (killed mid-write): `.<file>.<host>.<pid>.tmp` under the
    feature cache, written on this machine by a pid that no longer runs. Returns what was removed."""
    root = root if root is not None else cache_dir() / "features"
    removed = []
    for tmp in root.glob(f"*/.*{TEMP_SUFFIX}"):
        rest, _, pid = tmp.name[: -len(TEMP_SUFFIX)].rpartition(".")
        if rest.rpartition(".")[2] == HOST and pid.isdigit() and not _pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


@dataclass
class EncodeResult:
    vectors: dict[tuple[str, int], np.ndarray]  # (pooling, layer) -> (N, width) float32
    encoded: int  # how many examples this call ran through the encoder (0 on a warm cache)
    wall_s: float  # time spent encoding in this call
    cache_dir: Path
    repaired: list[str] = field(default_factory=list)  # one line per cache file found bad and recomputed


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


def padded_batches(model: LoadedModel, texts: list[Text], max_length: int, max_tokens: int = MAX_TOKENS["fp32"],
                   max_batch: int = 256):
    """Tokenise once, then yield (indices into texts, padded batch of tensors), longest first."""
    enc = tokenise(model, texts, max_length)
    lengths = np.array([len(ids) for ids in enc["input_ids"]])
    keys = [k for k in enc.keys() if k in ("input_ids", "attention_mask", "token_type_ids")]
    for idx in _batches(lengths, max_tokens, max_batch):
        feats = [{k: enc[k][i] for k in keys} for i in idx]
        yield idx, devices.to(dict(model.tokenizer.pad(feats, return_tensors="pt")))


def each_batch(model: LoadedModel, texts: list[Text], max_length: int, max_tokens: int, run,
               max_batch: int = 256) -> int:
    """Tokenise once, then `run(indices into texts, padded batch of tensors on the device)` for the batches
    `padded_batches` would yield, longest first. A batch that runs out of GPU memory is retried at half the
    token budget, and the batches after it keep the lower budget (`berteval.devices.batched`): `run` must
    write its results by index, so a retried batch writes the same rows. Returns the budget it ended with."""
    enc = tokenise(model, texts, max_length)
    lengths = np.array([len(ids) for ids in enc["input_ids"]])
    keys = [k for k in enc.keys() if k in ("input_ids", "attention_mask", "token_type_ids")]

    def one(idx: np.ndarray) -> None:
        feats = [{k: enc[k][i] for k in keys} for i in idx]
        run(idx, devices.to(dict(model.tokenizer.pad(feats, return_tensors="pt"))))

    return devices.batched(lengths, max_tokens, one, max_batch)


@torch.inference_mode()
def encode_batch(
    model: LoadedModel,
    batch: dict,
    poolings: list[str],
    layers: list[int],
    dtype: str = "fp32",
    how: str = precision.FROZEN,
) -> dict[tuple[str, int], torch.Tensor]:
    """One forward pass over a padded batch -> {(pooling, layer): (B, width) float32}.

    The encoder is frozen, so bf16 runs on its bf16 copy (`precision.FROZEN`), and pooling reads the states
    cast back to float32 (the `pooler` pooling through the fp32 original's dense layer: one matmul per
    input; a mean over tokens kept in bf16 would round it). `how=precision.MIXED` is the autocast path
    frozen inference took before, kept for the bench to compare. In fp32 every cast is a no-op."""
    specs = pooling_mod.POOLINGS
    need_all = any(layer != -1 for layer in layers) or any(specs[p].needs_all_states for p in poolings)
    with precision.running(model.encoder, dtype, how) as encoder:
        out = encoder(**batch, output_hidden_states=need_all)
        states = tuple(h.float() for h in out.hidden_states) if need_all else None
        result = {}
        for layer in layers:
            hidden = out.last_hidden_state.float() if layer == -1 else states[layer]  # (B, T, H)
            for name in poolings:
                if specs[name].last_layer_only and layer != -1:
                    continue
                result[(name, layer)] = pooling_mod.apply(name, hidden, batch["attention_mask"], model.encoder, states)
    return {k: v.float() for k, v in result.items()}


def _encode_apart(model, texts, separate, joint, data_sha256, layers, max_length, dtype, max_tokens, max_batch,
                  use_cache, progress, desc, how) -> EncodeResult:
    """The bi-encoder poolings of pairs (A and B encoded as single texts, then combined) beside the joint ones."""
    if not texts or not all(isinstance(t, tuple) and len(t) == 2 for t in texts):
        raise BertevalError(f"pooling {', '.join(separate)} reads sentence pairs; these inputs are single texts")
    common = dict(layers=layers, max_length=max_length, dtype=dtype, max_tokens=max_tokens, max_batch=max_batch,
                  use_cache=use_cache, progress=progress, how=how)
    out = encode(model, texts, data_sha256=data_sha256, poolings=joint, desc=desc, **common) if joint else None
    vectors = dict(out.vectors) if out else {}
    wall, encoded, repaired = (out.wall_s, out.encoded, list(out.repaired)) if out else (0.0, 0, [])
    inner = sorted({pooling_mod.POOLINGS[p].of for p in separate})
    sides = {}
    for side, k in (("A", 0), ("B", 1)):
        res = encode(model, [t[k] for t in texts], data_sha256=f"{data_sha256}/{side}", poolings=inner,
                     desc=f"{desc} ({side} alone)", **common)
        sides[side] = res.vectors
        wall, encoded, repaired = wall + res.wall_s, encoded + res.encoded, repaired + list(res.repaired)
    for name in separate:
        of = pooling_mod.POOLINGS[name].of
        for layer in layers:
            if (of, layer) in sides["A"]:
                vectors[(name, layer)] = pooling_mod.combine_uv(sides["A"][(of, layer)], sides["B"][(of, layer)])
    return EncodeResult(vectors, encoded, wall, out.cache_dir if out else None, repaired)


def _cached(folder: Path, wanted: list, key: dict, n: int, width: dict) -> tuple[dict, list[str]]:
    """The vectors of `wanted` the cache holds intact, and a note for each damaged file it deleted."""
    vectors: dict[tuple[str, int], np.ndarray] = {}
    repaired: list[str] = []
    if stale := remove_stale_temps(folder.parent):
        log.warning("feature cache: removed %d temp file(s) left by killed writes", len(stale))
    with _locked(folder):
        for p, layer in wanted:
            arr, problem = _check(folder, f"{p}@{layer}", key, (n, width[p]))
            if arr is not None:
                vectors[(p, layer)] = arr
            elif problem:
                for suffix in (".npy", ".json"):
                    (folder / f"{p}@{layer}{suffix}").unlink(missing_ok=True)
                repaired.append(f"feature cache: {folder / f'{p}@{layer}.npy'}: {problem}; deleted, recomputing")
                log.warning(repaired[-1])
    return vectors, repaired


def _cache_write(folder: Path, out: dict, key: dict, model, data_sha256: str, max_length: int, dtype: str, n: int,
                 wall: float) -> list[str]:
    """Store freshly encoded vectors; a cache that cannot be written is a note, never a failed run."""
    try:
        with _locked(folder):
            for (p, layer), arr in out.items():
                _store(folder, f"{p}@{layer}", key, arr)
            meta = {"model": model.model_id, "revision": model.revision, "data_sha256": data_sha256,
                    "max_length": max_length, "dtype": dtype, "n": n, "last_encode_wall_s": round(wall, 3)}
            _write_atomic(folder / "meta.json", json.dumps(meta, indent=1).encode())
    except OSError as exc:
        # The cache only saves time: the vectors are computed and the run goes on, uncached, saying why.
        note = (f"the feature cache could not be written ({exc.strerror or exc}: "
                f"{exc.filename or folder}); these vectors will be encoded again next time")
        log.warning(note)
        return [note]
    return []


def encode(
    model: LoadedModel,
    texts: list[Text],
    *,
    data_sha256: str,
    poolings: list[str],
    layers: list[int] = (-1,),
    max_length: int = 128,
    dtype: str = "fp32",
    max_tokens: int | None = None,  # None: device_budget(dtype)
    max_batch: int = 256,
    use_cache: bool = True,
    progress: bool = True,
    desc: str = "encoding",
    how: str = precision.FROZEN,  # MIXED: the earlier autocast path, for the bench (see encode_batch)
) -> EncodeResult:
    """Vectors for every (pooling, layer) asked for, from one pass over `texts`."""
    precision.check(dtype)
    separate = [p for p in poolings if pooling_mod.POOLINGS[p].separate]
    if separate:  # bi-encoder readings: each text of the pair encoded alone (cached as single texts), combined
        return _encode_apart(model, texts, separate, [p for p in poolings if p not in separate], data_sha256,
                             layers, max_length, dtype, max_tokens, max_batch, use_cache, progress, desc, how)
    for name in poolings:
        pooling_mod.check_available(name, model.heads)
    wanted = [
        (p, layer)
        for layer in layers
        for p in poolings
        if not (pooling_mod.POOLINGS[p].last_layer_only and layer != -1)
    ]
    key = key_fields(model, data_sha256, max_length, dtype, how)
    folder = cache_dir() / "features" / feature_key(model, data_sha256, max_length, dtype, how)
    width = {p: pooling_mod.POOLINGS[p].width(model.hidden_size) for p in poolings}
    vectors, repaired = _cached(folder, wanted, key, len(texts), width) if use_cache else ({}, [])
    missing = [k for k in wanted if k not in vectors]
    if not missing:
        return EncodeResult(vectors, 0, 0.0, folder, repaired)

    t0 = time.perf_counter()
    miss_poolings = list(dict.fromkeys(p for p, _ in missing))
    miss_layers = list(dict.fromkeys(layer for _, layer in missing))
    out = {k: np.zeros((len(texts), width[k[0]]), dtype=np.float32) for k in missing}  # (N, width)
    # Under a multi-process launch each process encodes a contiguous share and the shares are gathered in
    # order: every process ends with the same vectors a one-process run has (berteval.devices.shard).
    share = devices.shard(len(texts))
    mine = list(range(share.start, share.stop))
    bar = tqdm(total=len(mine), desc=desc, unit="ex", disable=not progress, leave=False)

    def run(idx: np.ndarray, batch: dict) -> None:
        pooled = encode_batch(model, batch, miss_poolings, miss_layers, dtype, how)
        rows = np.asarray(mine)[idx]
        for k in missing:
            out[k][rows] = pooled[k].cpu().numpy()
        bar.update(len(idx))

    # Out of GPU memory: the batch again at half the budget, not a failed run (berteval.devices.batched).
    each_batch(model, [texts[i] for i in mine], max_length, max_tokens or device_budget(dtype), run, max_batch)
    bar.close()
    if share.processes > 1:
        out = devices.gather_rows(out, share)
    wall = time.perf_counter() - t0

    if use_cache and share.main:
        repaired += _cache_write(folder, out, key, model, data_sha256, max_length, dtype, len(texts), wall)
    vectors.update(out)
    return EncodeResult(vectors, len(texts), wall, folder, repaired)
