"""Where tensors live: one device option (`--device auto|cpu|cuda|cuda:N|mps`, `BERTEVAL_DEVICE`),
resolved once and recorded.

`auto` is CUDA when present, else Apple's MPS, else the CPU. A device that is not there is
refused with a message naming the ones that are, before any work starts. Light: torch is
imported when a name is resolved, not when the option is parsed.
"""

from __future__ import annotations

import logging
import os
import re

ENV = "BERTEVAL_DEVICE"
CHOICES = "auto, cpu, cuda, cuda:N, mps"
_PATTERN = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
log = logging.getLogger(__name__)


def requested(option: str | None) -> str:
    """The option, else $BERTEVAL_DEVICE, else auto; checked for form (not for presence)."""
    raw = (option or os.environ.get(ENV) or "auto").strip().lower()
    if not _PATTERN.fullmatch(raw):
        from .errors import BertevalError

        raise BertevalError(f"device {raw!r} is not one of {CHOICES}")
    return raw


def available() -> list[str]:
    import torch

    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        out.append("mps")
    return out


def resolve(option: str | None = None):
    """A torch.device for the option (see the module docstring), or a BertevalError naming what is here."""
    import torch

    from .errors import BertevalError

    name = requested(option)
    here = available()
    if name == "auto":
        name = next((d for d in here if d.startswith("cuda")), "mps" if "mps" in here else "cpu")
    if name == "cuda":
        name = "cuda:0"
    if name not in here:
        raise BertevalError(f"device {name!r} is not available here; this machine has: {', '.join(here)}")
    return torch.device(name)


_CURRENT: list = []  # the process's device, set once by a command (`use`); empty = the CPU


def use(option: str | None = None):
    """Resolve the device option once for this process: every model load, forward pass and fit that follows runs
    there (a command or the app calls this at its start). Returns the torch.device."""
    device = resolve(option)
    _CURRENT[:] = [device]
    return device


def current():
    """The device this process runs on (the CPU until `use` says otherwise)."""
    import torch

    return _CURRENT[0] if _CURRENT else torch.device("cpu")


def to(batch: dict, device=None) -> dict:
    """A batch of tensors (and anything else, passed through) on the device."""
    device = device or current()
    if device.type == "cpu":
        return batch
    return {k: (v.to(device, non_blocking=True) if hasattr(v, "to") else v) for k, v in batch.items()}


def token_budget(cpu_budget: int, device=None, per_token_bytes: int = 64 * 1024) -> int:
    """Padded tokens per inference batch: the CPU's tuned budget, or on a GPU what its free memory holds
    (a quarter of it, at `per_token_bytes` of activations a token: BERT-base's 12 layers x 768 x a few
    buffers), never less than the CPU's. `batched` halves it when a batch still does not fit."""
    import torch

    device = device or current()
    if device.type != "cuda":
        return cpu_budget
    free, _ = torch.cuda.mem_get_info(device)
    return max(cpu_budget, int(free / 4 / per_token_bytes))


def _out_of_memory():
    """The exception class a GPU's allocator raises (torch.OutOfMemoryError; torch.cuda's is the same class)."""
    import torch

    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def oom_retry(step, budget: int, floor: int = 1):
    """`(step(budget), budget)`; on an out-of-memory error, free the allocator's cache and call it again at half
    the budget, and again, while half stays at or above `floor`; below it the error is raised (a batch of one
    input that does not fit cannot be helped by halving). The budget that worked comes back with the result so
    the caller keeps it for the batches that follow."""
    import torch

    oom = _out_of_memory()
    while True:
        try:
            return step(budget), budget
        except oom:
            if budget // 2 < floor:
                raise
        # Outside the except block: the failed batch's tensors (held by the traceback) are gone by now.
        torch.cuda.empty_cache()  # a no-op where CUDA was never initialised
        log.warning("out of memory on %s at %s padded tokens a batch; retrying at %s", current(), f"{budget:,}",
                    f"{budget // 2:,}")
        budget //= 2


