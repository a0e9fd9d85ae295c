"""One version of the records, computed once: what the app's Leaderboard tab, `views()` and the report read.

The tab used to re-read and re-rank every record on each click: rank bands, paired tests, findings, the
table and nine figures rebuilt from scratch took 8.7 s to its first table and 7.6 s per filter change on a
2-core CPU (docs/performance.md). A `Board` holds one version of the records, named by each record file's
path, size and modification time (a run that appends a record makes a new version), with what depends only
on the records computed when it is built: the frame, the k-fold estimates apart, the rank bands, the paired
tests and the filters' choices. What depends on the filters (the table, the first view, the findings, each
figure) is computed on first use and kept per filter value, a few dozen of each. `current()` returns the
Board of the records as they are now: it looks at the files' sizes and times on every call and reads them
again only when one changed. A dataset repo's snapshot is looked up at most once a minute.

Pure Python and pandas; thread-safe enough for Gradio's worker threads (a Board is built under a lock; two
threads computing the same view at once both get a correct one).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from . import bands, cells, data, figures, findings, overview, references, table
from .figures import compare, curves

# Every figure the board draws, by name, in the order the app and views() list them.
FIGURE_FUNCTIONS: dict[str, Callable] = {
    **{name: fn for name, fn in figures.FIGURES.items()},
    "models": compare.model_pooling_figure,
    "pooler_effect": compare.pooler_effect_figure,
    **curves.FIGURES,
}
KEEP = 48  # views kept per kind (tables, figures, ...) for one records version
VERSIONS = 3  # records versions kept (a Board each): the current one and the few before it
SNAPSHOT_TTL_S = 60.0  # how long a dataset repo's snapshot path is trusted before asking the hub again


def _key(value):
    """A filter as a hashable key: None for 'any' (None, '', 'all', an empty list), else a sorted tuple."""
    if value is None or value == "" or value == "all":
        return None
    values = [value] if isinstance(value, (str, int)) else list(value)
    return tuple(sorted(str(v) for v in values)) or None


def _value(key):
    """The key back as a filter value for data.filter_records."""
    return None if key is None else list(key)


def version(files: Iterable[Path]) -> tuple:
    """What names one version of the records: each file's path, size and modification time (None if missing)."""
    out = []
    for f in files:
        try:
            st = os.stat(f)
            out.append((str(f), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(f), None, None))
    return tuple(out)


