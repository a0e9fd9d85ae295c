"""leaderboard.grid: one model's task x pooling grid (mean ± std over seeds), written from records."""

from __future__ import annotations

import statistics

import pytest

from berteval.models.loading import DEFAULT_MODEL_ID
from conftest import make_record, records_frame
from leaderboard import data, grid

M = DEFAULT_MODEL_ID + "+mlm-nsp"


def _frame(tmp_path, extra=()):
    path = tmp_path / "r.jsonl"
    recs = [make_record(run_id=f"mrpc-{p}-{s}", model=M, task="mrpc", regime="finetune", pooling=p, seed=s,
                        metrics={"accuracy": v}, wall_s=10.0)
            for p, vs in {"cls": [0.70, 0.72, 0.74], "mean": [0.60, 0.61, 0.62]}.items() for s, v in enumerate(vs)]
    recs.append(make_record(run_id="stsb-cls-0", model=M, task="stsb", regime="finetune", pooling="cls",
                            metrics={"pearson": 61.234}, main_metric="pearson", wall_s=5.0))
    recs.append(make_record(run_id="other-model", model="berteval/wiki-bert-mini", task="mrpc", regime="finetune",
                            metrics={"accuracy": 0.99}))
    recs.append(make_record(run_id="probe", model=M, task="mrpc", regime="probe", metrics={"accuracy": 0.11}))
    return records_frame(path, [*recs, *extra])


def test_cells_are_mean_and_sample_std_and_an_unfinished_cell_says_its_seeds(tmp_path):
    table, wall = grid.grid(_frame(tmp_path), "default+mlm-nsp", "finetune")
    rows = table.set_index("task (metric)")
    sd = statistics.stdev([0.70, 0.72, 0.74])
    assert rows.loc["MRPC (accuracy)", "cls"] == f"0.7200 ± {sd:.4f}"
    assert rows.loc["MRPC (accuracy)", "mean"].startswith("0.6100 ± ")
    # STS-B: one seed against the grid's three, a x100 metric with two decimals, a pooling never run
    assert rows.loc["STS-B (Pearson x100)", "cls"] == "61.23 (1 seed)"
    assert rows.loc["STS-B (Pearson x100)", "mean"] == grid.NOT_RUN
    assert "0.9900" not in table.to_string() and "0.1100" not in table.to_string()  # other model, other regime
    assert wall == 65.0  # the six MRPC records and the STS-B one


def test_names_resolve_the_default_alias_and_a_twins_short_name(tmp_path):
    known = [M, "berteval/wiki-bert-mini", "berteval/wiki-bert-mini-nonsp"]
    assert grid.recorded_name("default+mlm-nsp", known) == M
    assert grid.recorded_name("wiki-bert-mini", known) == "berteval/wiki-bert-mini"
    assert grid.recorded_name("wiki-bert-mini-nonsp", known) == "berteval/wiki-bert-mini-nonsp"
    assert grid.recorded_name("nobody", known) == "nobody"


def test_a_kfold_row_is_labelled_an_estimate(tmp_path):
    kfold = make_record(run_id="qnli", model=M, task="qnli", regime="finetune", pooling="cls",
                        split="validation, k-fold over dev pairs (k=5, seed 0)", metrics={"accuracy": 0.6})
    df = _frame(tmp_path, [kfold])
    table, _ = grid.grid(df, "default+mlm-nsp", "finetune", tasks=["qnli"])
    assert list(table["task (metric)"]) == ["QNLI (accuracy, 5-fold over dev: an estimate)"]


def test_command_prints_markdown_and_no_records_says_so(tmp_path, capsys):
    _frame(tmp_path)
    assert grid.main(["--model", "default+mlm-nsp", "--regime", "finetune", "--tasks", "mrpc",
                      str(tmp_path / "r.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "| task (metric) | `cls` | `mean` |" in out and "| MRPC (accuracy) | 0.7200 ±" in out
    assert "60 s" in out
    assert grid.as_markdown(grid.grid(data.frame([]), "x", "probe")[0]) == "No records for this model and regime."


def test_one_task_across_models_keeps_the_given_order_and_shows_a_missing_model(tmp_path):
    df = _frame(tmp_path)
    table, wall, label = grid.task_grid(df, "mrpc", ["wiki-bert-mini", "default+mlm-nsp", "default+random"],
                                        "finetune")
    assert label == "MRPC (accuracy)"
    rows = table.set_index("model")
    assert list(rows.index) == ["`wiki-bert-mini`", "`default+mlm-nsp`", "`default+random`"]
    assert rows.loc["`wiki-bert-mini`", "cls"] == "0.9900 (1 seed)"  # counted against the table's three
    assert rows.loc["`wiki-bert-mini`", "mean"] == grid.NOT_RUN
    assert rows.loc["`default+mlm-nsp`", "cls"].startswith("0.7200 ± ")
    assert set(rows.loc["`default+random`"]) == {grid.NOT_RUN}  # no records: visible, not dropped
    assert "0.1100" not in table.to_string() and "61.23" not in table.to_string()  # other regime, other task
    assert wall == 60.0 + make_record().wall_s  # the six records of default+mlm-nsp and the twin's one


def test_task_command_needs_models_and_prints_a_row_per_model(tmp_path, capsys):
    _frame(tmp_path)
    assert grid.main(["--task", "mrpc", "--models", "default+mlm-nsp", "--regime", "finetune",
                      str(tmp_path / "r.jsonl")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("MRPC (accuracy):") and "| model | `cls` | `mean` |" in out
    assert "| `default+mlm-nsp` | 0.7200 ±" in out
    with pytest.raises(SystemExit):
        grid.main(["--task", "mrpc"])
    assert "--task needs --models" in capsys.readouterr().err
    assert grid.main(["--task", "mrcp", "--models", "default", "--regime", "finetune",
                      str(tmp_path / "r.jsonl")]) == 0  # a typo: told which tasks the records hold
    out = capsys.readouterr().out
    assert "No finetune records of task 'mrcp'" in out and "tasks with finetune records: mrpc, stsb." in out