def batched(lengths, budget: int, run, max_batch: int | None = None) -> int:
    """Call `run(indices)` for length-sorted batches, longest first, each padded to its longest input and
    within `budget` padded tokens (at most `max_batch` inputs). A batch that runs out of GPU memory is
    retried at half the budget (`oom_retry`), and the batches after it keep the lower budget, instead of the
    run failing; without an out-of-memory error the batches are exactly the planned ones. Returns the budget
    it ended with."""
    import numpy as np

    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")
    start = 0
    while start < len(order):
        longest = max(1, int(lengths[order[start]]))
        cap = min(max_batch or len(order), len(order) - start)
        planned = min(budget, cap * longest)  # what this batch really pads to: halving it shrinks the batch

        def step(tokens: int) -> int:
            size = max(1, min(cap, tokens // longest))
            run(order[start : start + size])
            return size

        size, used = oom_retry(step, planned, floor=longest)
        if used < planned:
            budget = used
        start += size
    return budget


def compute_dtype(dtype: str, training: bool, device=None) -> str:
    """What runs for `--dtype` on the device: "fp32" as asked; for bf16, "bf16" where the device has it (the
    CPU, a CUDA GPU of compute capability 8 or more, MPS); on a CUDA GPU without bf16 (T4, V100), "fp16"
    autocast with a gradient scaler for a model being trained (and the evaluation right after it, as it
    trained), and "fp32" for frozen inference (an fp16 copy of the weights is unmeasured here and its
    activations may overflow where there is no scaler to notice)."""
    device = device or current()
    if dtype != "bf16" or bf16_supported(device):
        return dtype
    return "fp16" if training and device.type == "cuda" else "fp32"


def autocast(dtype: str, device=None):
    """Mixed precision for a model being trained on the device (`compute_dtype(dtype, training=True)`): bf16
    autocast on the device's type (CPU or CUDA), fp16 autocast on a CUDA GPU without bf16, nothing for fp32."""
    import contextlib

    import torch

    device = device or current()
    ran = compute_dtype(dtype, training=True, device=device)
    if ran == "fp32":
        return contextlib.nullcontext()
    if ran == "fp16":
        return torch.autocast(device.type, dtype=torch.float16)
    return torch.autocast(device.type if device.type in ("cpu", "cuda") else "cpu", dtype=torch.bfloat16)


def describe(device) -> str:
    """The device in words for a record: the CPU model and threads, or the GPU's name and memory."""
    import torch

    from . import provenance

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"cuda: {props.name}, {props.total_memory / 2**30:.0f} GiB"
    if device.type == "mps":
        return "mps"
    return provenance.device()


def bf16_supported(device) -> bool:
    """bf16 matmuls without emulation: a CUDA GPU of compute capability 8+ (Ampere on; ROCm builds: any), the
    CPU (any torch build runs them; fast only with AVX512-BF16 or AMX: see docs/performance.md), MPS.
    Not `torch.cuda.is_bf16_supported()`: by default it also says yes where bf16 is only emulated (a T4 or a
    V100 makes bf16 tensors, slowly), and it asks about the current GPU, not this one."""
    import torch

    if device.type == "cuda":
        if torch.version.hip:
            return True
        return torch.cuda.get_device_properties(device).major >= 8
    return True


class Share:
    """One process's contiguous rows of N (all of them when the process runs alone)."""

    def __init__(self, start: int, stop: int, rank: int, processes: int, n: int):
        self.start, self.stop, self.rank, self.processes, self.n = start, stop, rank, processes, n

    @property
    def main(self) -> bool:
        return self.rank == 0


def shard(n: int) -> Share:
    """This process's share of `n` inputs under `accelerate launch` / torchrun (WORLD_SIZE > 1), joining the
    process group through accelerate (gloo on the CPU, NCCL on GPUs); the whole range otherwise."""
    import os

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Share(0, n, 0, 1, n)
    from accelerate import PartialState

    state = PartialState(cpu=current().type == "cpu")
    rank, world = state.process_index, state.num_processes
    per = -(-n // world)
    return Share(min(n, rank * per), min(n, (rank + 1) * per), rank, world, n)


def gather_rows(arrays: dict, share: Share) -> dict:
    """Every process's rows of `arrays` ({key: (N, W) array, filled on this process's share}) put together, in
    order, on every process."""
    import numpy as np
    from accelerate.utils import gather_object

    mine = {k: v[share.start : share.stop] for k, v in arrays.items()}
    parts = gather_object([(share.rank, share.start, mine)])
    out = {k: np.zeros_like(v) for k, v in arrays.items()}
    for _, start, part in sorted(parts, key=lambda p: p[0]):
        for k, v in part.items():
            out[k][start : start + len(v)] = v
    return out
