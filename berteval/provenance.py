"""Where a number came from: library versions, the git commit, the machine.

Written into every record so a reader can tell which code, which libraries and which
hardware produced it (and how much memory the process needed), and rerun it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import subprocess
from pathlib import Path

import torch

from . import __version__

_PACKAGES = ("torch", "transformers", "datasets", "scikit-learn", "numpy")


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "berteval": __version__}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """HEAD of the checkout berteval runs from, '+dirty' when the tree has edits; 'unknown' outside git.
    Cached: read once when a run starts, so a record names the code that ran, not later edits."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "berteval"],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


@functools.lru_cache(maxsize=1)
def device() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {cpu}, {torch.get_num_threads()} threads"


def status_mb(field: str) -> float | None:
    """A memory line of /proc/self/status (VmHWM, VmRSS) in MB, or None where there is no such file."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """The highest resident memory this process has reached so far, in MB. VmHWM belongs to the process's own
    address space; getrusage's ru_maxrss is kept across exec, so a process started by a large one (the bench
    measuring each setting in a fresh process, a test) would report its parent's size. ru_maxrss elsewhere."""
    hwm = status_mb("VmHWM")
    if hwm is not None:
        return hwm
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
