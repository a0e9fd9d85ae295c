"""The CLI's user-facing errors and verbs, run in-process."""

import pytest

from berteval.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_unknown_pooling(capsys, tiny_sst2):
    code, _, err = run_cli(capsys, "run", "--task", "sst2", "--pooling", "cls,avg", "--data-dir", str(tiny_sst2))
    assert code == 2 and "unknown pooling avg; choose from cls, pooler, mean, max" in err


def test_missing_data_dir(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "--task", "sst2", "--data-dir", str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in err and "BERTEVAL_DATA" in err


def test_data_dir_without_sst2_files(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "--task", "sst2", "--data-dir", str(tmp_path), "--no-progress")
    assert code == 2 and "no SST-2 data" in err


def test_unknown_model(capsys, tiny_sst2):
    code, _, err = run_cli(capsys, "run", "--task", "sst2", "--model", "./no/such/model",
                           "--data-dir", str(tiny_sst2))
    assert code == 2 and "not an existing local folder" in err


def test_unknown_task(capsys):
    code, _, err = run_cli(capsys, "run", "--task", "mnli")
    assert code == 2 and "unknown task 'mnli'" in err


def test_data_dir_from_environment(capsys, monkeypatch, tiny_models, tiny_sst2, tmp_path):
    monkeypatch.setenv("BERTEVAL_DATA", str(tiny_sst2))
    code, out, _ = run_cli(capsys, "run", "--task", "sst2", "--model", str(tiny_models["pretraining"]),
                           "--pooling", "cls", "--seeds", "0", "--out", str(tmp_path), "--no-progress")
    assert code == 0 and "1 records written" in out
    code, out, _ = run_cli(capsys, "run", "--task", "sst2", "--model", str(tiny_models["pretraining"]),
                           "--pooling", "cls", "--seeds", "0", "--out", str(tmp_path), "--no-progress")
    assert code == 0 and "0 records written, 1 already present" in out
    code, out, _ = run_cli(capsys, "summary", str(tmp_path / "sst2.jsonl"), "--markdown")
    assert code == 0 and "| cls | -1 | accuracy |" in out


def test_ls_lists_registries(capsys):
    code, out, _ = run_cli(capsys, "ls")
    assert code == 0
    for word in ("sst2", "cls", "pooler", "mean", "max", "probe"):
        assert word in out


def test_validate_reports_bad_line_and_exits_nonzero(capsys, tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text("{}\n")
    code, out, err = run_cli(capsys, "validate", str(f))
    assert code == 1 and f"{f}:1: missing field" in err and "0 valid records, 1 bad lines" in out


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "python -m berteval run --task sst2" in capsys.readouterr().out


def test_negative_layer_lists_parse(capsys, tiny_models, tiny_sst2, tmp_path):
    code, out, err = run_cli(capsys, "run", "--task", "sst2", "--model", str(tiny_models["pretraining"]),
                             "--pooling", "cls", "--layers", "-1,-2", "--seeds", "0", "--data-dir", str(tiny_sst2),
                             "--out", str(tmp_path), "--no-progress")
    assert code == 0, err
    assert "cls@-1" in out and "cls@1" in out  # -2 on a 2-layer model is hidden state 1


def test_plan_lists_present_and_missing_cells_and_changes_nothing(capsys, monkeypatch, tiny_models, tiny_sst2,
                                                                   tmp_path):
    from berteval import models

    model = str(tiny_models["pretraining"])
    base = ["run", "--task", "sst2", "--model", model, "--pooling", "cls", "--data-dir", str(tiny_sst2),
            "--out", str(tmp_path), "--no-progress"]
    assert run_cli(capsys, *base, "--seeds", "0")[0] == 0
    before = (tmp_path / "sst2.jsonl").read_text()
    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("--plan loaded a model"))
    code, out, _ = run_cli(capsys, *base, "--seeds", "0,1", "--plan")
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith("present ") and lines[1].startswith("to run ")
    assert "sst2 cls@-1 seed 1" in lines[1] and lines[-1].startswith("1 of 2 cells present") and "1 would run" in lines[-1]
    assert (tmp_path / "sst2.jsonl").read_text() == before  # nothing written
    code, out, _ = run_cli(capsys, *base, "--seeds", "0", "--plan")
    assert code == 0 and "1 of 1 cells present" in out
