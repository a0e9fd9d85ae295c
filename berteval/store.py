"""A results folder, owned by one class: what a run writes and what the app reads back.

Layout under the root (default: the committed `leaderboard/results`, see `config.results_root`):

    <task>.jsonl                       one RunRecord per line (berteval.records)
    predictions/<task>/<run_id>.json   per-example predictions of that record
    heads/<task>/<run_id>.npz          a trained linear head (probe), applied live by the app
    adapters/<task>/<run_id>/          a trained adapter (LoRA + head), loaded by the app

Everything that writes goes through here: appends are one locked write each, and a run
id already in the file is never written again (two sweeps into one folder cannot
duplicate a cell); side files are written atomically (temp file + rename). Paired tests
and the lookup of committed artifacts ("the best head of this model for this task and
pooling") live here too, so the cell loop and the app share one rule. Torch-free.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import results_root
from .records import Problem, RunRecord, read_records


def is_writer() -> bool:
    """Under `accelerate launch` (or torchrun) every process runs the same command; only rank 0
    writes results, so N processes give one record, not N."""
    return os.environ.get("RANK", "0") == "0"


def process_count() -> int:
    """How many processes run this command together (`accelerate launch` / torchrun set WORLD_SIZE); 1 alone."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def write_atomic(path: Path, data: bytes) -> None:
    """Write beside the target, then rename: a reader never sees half a file, a kill leaves the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def append_record(path: str | os.PathLike, record: RunRecord) -> bool:
    """Append one line under the file lock, in one write, fsynced, unless its run id is already in the
    file (checked under the same lock, so two writers cannot both add it). False when nothing was written."""
    if not is_writer():
        return False
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(path, "rb") as fh:
            existing = fh.read()
        if record.run_id in {r.run_id for r in read_records([path])[0]}:
            return False
        data = (record.to_json() + "\n").encode("utf-8")
        # A file whose last line was cut off would swallow this record into it: start a new line.
        if existing and not existing.endswith(b"\n"):
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


@dataclass
class Committed:
    """A committed artifact chosen for serving, with the evidence behind the choice."""

    record: RunRecord  # the best seed's record of the chosen setup
    path: Path  # its artifact (head file or adapter folder)
    mean: float  # mean main metric over the seeds of that setup
    n_seeds: int


class Store:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = results_root(root)

    # --- records ---------------------------------------------------------------------------------

    def records_path(self, task: str) -> Path:
        return self.root / f"{task}.jsonl"

    def read(self, task: str) -> tuple[list[RunRecord], list[Problem]]:
        path = self.records_path(task)
        return read_records([path]) if path.is_file() else ([], [])

    def finished_ids(self, task: str) -> set[str]:
        return {r.run_id for r in self.read(task)[0]}

    def append(self, record: RunRecord) -> bool:
        """Append one record to its task's file; False (and nothing written) when its run id is already
        there, written meanwhile by another process into the same folder."""
        return append_record(self.records_path(record.task), record)

    # --- side files --------------------------------------------------------------------------------

    def write_json(self, rel: str, obj: Any) -> str:
        if is_writer():
            write_atomic(self.root / rel, json.dumps(obj, separators=(",", ":")).encode("utf-8"))
        return rel

    def write_predictions(self, task: str, run_id: str, payload: dict) -> str:
        return self.write_json(f"predictions/{task}/{run_id}.json", payload)

    def save_head(self, task: str, run_id: str, arrays: dict[str, np.ndarray]) -> str:
        rel = f"heads/{task}/{run_id}.npz"
        if is_writer():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, **arrays)
            os.replace(tmp, path)
        return rel

    def adapter_dir(self, task: str, run_id: str) -> str:
        return f"adapters/{task}/{run_id}"

    # --- paired tests ------------------------------------------------------------------------------

    def correct(self, record: RunRecord) -> np.ndarray | None:
        """Per-example correctness from a record's predictions file (classification tasks)."""
        path = self.root / record.predictions_file if record.predictions_file else None
        if path is None or not path.is_file():
            return None
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "pred" not in data or "label" not in data:
            return None
        return np.asarray(data["pred"]) == np.asarray(data["label"])

    def paired_tests(self, record: RunRecord, correct: np.ndarray | None) -> list[dict]:
        """McNemar against every finished record of the same group (re-read now, so records written by
        a parallel process pair too), on the same eval examples."""
        if correct is None:
            return []
        from . import stats  # scipy: seconds to import, needed by paired tests only

        tests = []
        for peer in self.read(record.task)[0]:
            if peer.group_key() != record.group_key() or peer.run_id == record.run_id:
                continue
            other = self.correct(peer)
            if other is None or other.shape != correct.shape:
                continue
            test = stats.mcnemar_exact(correct, other)
            tests.append({"other": {"pooling": peer.pooling, "layer": peer.layer, "run_id": peer.run_id}, **test})
        return tests

    # --- committed artifacts -----------------------------------------------------------------------

    def best(self, task: str, *, model_id: str, revision: str, version: str, regime: str, artifact: str,
             pooling: str | None = None, layer: int | None = None) -> Committed | None:
        """The artifact to serve for a model and task: among records whose artifact (`config[artifact]`)
        is on disk, group the seeds of one setup; take the setup trained on the most examples, then the
        best mean; within it the best seed (ties to the lowest seed, then run id, never file order)."""
        usable = [r for r in self.read(task)[0]
                  if r.model == model_id and r.model_revision == revision and r.task_version == version
                  and r.regime == regime and (pooling is None or r.pooling == pooling)
                  and (layer is None or r.layer == layer)
                  and r.config.get(artifact) and (self.root / r.config[artifact]).exists()]
        if not usable:
            return None
        from . import stats

        groups: dict[tuple, list[RunRecord]] = {}
        for r in usable:
            groups.setdefault((r.pooling, r.layer, r.data_sha256, r.n_train, r.dtype), []).append(r)
        mean = lambda rs: stats.summarise(r.main_value for r in rs).mean  # noqa: E731
        chosen = max(groups.values(), key=lambda rs: (rs[0].n_train, mean(rs)))
        best = min(chosen, key=lambda r: (-r.main_value, r.seed, r.run_id))
        return Committed(best, self.root / best.config[artifact], mean(chosen), len(chosen))
