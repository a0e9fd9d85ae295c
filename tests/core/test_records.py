"""Records: round trip, validation, bad lines reported by number, atomic appends."""

import json

from berteval import records, store
from conftest import make_record


def test_round_trip(tmp_path):
    path = tmp_path / "r.jsonl"
    a, b = make_record(run_id="a"), make_record(run_id="b", pooling="mean", paired_tests=[{"p_value": 0.5}])
    store.append_record(path, a)
    store.append_record(path, b)
    got, problems = records.read_records([path])
    assert problems == []
    assert [r.run_id for r in got] == ["a", "b"]
    assert got[1] == b


def test_bad_lines_reported_with_line_numbers_rest_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    good = make_record().to_json()
    missing = json.loads(good)
    del missing["seed"]
    wrong_type = json.loads(good)
    wrong_type["layer"] = "last"
    bad_metric = json.loads(good)
    bad_metric["main_metric"] = "f1"
    path.write_text("\n".join([good, "{not json", json.dumps(missing), json.dumps(wrong_type),
                               json.dumps(bad_metric), make_record(run_id="abd").to_json()]) + "\n")
    got, problems = records.read_records([path])
    assert len(got) == 2
    by_line = {p.line: p.message for p in problems}
    assert set(by_line) == {2, 3, 4, 5}
    assert "not valid JSON" in by_line[2]
    assert "missing field 'seed'" in by_line[3]
    assert "'layer' should be int" in by_line[4]
    assert "main_metric 'f1'" in by_line[5]
    assert str(problems[0]).startswith(f"{path}:2:")


def test_cut_off_last_line_is_reported_and_next_append_starts_clean(tmp_path):
    path = tmp_path / "r.jsonl"
    store.append_record(path, make_record(run_id="a"))
    with open(path, "a") as fh:
        fh.write(make_record(run_id="half").to_json()[:40])  # a write killed half way
    got, problems = records.read_records([path])
    assert [r.run_id for r in got] == ["a"] and problems[0].line == 2 and "unterminated" in problems[0].message
    store.append_record(path, make_record(run_id="b"))
    got, problems = records.read_records([path])
    assert [r.run_id for r in got] == ["a", "b"]
    assert len(problems) == 1 and problems[0].line == 2


def test_missing_file_is_a_problem_not_a_crash(tmp_path):
    got, problems = records.read_records([tmp_path / "none.jsonl"])
    assert got == [] and "cannot read" in problems[0].message


def test_run_id_is_stable_and_order_free():
    assert records.run_id({"a": 1, "b": 2}) == records.run_id({"b": 2, "a": 1})
    assert records.run_id({"a": 1}) != records.run_id({"a": 2})


def test_only_rank_zero_writes_under_a_multi_process_launch(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    monkeypatch.setenv("RANK", "1")
    store.append_record(path, make_record(run_id="a"))
    store.Store(tmp_path).write_json("p.json", {"x": 1})
    assert not path.exists() and not (tmp_path / "p.json").exists()
    monkeypatch.setenv("RANK", "0")
    store.append_record(path, make_record(run_id="a"))
    assert path.exists()


def test_peak_rss_is_the_process_own_not_its_parents():
    """A record's peak_rss_mb (and the bench's memory rows, each measured in a fresh process) must not inherit
    the high-water mark of the process that started it, as getrusage's ru_maxrss does across exec."""
    import subprocess
    import sys

    from berteval import provenance

    ballast = bytearray(400 << 20)  # 400 MB, touched: this process's high-water mark rises by that much
    ballast[::4096] = b"x" * len(ballast[::4096])
    child = subprocess.run([sys.executable, "-c", "from berteval import provenance; print(provenance.peak_rss_mb())"],
                           capture_output=True, text=True, check=True)
    assert provenance.peak_rss_mb() > 400
    assert float(child.stdout) < provenance.peak_rss_mb() - 300, (child.stdout, provenance.peak_rss_mb())
    del ballast
