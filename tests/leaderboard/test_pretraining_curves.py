"""The twins' pre-training curves (leaderboard.pretraining): read from a published derivation.json, else from the
run state committed for resuming (said to be in progress, with its step), joined by step, the masked-LM gap where
both twins hold the step; the figure draws one line per model; the committed files give the gen2 pair's rows."""

from __future__ import annotations

import json

import pytest

from berteval.models.twins import TWINS
from leaderboard import pretraining


def _eval(step: int, acc: float, dev: float = 0.5) -> dict:
    return {"step": step, "tokens": step * 4096, "heldout": {"n": 1024, "mlm_accuracy": acc, "mlm_loss": 7 - 10 * acc},
            "nsp_dev_pairs": {"n": 1024, "nsp_accuracy": dev}, "heldout_sentence_pairs": {"n": 1024,
                                                                                          "nsp_accuracy": dev}}


@pytest.fixture
def results(tmp_path):
    pair = TWINS["gen2"]
    published = tmp_path / "encoders" / pair.nsp
    published.mkdir(parents=True)
    (published / "derivation.json").write_text(json.dumps({"evaluations": [_eval(400, 0.10, 0.52),
                                                                           _eval(800, 0.20, 0.61)]}))
    resume = tmp_path / "pretrain-resume" / pair.control
    resume.mkdir(parents=True)
    (resume / "run_state.json").write_text(json.dumps({"step": 400, "tokens": 400 * 4096,
                                                       "evals": [_eval(400, 0.13)]}))
    return tmp_path


def test_curves_are_read_from_what_each_run_committed_and_joined_by_step(results):
    pair = TWINS["gen2"]
    assert pretraining.source(pair.nsp, results)[1] == "published"
    assert pretraining.source(pair.control, results)[1] == "in progress: step 400, 1.64 M tokens"
    assert pretraining.source("wiki-bert-mini-g2-seed1", results) == ([], "not started")
    t = pretraining.joined(pair, results)
    assert list(t["step"]) == [400, 800]
    assert t.loc[0, "gap"] == pytest.approx(-0.03) and t.loc[1, "mlm_accuracy_control"] != t.loc[1, "mlm_accuracy_control"]
    md = pretraining.markdown(pair, results)
    assert "| 400 | 1.64 M | 0.100 / 6.000 | 0.520 | 0.130 / 5.700 | -0.030 |" in md
    assert "| 800 | 3.28 M | 0.200 / 5.000 | 0.610 |  |  |" in md  # the control has not reached it
    assert "no evaluations yet" in pretraining.markdown(TWINS["gen2-seed1"], results)
    fig = pretraining.figure(results)
    names = [trace.name for trace in fig.data]
    assert names == [pair.nsp, pair.control]  # the other pairs have nothing here
    assert [trace.line.dash for trace in fig.data] == ["solid", "dash"]


def test_the_committed_runs_give_the_second_generations_curve(capsys):
    assert pretraining.main(["--pair", "gen2"]) == 0
    out = capsys.readouterr().out
    assert "wiki-bert-mini-g2" in out and "| 3,200 | 12.99 M | 0.278 / 4.502 |" in out
    assert pretraining.main(["--pair", "gen1"]) == 0
    assert "| 5,000 | 19.90 M | 0.274 / 4.527 | 0.594 | 0.317 / 4.111 | -0.042 |" in capsys.readouterr().out
