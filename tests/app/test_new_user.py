"""What a new user trips over first: options that run nothing, messages that read wrong, examples
that wait on an unreachable hub. Each test pins an answer (issue 15, item 5)."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys

import pytest

from berteval import hub, records
from berteval.cli import main
from berteval.errors import BertevalError
from berteval.tasks import get

from conftest import REPO, docs_text, make_record


def test_a_grid_emptied_by_last_layer_only_is_an_error_not_a_silent_exit_0(capsys, tiny_models, tiny_sst2, tmp_path):
    code = main(["run", "--task", "sst2", "--model", str(tiny_models["pretraining"]), "--pooling", "pooler",
                 "--layers", "1", "--seeds", "0", "--data-dir", str(tiny_sst2), "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "last layer only" in err and "nothing to run" in err and "Add -1 to --layers" in err
    assert not (tmp_path / "sst2.jsonl").exists()


def test_validate_says_at_once(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(make_record().to_json().replace('"cpu"', '"c\tpu"') + "\n")  # a raw tab inside a JSON string
    _, problems = records.read_records([path])
    # before: "not valid JSON: Invalid control character at at column 5..." (json's message ends in "at")
    assert "Invalid control character at column" in problems[0].message and "at at" not in problems[0].message


def test_no_data_dir_on_an_offline_machine_fails_at_once_and_says_what_to_do(monkeypatch):
    """Before: 28-35 s of the hub client's retries, then an error naming only the exception's class."""
    attempts = []

    def no_network(self, address):
        attempts.append(address)
        raise OSError("this test has no network")

    monkeypatch.setattr(hub, "reachable", lambda timeout=3.0: False)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(BertevalError, match=r"not reachable.*not in the local datasets cache.*--data-dir"):
        get("sst2").load(None)
    assert attempts == []  # the local cache only: not one connection tried, so no retries to wait for


def test_readme_run_examples_name_their_data():
    """Every `berteval run` example in the README and docs/ reads local data; without --data-dir it goes to the
    hub."""
    text = docs_text()
    commands = re.findall(r"^(python -m berteval run (?:.*\\\n)*.*)$", text, flags=re.M)
    assert commands
    assert [c for c in commands if "--data-dir" not in c] == []


@pytest.mark.slow
def test_every_readme_command_that_writes_the_committed_results_finds_them_all(tmp_path):
    """The reproduce commands of the README and docs/ name the committed records: `--plan` finds every cell
    present (real data). A command quoted on two pages runs once."""
    text = docs_text().replace("\\\n", " ")
    commands = list(dict.fromkeys(c for c in re.findall(r"^python -m berteval run .*$", text, flags=re.M)
                                  if "--out leaderboard/results" in c and not c.rstrip().endswith("# pending")))
    assert len(commands) >= 10
    data = os.environ.get("BERTEVAL_DATA") or str(REPO.parent / "shared" / "data")
    for command in commands:
        argv = shlex.split(command.split("#")[0].replace("../shared/data", data))[3:]
        proc = subprocess.run([sys.executable, "-m", "berteval", *argv, "--plan"], cwd=REPO, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