class Board:
    """The records of one version and every view of them, each computed once."""

    def __init__(self, df: pd.DataFrame, problems: list, files: list[Path]):
        self.files = files
        self.problems = [str(p) for p in problems]
        self.everything = df  # every valid record, k-fold estimates included (their tasks are filter choices)
        apart = data.is_estimate(df) if not df.empty else pd.Series(False, index=df.index)
        self.estimate_rows = df[apart]
        # What is ranked (never a k-fold estimate), each record flagged main setup or not over all of them, so the
        # table and every figure read the same cells whatever the filter (cells.py).
        self.frame = cells.mark_main(df[~apart])
        self.band_frame = bands.rank_bands(self.frame)  # from every record: a filter never changes a band
        self.tests = bands.pair_tests(self.frame, "last")
        self.choices = table.choices(df)  # from all records, so a filter never hides its own options
        self._memo: dict[str, OrderedDict] = {}
        self._lock = threading.Lock()

    def _memoised(self, kind: str, key, build: Callable):
        with self._lock:
            store = self._memo.setdefault(kind, OrderedDict())
            if key in store:
                store.move_to_end(key)
                return store[key]
        value = build()  # outside the lock: another view may be computed meanwhile
        with self._lock:
            store[key] = value
            while len(store) > KEEP:
                store.popitem(last=False)
        return value

    def rows(self, model=None, task=None, pooling=None, regime=None) -> pd.DataFrame:
        key = tuple(_key(v) for v in (model, task, pooling, regime))
        return self._memoised("rows", key, lambda: data.filter_records(
            self.frame, **dict(zip(("model", "task", "pooling", "regime"), map(_value, key)))))

    def table(self, model=None, task=None, pooling=None, regime=None, search: str | None = None) -> pd.DataFrame:
        key = (*(_key(v) for v in (model, task, pooling, regime)), (search or "").strip().lower())
        return self._memoised("table", key, lambda: table.leaderboard_table(
            self.rows(*map(_value, key[:4])), search=key[4] or None, band_frame=self.band_frame))

    def csv(self, model=None, task=None, pooling=None, regime=None, search: str | None = None) -> str:
        key = (*(_key(v) for v in (model, task, pooling, regime)), (search or "").strip().lower())
        return self._memoised("csv", key, lambda: table.to_csv(self.table(*map(_value, key[:4]), search=key[4])))

    def findings(self, model=None, task=None, regime=None) -> str:
        """The long findings (Markdown), for the filters; the pooling filter does not narrow them (a finding
        compares heads)."""
        key = tuple(_key(v) for v in (model, task, regime))
        return self._memoised("findings", key, lambda: findings.as_markdown(findings.findings(
            self.rows(_value(key[0]), _value(key[1]), None, _value(key[2])), tests=self.tests)))

    def twins(self, task=None, regime=None) -> str:
        """What NSP pre-training changes (Markdown): every pair of twins with records, side by side, and the seed
        spread; the model filter does not narrow it (it is about the registered pairs, berteval.models.twins)."""
        from . import twins  # here, not at the top: `python -m leaderboard.twins` runs that module as __main__

        key = (_key(task), _key(regime))
        return self._memoised("twins", key, lambda: twins.as_markdown(self.rows(None, _value(key[0]), None,
                                                                                _value(key[1]))))

    def first_view(self, model=None, task=None, regime=None) -> str:
        """The compact view per task (Markdown): models x poolings, the best head and one plain sentence."""
        key = tuple(_key(v) for v in (model, task, regime))
        return self._memoised("first", key, lambda: overview.as_markdown(overview.overview(
            self.rows(_value(key[0]), _value(key[1]), None, _value(key[2])), self.band_frame, self.tests,
            self.estimates(*map(_value, key)))))

    def estimates(self, model=None, task=None, regime=None) -> pd.DataFrame:
        """The k-fold records the filters name (their own table; never ranked)."""
        key = tuple(_key(v) for v in (model, task, regime))
        return self._memoised("estimates", key, lambda: data.estimates(data.filter_records(
            self.estimate_rows, model=_value(key[0]), task=_value(key[1]), regime=_value(key[2]))))

    def references(self, task=None, regime=None) -> pd.DataFrame:
        key = (_key(task), _key(regime))
        return self._memoised("refs", key, lambda: references.table(_value(key[0]), _value(key[1])))

    def figure(self, name: str, model=None, task=None, pooling=None, regime=None):
        """One figure for the filters (`FIGURE_FUNCTIONS`), built on first use."""
        key = (name, *(_key(v) for v in (model, task, pooling, regime)))

        def build():
            rows = self.rows(*map(_value, key[1:]))
            fn = FIGURE_FUNCTIONS[name]
            return fn(rows, self.band_frame) if name == "ablation" else fn(rows)

        return self._memoised("figure", key, build)

    def figure_json(self, name: str, model=None, task=None, pooling=None, regime=None) -> str:
        """The figure as Plotly JSON, serialised once (what the app sends; to_json is most of a figure's cost)."""
        key = (name, *(_key(v) for v in (model, task, pooling, regime)))
        return self._memoised("figure_json", key, lambda: self.figure(name, model, task, pooling, regime).to_json())


_BOARDS: OrderedDict = OrderedDict()
_LOCK = threading.Lock()
_SNAPSHOTS: dict = {}


def _paths(paths, repo):
    """(record paths, problems) as data.load would find them; a dataset repo's snapshot is kept a minute."""
    if paths is not None:
        return list(paths), []
    repo = repo or os.environ.get(data.REPO_ENV) or None
    if not repo:
        return data.default_paths(None)
    hit = _SNAPSHOTS.get(repo)
    if hit and time.monotonic() - hit[0] < SNAPSHOT_TTL_S:
        return hit[1], hit[2]
    found, problems = data.default_paths(repo)
    _SNAPSHOTS[repo] = (time.monotonic(), found, problems)
    return found, problems


def current(paths: Iterable[str | os.PathLike] | None = None, repo: str | None = None) -> Board:
    """The Board of the records as they are now (the results root, a dataset repo's snapshot, or `paths`)."""
    found, fetched = _paths(paths, repo)
    files = data.record_files(found)
    key = (version(files), tuple(str(p) for p in fetched))
    with _LOCK:
        board = _BOARDS.get(key)
        if board is not None:
            _BOARDS.move_to_end(key)
            return board
        df, problems = data.load(files)
        board = Board(df, [*fetched, *problems], files)
        _BOARDS[key] = board
        while len(_BOARDS) > VERSIONS:
            _BOARDS.popitem(last=False)
        return board


def clear() -> None:
    """Forget every Board (tests that rewrite a file within one clock tick)."""
    with _LOCK:
        _BOARDS.clear()
        _SNAPSHOTS.clear()
