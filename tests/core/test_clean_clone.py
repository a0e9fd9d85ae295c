"""Rerunning the README's commands leaves a clone clean (issue 40): the report and the folder of files it links
are ignored by git, and recalibrating the served QA head keeps the committed file when only its wall time
changed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from berteval.serve import confidence
from berteval.store import Store
from conftest import REPO

CALIBRATION = REPO / "leaderboard" / "results" / confidence.calibration_file("4f29b2de8c686a14")


def _report_outputs() -> list[str]:
    """What the README's `python -m leaderboard --out X.html` commands write: X.html and X_files/."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    outs = re.findall(r"python -m leaderboard --out (\S+)\.html", readme)
    assert outs, "the README no longer shows the report command"
    return [path for out in outs for path in (f"{out}.html", f"{out}_files/table.csv")]


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git clone")
def test_the_readme_report_and_its_files_are_ignored_by_git():
    for path in _report_outputs():
        proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO)
        assert proc.returncode == 0, f"{path} (written by the README's report command) is not ignored by git"


def test_a_recalibration_that_differs_only_in_wall_time_keeps_the_file(tmp_path):
    store = Store(tmp_path)
    committed = json.loads(CALIBRATION.read_text())
    (tmp_path / "calibration").mkdir()
    target = tmp_path / confidence.calibration_file(committed["head_run_id"])
    target.write_bytes(CALIBRATION.read_bytes())
    rel, written = confidence.save(store, {**committed, "wall_s": committed["wall_s"] + 12.3})
    assert not written and target.read_bytes() == CALIBRATION.read_bytes()
    assert rel == confidence.calibration_file(committed["head_run_id"])
    moved = {**committed, "threshold": committed["threshold"] + 0.01}
    assert confidence.save(store, moved) == (rel, True)
    assert json.loads(target.read_text()) == moved
    other = {**committed, "head_run_id": "0123456789abcdef"}
    assert confidence.save(store, other)[1] and confidence.load("0123456789abcdef", store) == other
