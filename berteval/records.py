"""Typed result records: one JSON line per model x task x pooling x regime x layer x seed.

Everything that reads results (the CLI's `validate` and `summary`, the store's resume
check, the leaderboard) goes through `read_records`, the one reader: it validates each
line against `RunRecord`'s fields and reports a bad line by file and line number
instead of failing the rest, whatever bytes the line holds. A run id seen twice is
counted once (the first line) and the copy is reported. Writing belongs to
`berteval.store`, which appends one line at a time under a file lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

SCHEMA_VERSION = 1


@dataclass
class RunRecord:
    schema_version: int
    run_id: str  # hash of everything that defines the run: same config + seed -> same id
    timestamp: str  # ISO 8601, UTC
    model: str
    model_revision: str
    task: str
    task_version: str
    data_sha256: str
    split: str  # the split the metrics are computed on
    pooling: str  # a key of pooling.POOLINGS, or "span" / "head" for heads that read every token
    regime: str  # "probe", "finetune", "pretrained"
    layer: int  # hidden-state index; -1 = last layer
    seed: int
    metrics: dict[str, float]
    main_metric: str
    n_train: int
    n_eval: int
    config: dict[str, Any]
    versions: dict[str, str]
    git_commit: str
    device: str
    dtype: str
    wall_s: float
    predictions_file: str | None = None  # per-example predictions, relative to the record file
    paired_tests: list[dict[str, Any]] = field(default_factory=list)  # vs records of the same group

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    @property
    def main_value(self) -> float:
        return float(self.metrics[self.main_metric])

    def group_key(self) -> tuple:
        """Records that differ only in what is being compared (pooling, layer) share a group."""
        return (self.model, self.model_revision, self.task, self.task_version, self.data_sha256,
                self.regime, self.seed, self.n_train, self.dtype)


_FIELDS = {f.name: f for f in dataclasses.fields(RunRecord)}
_REQUIRED = [f.name for f in dataclasses.fields(RunRecord)
             if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
_TYPES: dict[str, tuple[type, ...]] = {
    "schema_version": (int,), "run_id": (str,), "timestamp": (str,), "model": (str,),
    "model_revision": (str,), "task": (str,), "task_version": (str,), "data_sha256": (str,),
    "split": (str,), "pooling": (str,), "regime": (str,), "layer": (int,), "seed": (int,),
    "metrics": (dict,), "main_metric": (str,), "n_train": (int,), "n_eval": (int,),
    "config": (dict,), "versions": (dict,), "git_commit": (str,), "device": (str,),
    "dtype": (str,), "wall_s": (int, float), "predictions_file": (str, type(None)),
    "paired_tests": (list,),
}


def run_id(identity: dict[str, Any]) -> str:
    """A stable id from the fields that define a run (not its timestamp or timings)."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def validate(obj: Any) -> list[str]:
    """Problems with one parsed line; empty when it is a valid record."""
    if not isinstance(obj, dict):
        return [f"expected a JSON object, got {type(obj).__name__}"]
    problems = [f"missing field {name!r}" for name in _REQUIRED if name not in obj]
    problems += [f"unknown field {name!r}" for name in obj if name not in _FIELDS]
    for name, types in _TYPES.items():
        if name in obj and (not isinstance(obj[name], types) or isinstance(obj[name], bool)):
            problems.append(f"field {name!r} should be {'/'.join(t.__name__ for t in types)}, "
                            f"got {type(obj[name]).__name__}")
    if problems:
        return problems
    if obj["schema_version"] != SCHEMA_VERSION:
        problems.append(f"schema_version {obj['schema_version']} is not {SCHEMA_VERSION}")
    if obj["main_metric"] not in obj["metrics"]:
        problems.append(f"main_metric {obj['main_metric']!r} is not among metrics {sorted(obj['metrics'])}")
    for key, value in obj["metrics"].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            problems.append(f"metric {key!r} is not a number")
    if obj["n_eval"] <= 0:
        problems.append("n_eval must be positive")
    return problems


@dataclass
class Problem:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def record_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The files `paths` name: a folder stands for the `*.jsonl` record files directly in it."""
    out: list[Path] = []
    for path in map(Path, paths):
        out += sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    return out


def read_records(paths: Iterable[str | os.PathLike]) -> tuple[list[RunRecord], list[Problem]]:
    """Every valid record in the files, plus one Problem per bad line (the rest still load).

    Lines are decoded one at a time, so a byte that is not UTF-8 spoils its own line only; a
    run id already read (in any of the files) is skipped and reported, so nothing counts twice."""
    records: list[RunRecord] = []
    problems: list[Problem] = []
    first_seen: dict[str, str] = {}
    for path in paths:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            problems.append(Problem(str(path), 0, f"cannot read: {exc.strerror or exc}"))
            continue
        lines = raw.split(b"\n")
        for number, blob in enumerate(lines, start=1):
            rec, problem = _parse_line(blob, last=number == len(lines) and not raw.endswith(b"\n"))
            if problem:
                problems.append(Problem(str(path), number, problem))
            elif rec is not None and rec.run_id in first_seen:
                problems.append(Problem(str(path), number, f"duplicate run id {rec.run_id} (first at "
                                                           f"{first_seen[rec.run_id]}); counted once"))
            elif rec is not None:
                first_seen[rec.run_id] = f"{path}:{number}"
                records.append(rec)
    return records, problems


def _parse_line(blob: bytes, last: bool) -> tuple[RunRecord | None, str | None]:
    """(record, None), (None, what is wrong) or (None, None) for a blank line."""
    try:
        line = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 (byte {exc.start + 1} of the line)"
    if not line.strip():
        return None, None
    if last:
        return None, "unterminated last line (a write was cut off)"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        # Some of json's messages already end in "at" ("Invalid control character at"): one "at", not two.
        return None, f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"
    errors = validate(obj)
    if errors:
        return None, "; ".join(errors)
    return RunRecord(**obj), None
