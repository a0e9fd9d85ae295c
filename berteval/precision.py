"""How a model runs in a compute dtype: frozen inference on bf16 weights, training in mixed precision.

`--dtype fp32` (the default) runs the module as loaded, unchanged, bit for bit what berteval always
computed. `--dtype bf16` on a frozen model (`FROZEN`: the probe's features and token states, the
per-token SQuAD probe's states, a checkpoint's own NSP or QA head, a served or committed QA model,
the bench) runs a copy of the module with its weights cast to bf16, made once per module and reused
(`bf16_copy`), outputs handed back as float32 and the fp32 original never touched; a model being
trained (`MIXED`) runs autocast over fp32 master weights (accelerate's mixed precision), and so does
the evaluation right after training, so the records of models trained in bf16 keep reproducing.
`--dtype auto` (`resolve`) is bf16 where the hardware computes it natively and fp32 elsewhere, resolved once
at a command's start: what runs and what is recorded is always fp32 or bf16, never "auto".
Only the frozen bf16 path names itself in run identities and feature-cache keys (`identity`:
`"bf16": "weights"`), so its results never pass for the autocast ones written before; every fp32 run
id and cache key stays as it was. The device decides what bf16 can run as (`effective`): everywhere it has
bf16 (the CPU always), as above; on a CUDA GPU without bf16 a model being trained runs fp16 autocast with a
gradient scaler and frozen inference runs fp32, named in the run id and the cache key (`fallback`) and in
the record (`describe`). The copy keeps the model's attention implementation ("sdpa" for
the default model: PyTorch's fused CPU flash-attention kernel in fp32 and bf16). Torch-free at
import: the regimes name these paths in run identities before anything is loaded. Why bf16 weights
rather than autocast, with the timings: docs/performance.md, "Why a frozen model runs on bf16
weights, not autocast".
"""

from __future__ import annotations

import contextlib
import copy
import weakref
from typing import TYPE_CHECKING

from .errors import BertevalError

if TYPE_CHECKING:
    import torch

DTYPES = ("fp32", "bf16")  # what runs, and what records and run ids name
AUTO = "auto"  # --dtype auto: bf16 where the hardware computes it natively, else fp32 (`resolve`)
CHOICES = (AUTO, *DTYPES)  # what --dtype accepts
# The /proc/cpuinfo flags of native bf16 matmuls: x86's AVX512-BF16 and AMX (Sapphire Rapids on), Arm's
# BF16 extension (Graviton 3, Neoverse V1/N2). Without one, torch still runs bf16 on the CPU, emulated: an
# AVX2-only EPYC measured bf16 weights 6.8x slower than fp32 and a bf16 training step 21x slower (issue 40).
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
CPUINFO = "/proc/cpuinfo"
FROZEN = "weights"  # frozen inference: a bf16-weights copy of the module
MIXED = "autocast"  # training, and the evaluation right after it: autocast over fp32 weights

# The paths the bench compares, by label: (dtype, how it runs). fp32 is one path whatever `how` says.
PATHS = {"fp32": ("fp32", FROZEN), f"bf16 ({FROZEN})": ("bf16", FROZEN), f"bf16 ({MIXED})": ("bf16", MIXED)}


def check(dtype: str) -> None:
    if dtype not in DTYPES:
        raise BertevalError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)} (or {AUTO} on the command "
                            f"line, resolved before anything runs)")


