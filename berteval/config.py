"""Where berteval reads data, keeps its feature cache and keeps its results.

Each comes from an explicit option first, then an environment variable, so the same
command works on a laptop, in CI (../shared/data beside the clone) and on a Space. The
results root has one default, next to the package (the committed leaderboard/results),
whatever folder a command is started from: the CLI writes where the app and the
leaderboard read.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import BertevalError

DATA_ENV = "BERTEVAL_DATA"
CACHE_ENV = "BERTEVAL_CACHE"
RESULTS_ENV = "BERTEVAL_RESULTS"
# The committed results: <repository>/leaderboard/results, found from this file, not the working directory.
DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / "leaderboard" / "results"


def data_dir(option: str | os.PathLike | None) -> Path | None:
    """The local data folder from the option or $BERTEVAL_DATA; None means 'use the hub'."""
    raw = option if option not in (None, "") else os.environ.get(DATA_ENV) or None
    if raw is None:
        return None
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise BertevalError(
            f"data dir {str(path)!r} does not exist. Pass --data-dir with the folder that "
            f"holds sst2/ and squad/ (e.g. ../shared/data), or set {DATA_ENV}."
        )
    return path


# The data beside a clone, as the README lays it out (<clone>/../shared/data).
BESIDE_CLONE = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def local_data_dir() -> Path | None:
    """The data folder the page reads with no option to take: $BERTEVAL_DATA, else ../shared/data beside the
    clone; None (the hub) where neither is a folder."""
    raw = os.environ.get(DATA_ENV)
    for candidate in ([Path(raw).expanduser()] if raw else []) + [BESIDE_CLONE]:
        if candidate.is_dir():
            return candidate
    return None


def cache_dir() -> Path:
    """The feature cache folder: $BERTEVAL_CACHE, else the user's cache folder."""
    raw = os.environ.get(CACHE_ENV)
    if raw:
        path = Path(raw).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "berteval"
    if path.exists() and not path.is_dir():
        raise BertevalError(f"the cache folder {path} is a file: point {CACHE_ENV} at a folder (or remove the file)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BertevalError(f"cannot make the cache folder {path}: {exc.strerror or exc}; set {CACHE_ENV} to a "
                            f"writable folder") from exc
    return path


def results_root(option: str | os.PathLike | None = None) -> Path:
    """The results folder: the option, else $BERTEVAL_RESULTS, else the committed leaderboard/results."""
    raw = option if option not in (None, "") else os.environ.get(RESULTS_ENV) or None
    return Path(raw).expanduser() if raw is not None else DEFAULT_RESULTS
