"""evaluate modules shipped inside berteval, loaded by local path: offline, from the package itself.

Each metric of the registry is computed by an evaluate module in a folder beside this file
(`accuracy/`, `binary_f1/`, `correlation/`, `squad_v1/`, and the paired test `mcnemar_exact/`). `evaluate.load` on a local
folder copies the module into evaluate's module cache and imports it from there; that cache
is `$HF_MODULES_CACHE` when set, else a folder in berteval's own cache (`config.cache_dir()`),
which is writable wherever berteval runs (a Space's home may not be). Hub metrics
(`evaluate.load("squad")`) need the network and are never used.

Importing evaluate imports torch and transformers (about 15 s cold), so only `load` imports it:
the light commands (`ls`, `validate`, `summary`, `export`, `disagree`) and the leaderboard never do.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ("accuracy", "squad_v1", "mcnemar_exact", "binary_f1", "correlation")  # folders holding <name>/<name>.py
COMPARISONS = {"mcnemar_exact"}


def path(name: str) -> Path:
    """The folder of a shipped module (what `evaluate.load` takes)."""
    if name not in NAMES:
        raise KeyError(f"no evaluate module {name!r} in berteval; shipped: {', '.join(NAMES)}")
    return HERE / name


def _evaluate():
    from ..config import cache_dir

    os.environ.setdefault("HF_MODULES_CACHE", str(cache_dir() / "hf_modules"))
    import evaluate

    # evaluate reads the variable once, at import; set it again in case evaluate was imported earlier.
    evaluate.config.HF_MODULES_CACHE = Path(os.environ["HF_MODULES_CACHE"])
    evaluate.logging.set_verbosity_error()
    evaluate.disable_progress_bar()
    return evaluate


@functools.lru_cache(maxsize=None)
def load(name: str):
    """The evaluate module `name`, loaded once per process; its computations stay in memory (no cache files,
    so parallel runs never share an arrow file)."""
    evaluate = _evaluate()
    return evaluate.load(str(path(name)), module_type="comparison" if name in COMPARISONS else "metric",
                         keep_in_memory=True)