def _cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (x86 "flags", Arm "Features"); empty where there is none."""
    try:
        text = open(CPUINFO, encoding="utf-8", errors="replace").read()
    except OSError:  # not Linux (macOS, Windows): no flags to read, so no claim of native bf16
        return set()
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return flags


def cpu_native_bf16() -> bool:
    """Whether this CPU computes bf16 matmuls in hardware (AVX512-BF16, AMX or Arm BF16), not by emulation."""
    return bool(_cpu_flags() & NATIVE_BF16_FLAGS)


def resolve(dtype: str, device=None) -> str:
    """The dtype a command runs for `--dtype`: "fp32" and "bf16" as asked; "auto" -> "bf16" where the device
    computes it natively (a CPU with AVX512-BF16, AMX or Arm BF16; a CUDA GPU of compute capability 8+, MPS) and
    "fp32" elsewhere. Called once at a command's start, so records, run ids and derivation.json name what ran,
    never "auto". `device`: a torch.device (default: the process's, `berteval.devices.current`)."""
    if dtype != AUTO:
        check(dtype)
        return dtype
    from . import devices

    device = device or devices.current()
    if device.type == "cpu":
        return "bf16" if cpu_native_bf16() else "fp32"
    return "bf16" if devices.bf16_supported(device) else "fp32"


def emulated_bf16_note(dtype: str, device=None) -> str | None:
    """A one-line warning when bf16 was asked explicitly on a CPU that only emulates it, else None. The run
    still honours it (its cells, run ids and the committed records stay the ones the docs name)."""
    from . import devices

    device = device or devices.current()
    if dtype != "bf16" or device.type != "cpu" or cpu_native_bf16():
        return None
    return ("this CPU has no AVX512-BF16 or AMX: bf16 is emulated here, several times slower than fp32 for any "
            "cell that has to run (cells already in the results are found either way; --dtype auto picks fp32 here)")


def identity(dtype: str, how: str = FROZEN) -> dict:
    """What a run id or cache key adds for the path: nothing for fp32 or mixed precision (their ids
    predate this module and stay), `{"bf16": "weights"}` for frozen inference on bf16 weights."""
    check(dtype)
    return {"bf16": FROZEN} if dtype == "bf16" and how == FROZEN else {}


def effective(dtype: str, how: str | None = FROZEN) -> str:
    """What runs on the process's device for `dtype` on the path `how` (`berteval.devices.compute_dtype`):
    the dtype itself wherever it can run (always on the CPU), else on a CUDA GPU without bf16 "fp16" (autocast
    with a gradient scaler) for a model being trained (MIXED) and "fp32" for frozen inference."""
    from . import devices

    check(dtype)
    return devices.compute_dtype(dtype, training=how == MIXED)


def fallback(dtype: str, how: str | None = FROZEN) -> dict:
    """What a run id or cache key adds when the device cannot run `dtype` as asked: `{"precision": <what ran>}`
    (a bf16 run on a GPU without bf16), else nothing: never anything on the CPU, so no CPU id changes."""
    ran = effective(dtype, how)
    return {"precision": ran} if ran != dtype else {}


def describe(dtype: str, how: str | None = FROZEN) -> str:
    """The precision that ran, in words, for a record: "fp32", "bf16 (weights)", "bf16 (autocast)",
    "fp16 (autocast, gradient scaler)"; a fallback says that the device has no bf16."""
    ran = effective(dtype, how)
    words = {"fp32": "fp32", "fp16": "fp16 (autocast, gradient scaler)"}.get(
        ran, f"bf16 ({MIXED if how == MIXED else FROZEN})")
    return words if ran == dtype else f"{words}: bf16 asked, this device has none"


def autocast(dtype: str):
    """Mixed precision for a forward pass of trained (fp32) weights: bf16 autocast where the device has bf16,
    fp16 autocast on a CUDA GPU without it, nothing for fp32 (`berteval.devices.autocast`)."""
    from . import devices

    check(dtype)
    return devices.autocast(dtype)  # on the process's device (berteval.devices)


# module -> (fingerprint of its weights when copied, the copy). Weak keys: the copy goes with its module.
_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fingerprint(module: torch.nn.Module) -> tuple:
    """Changes whenever a weight does: an in-place update (optimiser step, load_state_dict) bumps the tensor's
    version counter, a replaced tensor has another address. A copy made before either is stale."""
    return tuple((t.data_ptr(), t._version) for t in (*module.parameters(), *module.buffers()))


def bf16_copy(module: torch.nn.Module) -> torch.nn.Module:
    """The module with bf16 weights, in eval mode, without gradients: made on first use, reused while the
    original's weights stay as they were, remade after they change. The original is left as it is."""
    import torch

    fingerprint = _fingerprint(module)
    cached = _COPIES.get(module)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, usable outside inference mode too
        # Pre-seed deepcopy's memo with the bf16 parameters: the fp32 weights are never duplicated on the
        # way (tied weights stay tied: one memo entry per tensor); `.to` then casts floating buffers.
        memo = {id(p): torch.nn.Parameter(p.detach().to(torch.bfloat16), requires_grad=False)
                for p in module.parameters()}
        twin = copy.deepcopy(module, memo).to(torch.bfloat16).eval().requires_grad_(False)
    _COPIES[module] = (fingerprint, twin)
    return twin


@contextlib.contextmanager
def running(module: torch.nn.Module, dtype: str, how: str | None = FROZEN):
    """The module to call for one forward pass in `dtype`, inside the context it needs:
    fp32 -> the module itself; bf16 and FROZEN -> its bf16 copy (the module itself on a GPU without bf16);
    bf16 and MIXED -> the module under autocast (fp16 autocast on a GPU without bf16); how=None -> the module
    itself, for a module that applies the dtype inside (it calls this)."""
    check(dtype)
    if dtype == "fp32" or how is None:
        yield module
    elif how == FROZEN:
        # On a GPU without bf16 the frozen path runs fp32 (`effective`); everywhere else its bf16 copy.
        yield bf16_copy(module) if effective(dtype, FROZEN) == "bf16" else module
    elif how == MIXED:
        with autocast(dtype):
            yield module
    else:
        raise BertevalError(f"unknown precision path {how!r}; choose from {FROZEN!r}, {MIXED!r}")
