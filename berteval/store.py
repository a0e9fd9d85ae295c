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
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .config import results_root
from .errors import BertevalError
from .records import Problem, RunRecord, read_records


def is_writer() -> bool:
    """Under `accelerate launch` (or torchrun) every process runs the same command; only rank 0
    writes results, so N processes give one record, not N."""
    return os.environ.get("RANK", "0") == "0"


def process_count() -> int:
    """How many processes run this command together (`accelerate launch` / torchrun set WORLD_SIZE); 1 alone."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def _write_all(fd: int, data: bytes, path: Path) -> None:
    """Every byte of `data` to `fd`, or an error naming `path`: os.write may write less than asked (a file-size
    limit, a full disk) and says so only in its return value."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except OSError as exc:
            raise BertevalError(f"cannot write {path}: {exc.strerror or exc} (nothing was changed)") from exc
        if n <= 0:
            raise BertevalError(f"cannot write {path}: the write stopped after {len(data) - len(view)} of "
                                f"{len(data)} bytes (disk full or a file-size limit?); nothing was changed")
        view = view[n:]


def write_atomic(path: Path, data: bytes) -> None:
    """Write beside the target, fsync, then rename: a reader never sees half a file, and a write that fails
    (or is killed) leaves the old file as it was and no temporary file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data, path)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_folder_atomic(folder: Path, fill: Callable[[Path], None]) -> None:
    """A folder of files written as one: `fill(stage)` writes them into a staged sibling, which is fsynced and
    swapped in by rename, so a reader finds the old folder or the new one whole. A failure leaves the old one
    as it was and no staged folder behind; what a kill leaves (`.<name>.<pid>.tmp`, or between the two renames
    the old folder as `.<name>.<pid>.old`) is cleaned up or put back by remove_stale_temporaries."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    old = folder.with_name(f".{folder.name}.{os.getpid()}.old")
    shutil.rmtree(stage, ignore_errors=True)
    try:
        stage.mkdir()
        fill(stage)
        for path in stage.rglob("*"):
            if path.is_file():
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            os.replace(folder, old)
        os.replace(stage, folder)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if old.exists() and not folder.exists():
            os.replace(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)


