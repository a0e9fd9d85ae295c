"""`python -m berteval suite`: named sets of `run` commands. Every step of every suite is a command `run` accepts;
a suite runs its steps through `run` (each record's command is its step's own `run` line), resumes by skipping what
its records hold, goes past a step the model cannot take (a control's NSP head) and stops at any other failure."""

from __future__ import annotations

import pytest

from berteval import cli, records, suites
from berteval.errors import BertevalError


def test_every_step_of_every_suite_is_a_run_command_that_parses():
    parser = cli._parser()
    for suite in suites.SUITES.values():
        steps = suite.steps()
        assert steps, suite.name
        for step in steps:
            line = suites.argv(step, "some-model", 5, ["--data-dir", "d", "--plan"])
            args = parser.parse_args(cli._glue_negative_lists(line))
            assert args.verb == "run" and args.task == step.task and args.model == "some-model"
    layers = [s for s in suites.SUITES["twin-heads"].steps() if s.group == "layers"]
    assert "0,1,2,3,4" in suites.argv(layers[0], "m", 5, [])  # every hidden state, embeddings first
    spread = suites.SUITES["seed-spread"].steps()
    assert {s.task for s in spread if s.group == "small-bert"} == {"mrpc", "stsb"}


def test_only_keeps_groups_or_tasks_and_refuses_what_the_suite_lacks():
    steps = suites.SUITES["derived-heads"].steps()
    assert {s.group for s in suites.select(steps, "probes")} == {"probes"}
    assert {s.task for s in suites.select(steps, "mrpc,stsb")} == {"mrpc", "stsb"}
    with pytest.raises(BertevalError, match="layers is not a group or task of this suite"):
        suites.select(steps, "layers")  # derived-heads has no every-layer group
    with pytest.raises(BertevalError, match="no suite 'nope'"):
        suites.get("nope")


def test_a_suite_runs_its_steps_through_run_and_resumes(tiny_models, tiny_sst2, tmp_path, capsys):
    model = str(tiny_models["pretraining"])
    base = ["suite", "seed-spread", "--model", model, "--only", "sst2", "--data-dir", str(tiny_sst2), "--out",
            str(tmp_path), "--no-progress"]
    assert cli.main([*base, "--plan"]) == 1  # nothing written yet
    assert cli.main(base) == 0
    out = capsys.readouterr().out
    assert "seed-spread step 1/1 (probes)" in out and "12 records written" in out
    recs, problems = records.read_records([tmp_path / "sst2.jsonl"])
    assert problems == [] and len(recs) == 12
    command = recs[0].config["command"]  # the step's own run line, not the suite's
    assert " run --task sst2 --model " in command and "--pooling cls,pooler,mean,max --seeds 0,1,2" in command
    assert cli.main(base) == 0 and "0 records written, 12 already present" in capsys.readouterr().out
    assert cli.main([*base, "--plan"]) == 0


def test_a_step_the_model_cannot_take_is_passed_and_any_other_failure_stops(monkeypatch, capsys):
    calls = []

    def fake_main(line):
        calls.append(line[2])
        return 2 if "pretrained" in line or line[2] == "rte" else 0  # the NSP head refused; RTE fails

    monkeypatch.setattr(cli, "main", fake_main)
    parse = lambda *extra: cli._parser().parse_args(["suite", "seed-spread", "--model", "m", *extra])  # noqa: E731
    assert cli._cmd_suite(parse("--only", "nsp-head,sst2")) == 0
    assert calls == ["nsp", "sst2"] and "runs only where the model's NSP head was trained" in capsys.readouterr().out
    calls.clear()
    assert cli._cmd_suite(parse("--only", "probes")) == 2
    assert calls == ["sst2", "nsp", "mrpc", "rte"]  # stopped at RTE's failure
    assert "stopped at step 4 of" in capsys.readouterr().err
