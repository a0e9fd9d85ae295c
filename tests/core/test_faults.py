"""The fault suite: what berteval's files survive. Each test breaks something on disk the way a
real machine does (a cut or corrupted cache file, a write killed by SIGKILL, two sweeps into one
folder, a byte that is not UTF-8) and checks that nothing wrong is read, nothing is counted
twice, and everything else still loads. Tiny model, tiny data; the writers that must really run
in parallel or really be killed are separate processes (the light ones import no torch).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import berteval
from berteval import features, models, records, runs, store
from berteval.tasks import get

from conftest import make_record

TEXTS = ["good movie", "the plot was very dull and the acting poor", "fun", "it is a fine film .",
         "bad film", "a great story"]


def _env() -> dict:
    """The test's environment (its own feature cache) for a child process, which imports this checkout's
    berteval, whichever tree the tests were started from, and these tests' helpers (tests/conftest.py)."""
    paths = [str(Path(berteval.__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _child(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """A light verb of the CLI as a user runs it (its own process: a traceback shows as one)."""
    return subprocess.run([sys.executable, "-m", "berteval", *argv], env=_env(), text=True, capture_output=True,
                          timeout=120)


def _await_line(proc: subprocess.Popen, word: str, timeout: float = 120) -> None:
    """Block until the child prints `word` (it reached the moment to be killed at)."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert box and word in box[0], f"child never reached {word!r}: {proc.stderr.read() if proc.poll() is not None else ''}"


# --- the feature cache ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tiny_models):
    return models.load(str(tiny_models["pretraining"]))


def _encode(model, **kw):
    return features.encode(model, TEXTS, data_sha256="faults", poolings=["cls", "mean"], progress=False, **kw)


def _cached(res, name: str) -> Path:
    return res.cache_dir / f"{name}.npy"


def test_a_cut_cache_file_is_reported_deleted_and_recomputed(tiny):
    first = _encode(tiny)
    path = _cached(first, "mean@-1")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a disk that filled, a copy cut short
    again = _encode(tiny)  # before: ValueError "Failed to read all data" or EOFError, on every rerun
    np.testing.assert_array_equal(again.vectors[("mean", -1)], first.vectors[("mean", -1)])
    np.testing.assert_array_equal(again.vectors[("cls", -1)], first.vectors[("cls", -1)])
    assert again.encoded == len(TEXTS)
    assert len(again.repaired) == 1 and "mean@-1.npy" in again.repaired[0] and "cut" in again.repaired[0]
    assert _encode(tiny).encoded == 0  # the recomputed file carries a good proof again


def test_a_same_size_corruption_is_never_read_as_vectors(tiny):
    first = _encode(tiny)
    path = _cached(first, "mean@-1")
    data = bytearray(path.read_bytes())
    data[-48:] = bytes(48)  # zeros over the last vectors: same size, still a loadable .npy
    path.write_bytes(bytes(data))
    again = _encode(tiny)  # before: the zeros came back as features, silently (wrong accuracies, same run ids)
    np.testing.assert_array_equal(again.vectors[("mean", -1)], first.vectors[("mean", -1)])
    assert len(again.repaired) == 1 and "corrupted" in again.repaired[0]


def test_an_array_without_its_proof_is_recomputed(tiny):
    first = _encode(tiny)
    (first.cache_dir / "cls@-1.json").unlink()  # what an older berteval left, or a kill between array and proof
    np.save(_cached(first, "cls@-1"), np.ones((len(TEXTS), 16), dtype=np.float32))
    again = _encode(tiny)
    np.testing.assert_array_equal(again.vectors[("cls", -1)], first.vectors[("cls", -1)])
    assert len(again.repaired) == 1 and "no proof" in again.repaired[0]


def test_a_proof_for_another_key_is_refused(tiny):
    first = _encode(tiny)
    other = _encode(tiny, max_length=64)  # another key, another folder
    for suffix in (".npy", ".json"):  # a folder copied by hand into the wrong place
        (other.cache_dir / f"mean@-1{suffix}").replace(first.cache_dir / f"mean@-1{suffix}")
    again = _encode(tiny)
    assert "another key" in again.repaired[0] and again.encoded == len(TEXTS)


KILLED_ENCODE = """
    import os, sys, time
    from berteval import features, models
    def stuck(src, dst):  # the write has put its temp file down: be killed here
        print("WRITING", flush=True)
        time.sleep(600)
    model = models.load(sys.argv[1])
    os.replace = stuck
    features.encode(model, sys.argv[2:], data_sha256="faults", poolings=["cls", "mean"], progress=False)
"""


@pytest.mark.slow  # the child imports torch and transformers (6-17 s here); the fast tests below simulate its leftovers
def test_sigkill_during_a_cache_write_leaves_nothing_wrong_behind(tiny, tiny_models):
    child = _child(KILLED_ENCODE, str(tiny_models["pretraining"]), *TEXTS)
    try:
        _await_line(child, "WRITING")
    finally:
        child.kill()  # SIGKILL: no cleanup runs
        child.wait()
    folder = features.cache_dir() / "features" / features.feature_key(tiny, "faults", 128, "fp32")
    leftovers = lambda: [f.name for f in folder.iterdir() if f.name.startswith(".") and f.name != ".lock"]  # noqa: E731
    assert leftovers(), "the child should have died with its temp file on disk"
    res = _encode(tiny)  # the dead writer's lock is gone with it; its temp file is removed
    assert leftovers() == [] and res.encoded == len(TEXTS)
    fresh = features.encode(tiny, TEXTS, data_sha256="faults", poolings=["cls", "mean"], use_cache=False,
                            progress=False)
    np.testing.assert_array_equal(res.vectors[("mean", -1)], fresh.vectors[("mean", -1)])


def test_a_dead_writers_temp_file_is_removed_a_live_ones_kept(tmp_path):
    (tmp_path / "k").mkdir()
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()
    live = tmp_path / "k" / f".mean@-1.npy.{features.HOST}.{os.getpid()}.tmp"
    dead = tmp_path / "k" / f".cls@-1.npy.{features.HOST}.{dead_pid}.tmp"
    elsewhere = tmp_path / "k" / f".max@-1.npy.another-machine.{dead_pid}.tmp"  # a shared disk: not ours to judge
    for f in (live, dead, elsewhere):
        f.write_bytes(b"x")
    assert features.remove_stale_temps(tmp_path) == [dead] and live.exists() and elsewhere.exists()


# --- result records --------------------------------------------------------------------------------------

def _lines(*recs) -> bytes:
    return b"".join(r.to_json().encode() + b"\n" for r in recs)


def test_invalid_utf8_is_one_bad_line_and_every_other_line_and_file_still_counts(tmp_path):
    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    bad.write_bytes(_lines(make_record(run_id="a")) + b'{"run_id": "\xff\xfe"}\n'
                    + _lines(make_record(run_id="b", seed=1)))
    good.write_bytes(_lines(make_record(run_id="c", seed=2)))
    got, problems = records.read_records([bad, good])
    assert [r.run_id for r in got] == ["a", "b", "c"]
    assert [(p.line, "not valid UTF-8" in p.message) for p in problems] == [(2, True)]
    # before: UnicodeDecodeError tracebacks from validate and summary, and the good file lost with them
    v = _cli("validate", str(bad), str(good))
    assert v.returncode == 1 and "Traceback" not in v.stderr
    assert f"{bad}:2: not valid UTF-8" in v.stderr and "3 valid records, 1 bad lines in 2 files" in v.stdout
    s = _cli("summary", str(bad), str(good))
    assert s.returncode == 0 and "Traceback" not in s.stderr and "(n=3," in s.stdout
    assert store.Store(tmp_path).finished_ids("bad") == {"a", "b"}  # resume reads it too


def test_a_duplicated_run_id_counts_once_and_fails_validate(tmp_path):
    path = tmp_path / "sst2.jsonl"
    path.write_bytes(_lines(make_record(run_id="a"), make_record(run_id="b", seed=1), make_record(run_id="a")))
    got, problems = records.read_records([path])
    assert [r.run_id for r in got] == ["a", "b"]
    assert len(problems) == 1 and problems[0].line == 3 and "duplicate run id a" in problems[0].message
    v = _cli("validate", str(path))  # before: exit 0, "3 valid records"
    assert v.returncode == 1 and "duplicate run id a (first at" in v.stderr
    s = _cli("summary", str(path))  # before: n=3, as if there were three seeds
    assert "(n=2," in s.stdout


PARALLEL_APPENDS = """
    import sys, time
    from pathlib import Path
    from berteval.store import append_record
    from conftest import make_record
    out, go = Path(sys.argv[1]), Path(sys.argv[2])
    while not go.exists():  # start together
        time.sleep(0.001)
    wrote = sum(append_record(out, make_record(run_id=f"r{i}", seed=i)) for i in range(40))
    print(wrote, flush=True)
"""


def test_two_writers_into_one_file_write_each_run_id_once(tmp_path):
    out, go = tmp_path / "sst2.jsonl", tmp_path / "go"
    procs = [_child(PARALLEL_APPENDS, str(out), str(go)) for _ in range(2)]
    time.sleep(0.5)
    go.touch()
    wrote = [int(p.communicate(timeout=120)[0] or -1) for p in procs]
    got, problems = records.read_records([out])
    assert problems == [] and sorted(r.run_id for r in got) == sorted(f"r{i}" for i in range(40))
    assert sum(wrote) == 40  # every id written by exactly one of the two


def test_a_sweep_that_started_before_another_finished_skips_what_the_other_wrote(tiny_models, tiny_sst2, tmp_path,
                                                                                 monkeypatch):
    spec = lambda: runs.RunSpec(task=get("sst2"), model=str(tiny_models["pretraining"]),  # noqa: E731
                                poolings=["cls", "mean"], seeds=[0], data_dir=tiny_sst2, out=tmp_path, progress=False)
    first = runs.run(spec())
    # The second sweep read the folder before the first wrote anything: it computes every cell again.
    monkeypatch.setattr(store.Store, "finished_ids", lambda self, task: set())
    second = runs.run(spec())
    assert second.written == [] and sorted(second.skipped) == sorted(r.run_id for r in first.written)
    got, problems = records.read_records([tmp_path / "sst2.jsonl"])
    assert problems == [] and len(got) == 2


KILLED_APPEND = """
    import os, sys, time
    from berteval.store import append_record
    from conftest import make_record
    real_write = os.write
    def half(fd, data):  # the record is half on disk: be killed here
        real_write(fd, data[: len(data) // 2])
        print("HALF", flush=True)
        time.sleep(600)
    os.write = half
    append_record(sys.argv[1], make_record(run_id="killed", seed=9))
"""


def test_sigkill_during_a_record_append(tmp_path):
    path = tmp_path / "sst2.jsonl"
    store.append_record(path, make_record(run_id="a"))
    child = _child(KILLED_APPEND, str(path))
    try:
        _await_line(child, "HALF")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    got, problems = records.read_records([path])
    assert [r.run_id for r in got] == ["a"] and [p.line for p in problems] == [2]
    assert "unterminated" in problems[0].message
    # The lock died with its holder: the next append goes through (the resumed sweep writes the cell again).
    done = threading.Event()
    threading.Thread(target=lambda: (store.append_record(path, make_record(run_id="killed", seed=9)), done.set()),
                     daemon=True).start()
    assert done.wait(60), "the append waited on a lock held by a dead process"
    got, problems = records.read_records([path])
    assert [r.run_id for r in got] == ["a", "killed"] and [p.line for p in problems] == [2]
