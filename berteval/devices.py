"""Where tensors live: one device option (`--device auto|cpu|cuda|cuda:N|mps`, `BERTEVAL_DEVICE`),
resolved once and recorded.

`auto` is CUDA when present, else Apple's MPS, else the CPU. A device that is not there is
refused with a message naming the ones that are, before any work starts. Light: torch is
imported when a name is resolved, not when the option is parsed.
"""

from __future__ import annotations

import os
import re

ENV = "BERTEVAL_DEVICE"
CHOICES = "auto, cpu, cuda, cuda:N, mps"
_PATTERN = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


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
    """bf16 matmuls without emulation: CUDA compute capability 8+, any CPU torch builds (fast only with
    AVX512-BF16 or AMX: see docs/performance.md), MPS from torch's own check."""
    import torch

    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return True
