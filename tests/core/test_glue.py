"""GLUE's pair tasks end to end on a tiny model and tiny GLUE-format files: every reading of a pair (BERT's
joint input under each pooling, and the bi-encoder's (u, v, |u - v|)), the STS-B regression (ridge probe,
squared-error fine-tune, correlations, paired bootstrap), QNLI's k-fold over dev, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from berteval import cli, runs
from berteval.tasks import TASKS


def _run(task, model, data, out, **kw):
    return runs.run(runs.RunSpec(TASKS[task], model=str(model), data_dir=data, out=out, progress=False, **kw))


def test_pair_tasks_read_glue_files(glue_dir):
    for name, n_train in (("mrpc", 120), ("rte", 120), ("stsb", 120), ("qnli", 0)):
        data = TASKS[name].load(glue_dir)
        assert len(data.train) == n_train and len(data.eval) == (60 if name == "qnli" else 40)
        assert all(isinstance(t, tuple) and len(t) == 2 for t in data.eval.texts)
    assert set(TASKS["rte"].load(glue_dir).eval.labels) == {0, 1}
    assert isinstance(TASKS["stsb"].load(glue_dir).eval.labels[0], float)


def test_every_reading_of_a_pair_is_probed(glue_dir, tiny_models, tmp_path):
    rep = _run("mrpc", tiny_models["pretraining"], glue_dir, tmp_path, poolings=["cls", "pooler", "mean", "max",
                                                                                "bi-mean"], seeds=[0])
    assert {r.pooling for r in rep.written} == {"cls", "pooler", "mean", "max", "bi-mean"}
    for r in rep.written:
        assert set(r.metrics) == {"accuracy", "binary_f1"} and r.n_eval == 40
    heads = {r.pooling: np.load(tmp_path / r.config["head_file"])["weight"].shape[1] for r in rep.written}
    assert heads["bi-mean"] == 3 * heads["mean"]  # (u, v, |u - v|)
    assert any(t["test"] == "mcnemar_exact" for r in rep.written for t in r.paired_tests)


def test_stsb_is_a_regression_probed_and_fine_tuned(glue_dir, tiny_models, tmp_path):
    rep = _run("stsb", tiny_models["pretraining"], glue_dir, tmp_path, poolings=["cls", "mean"], seeds=[0])
    for r in rep.written:
        assert set(r.metrics) == {"pearson", "spearman"} and -100 <= r.metrics["pearson"] <= 100
        assert "chosen_alpha" in r.config["probe"]
        preds = json.loads((tmp_path / r.predictions_file).read_text())
        assert preds["kind"] == "regression" and isinstance(preds["pred"][0], float)
    tests = [t for r in rep.written for t in r.paired_tests]
    assert tests and tests[0]["test"] == "paired_bootstrap" and 0 <= tests[0]["p_value"] <= 1
    ft = _run("stsb", tiny_models["pretraining"], glue_dir, tmp_path, regime="finetune", poolings=["mean"],
              seeds=[0], epochs=1.0)
    (rec,) = ft.written
    assert "squared-error" in rec.config["finetune"]["head"] and "heldout_pearson_per_epoch" in rec.config["finetune"]


def test_qnli_is_a_k_fold_estimate_over_dev(glue_dir, tiny_models, tmp_path):
    from berteval.regimes import is_kfold

    rep = _run("qnli", tiny_models["pretraining"], glue_dir, tmp_path, poolings=["mean"], seeds=[0])
    (rec,) = rep.written
    assert is_kfold(rec.split) and rec.n_eval == 60 and len(rec.config["folds"]) == 5
    assert sum(f["n_eval"] for f in rec.config["folds"]) == 60  # every dev pair scored once, out of fold
    preds = json.loads((tmp_path / rec.predictions_file).read_text())
    assert len(preds["pred"]) == 60


def test_pair_task_refusals(glue_dir, tiny_models, tiny_sst2, tmp_path, capsys):
    base = ["run", "--model", str(tiny_models["pretraining"]), "--data-dir", str(glue_dir), "--out", str(tmp_path),
            "--seeds", "0", "--no-progress"]
    assert cli.main([*base, "--task", "mrpc", "--regime", "pretrained"]) == 2
    assert "answers NSP only" in capsys.readouterr().err
    assert cli.main([*base, "--task", "qnli", "--regime", "finetune"]) == 2
    assert "--regime probe" in capsys.readouterr().err
    assert cli.main([*base, "--task", "rte", "--regime", "finetune", "--pooling", "bi-mean"]) == 2
    assert "bi-encoder" in capsys.readouterr().err
    assert cli.main([*base, "--task", "sst2", "--pooling", "bi-mean", "--data-dir", str(tiny_sst2)]) == 2
    assert "reads sentence pairs" in capsys.readouterr().err