def remove_stale_temporaries(folder: Path) -> int:
    """Clean up what a killed writer (whose pid is gone) left in `folder`: `.<name>.<pid>.tmp` files and staged
    folders are deleted; a `.<name>.<pid>.old` folder that write_folder_atomic had moved aside goes back to
    `<name>` if the new one never arrived, else it is deleted. How many entries were cleaned up."""
    removed = 0
    if not folder.is_dir():
        return 0
    for tmp in folder.glob(".*.tmp*"):
        m = re.search(r"\.(\d+)\.tmp", tmp.name)
        if m and not _alive(int(m.group(1))):
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            removed += 1
    for old in folder.glob(".*.old"):
        m = re.fullmatch(r"\.(.+)\.(\d+)\.old", old.name)
        if m and old.is_dir() and not old.is_symlink() and not _alive(int(m.group(2))):
            if (folder / m.group(1)).exists():
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(old, folder / m.group(1))
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid != 0


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
        before = os.fstat(fd).st_size
        try:
            _write_all(fd, data, path)
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, before)  # a cut line must not stay behind to be read as a bad record
            raise
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

    def check_writable(self, task: str) -> None:
        """Before any work: the results folder, the task's records file and its side folders can be written.
        A run that computes a cell for minutes and then cannot keep it loses it; this says so in one line
        before anything starts."""
        import tempfile

        targets = [self.root, self.root / "predictions" / task, self.root / "heads" / task]
        for folder in targets:
            if folder.exists() and not folder.is_dir():
                raise BertevalError(f"{folder} is not a folder: the results of this run go there. Move it away "
                                    f"or pass another --out")
            try:
                folder.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
                    pass
            except OSError as exc:
                raise BertevalError(f"cannot write into {folder}: {exc.strerror or exc}. Pass a writable --out "
                                    f"(or $BERTEVAL_RESULTS)") from exc
        # What a killed writer left (`.<name>.<pid>.tmp` of a process that is gone) goes now.
        for folder in (*targets, self.root / "predictions" / task / "nbest", self.root / "adapters" / task):
            remove_stale_temporaries(folder)
        path = self.records_path(task)
        if path.exists() and not path.is_file():
            raise BertevalError(f"{path} is not a file: it must be the task's records (JSON lines). Move it away")
        if path.exists() and not os.access(path, os.W_OK):
            raise BertevalError(f"{path} is read-only: records cannot be appended to it")

    def finished_ids(self, task: str) -> set[str]:
        return {r.run_id for r in self.read(task)[0]}

    def append(self, record: RunRecord) -> bool:
        """Append one record to its task's file; False (and nothing written) when its run id is already
        there, written meanwhile by another process into the same folder."""
        return append_record(self.records_path(record.task), record)

    # --- side files --------------------------------------------------------------------------------

    def inside(self, rel: str) -> Path:
        """The file a record names (relative to the results root), refused when it points outside the root:
        records may come from a dataset repo, and `../../secret` or an absolute path must not be read."""
        if not isinstance(rel, str) or not rel or "\x00" in rel:
            raise BertevalError(f"a record names the file {rel!r}: not a path inside the results folder")
        root = self.root.resolve()
        path = (root / rel).resolve()
        if Path(rel).is_absolute() or not path.is_relative_to(root):
            raise BertevalError(f"a record names {rel!r}, outside its results folder: refused")
        return path

    def write_json(self, rel: str, obj: Any) -> str:
        if is_writer():
            write_atomic(self.root / rel, json.dumps(obj, separators=(",", ":")).encode("utf-8"))
        return rel

    def write_predictions(self, task: str, run_id: str, payload: dict) -> str:
        return self.write_json(f"predictions/{task}/{run_id}.json", payload)

    def save_head(self, task: str, run_id: str, arrays: dict[str, np.ndarray]) -> str:
        rel = f"heads/{task}/{run_id}.npz"
        if is_writer():
            import io

            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            write_atomic(self.root / rel, buffer.getvalue())
        return rel

    def adapter_dir(self, task: str, run_id: str) -> str:
        return f"adapters/{task}/{run_id}"

    # --- paired tests ------------------------------------------------------------------------------

    def correct(self, record: RunRecord) -> np.ndarray | None:
        """Per-example correctness from a record's predictions file (classification tasks)."""
        try:
            path = self.inside(record.predictions_file) if record.predictions_file else None
        except BertevalError:
            return None
        if path is None or not path.is_file():
            return None
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "pred" not in data or "label" not in data:
            return None
        return np.asarray(data["pred"]) == np.asarray(data["label"])

    def scores(self, record: RunRecord) -> tuple[np.ndarray, np.ndarray] | None:
        """(predicted, gold) scores from a regression record's predictions file, else None."""
        try:
            path = self.inside(record.predictions_file) if record.predictions_file else None
        except BertevalError:
            return None
        if path is None or not path.is_file():
            return None
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("kind") != "regression":
            return None
        return np.asarray(data["pred"], dtype=np.float64), np.asarray(data["label"], dtype=np.float64)

    def paired_tests(self, record: RunRecord, correct: np.ndarray | None,
                     predicted: np.ndarray | None = None, gold: np.ndarray | None = None) -> list[dict]:
        """A paired test against every finished record of the same group (re-read now, so records written by
        a parallel process pair too), on the same eval examples: McNemar on per-example correctness for a
        classifier; for a score (`predicted`, `gold`), a paired bootstrap of the Pearson correlation."""
        if correct is None and predicted is None:
            return []
        from . import stats  # scipy: seconds to import, needed by paired tests only

        tests = []
        for peer in self.read(record.task)[0]:
            if peer.group_key() != record.group_key() or peer.run_id == record.run_id:
                continue
            if predicted is not None:
                other = self.scores(peer)
                if other is None or other[0].shape != predicted.shape or not np.array_equal(other[1], gold):
                    continue
                from .metrics import pearson

                test = stats.paired_bootstrap(predicted, other[0], gold, pearson)
            else:
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
                  and r.config.get(artifact) and self.has_file(r.config[artifact])]
        if not usable:
            return None
        from . import stats

        groups: dict[tuple, list[RunRecord]] = {}
        for r in usable:
            groups.setdefault((r.pooling, r.layer, r.data_sha256, r.n_train, r.dtype), []).append(r)
        mean = lambda rs: stats.summarise(r.main_value for r in rs).mean  # noqa: E731
        chosen = max(groups.values(), key=lambda rs: (rs[0].n_train, mean(rs)))
        best = min(chosen, key=lambda r: (-r.main_value, r.seed, r.run_id))
        return Committed(best, self.inside(best.config[artifact]), mean(chosen), len(chosen))

    def has_file(self, rel) -> bool:
        try:
            return self.inside(rel).exists()
        except BertevalError:
            return False
