"""The demo head's protocol on a tiny model: the fine-tunes (LoRA, LoRA-plus, full), folds dealt by
article, every dev question answered once by a head that never saw its article, and the estimate
record that comes with the served adapter."""

import json

import pytest

from berteval import records, runs
from berteval.errors import BertevalError
from berteval.metrics import squad as squad_metrics
from berteval.qa import inference as qa
from berteval.regimes import kfold
from berteval.tasks import get
from conftest import squad_spec


def test_folds_split_articles_and_balance_questions():
    groups = ["a"] * 5 + ["b"] * 4 + ["c"] * 3 + ["d"] * 2 + ["e"] * 1
    folds = kfold.assign_folds(groups, 2)
    assert set(folds) == {"a", "b", "c", "d", "e"} and set(folds.values()) == {1, 2}
    sizes = [sum(1 for g in groups if folds[g] == f) for f in (1, 2)]
    assert abs(sizes[0] - sizes[1]) <= 1  # 5+2+1 against 4+3
    assert kfold.assign_folds(list(reversed(groups)), 2) == folds  # order of the questions does not matter
    with pytest.raises(BertevalError, match="at least 3 dev articles"):
        kfold.assign_folds(["a", "b"], 3)


def test_every_dev_question_is_held_out_exactly_once(tiny_squad_qa):
    task = get("squad")
    data = task.load(tiny_squad_qa)
    parts = kfold.fold_data(task, data, 2)
    held = [q for f in (1, 2) for q in parts[f].eval.ids]
    assert sorted(held) == sorted(data.eval.ids)
    for f in (1, 2):
        seen = set(parts[f].train.groups)
        assert not seen & set(parts[f].eval.groups)  # no held-out article in its head's training data
        assert set(data.train.ids) <= set(parts[f].train.ids)  # the train questions always train
        assert kfold.is_kfold(parts[f].eval.name) and f"fold {f}" in parts[f].eval.name
    assert len(parts[kfold.ALL].train) == len(data.train) + len(data.eval)


@pytest.fixture(scope="module")
def kfold_run(tiny_models, tiny_squad_qa, tmp_path_factory):
    out = tmp_path_factory.mktemp("kfold")
    report = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, out, "finetune-lora-plus", folds=2))
    return out, report


def test_kfold_writes_two_folds_then_the_estimate_with_the_served_adapter(kfold_run, tiny_squad_qa):
    out, report = kfold_run
    fold1, fold2, est = report.written
    assert [r.regime for r in report.written] == ["finetune-lora-plus"] * 3
    assert all(kfold.is_kfold(r.split) for r in report.written)
    assert kfold.is_estimate(est) and not kfold.is_estimate(fold1)
    assert fold1.n_eval + fold2.n_eval == est.n_eval == 9 and est.n_train == 18 + 9
    assert "adapter_dir" not in fold1.config and "adapter_dir" not in fold2.config  # fold heads are not kept
    assert (out / est.config["adapter_dir"] / "adapter_model.safetensors").is_file()
    # The estimate is the folds' out-of-fold answers, scored together.
    preds = json.loads((out / est.predictions_file).read_text())
    dev = get("squad").load(tiny_squad_qa).eval
    assert set(preds) == set(dev.ids)
    golds = {q: list(g.texts) for q, g in zip(dev.ids, dev.labels)}
    assert est.metrics == pytest.approx(squad_metrics.score(preds, golds), abs=1e-3)
    assert [f["fold"] for f in est.config["folds"]] == [1, 2]
    assert {f["run_id"] for f in est.config["folds"]} == {fold1.run_id, fold2.run_id}
    assert records.read_records([out / "squad.jsonl"])[1] == []


def test_kfold_rerun_skips_every_finished_cell(kfold_run, tiny_models, tiny_squad_qa):
    out, report = kfold_run
    again = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, out, "finetune-lora-plus", folds=2))
    assert again.written == [] and again.skipped == [r.run_id for r in report.written]


def test_lora_plus_adapter_reloads_with_its_biases_and_layernorms(tiny_models, tiny_squad_qa, tmp_path):
    from safetensors import safe_open

    rec = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "finetune-lora-plus")).written[0]
    folder = tmp_path / rec.config["adapter_dir"]
    with safe_open(str(folder / "adapter_model.safetensors"), "pt") as fh:
        keys = list(fh.keys())
    assert any("lora_A" in k for k in keys) and any("LayerNorm" in k for k in keys)
    assert any("attention.self.query" in k and k.endswith(".bias") for k in keys)  # every bias trained, so saved
    model = qa.load_adapter(folder)
    preds = json.loads((tmp_path / rec.predictions_file).read_text())
    dev = get("squad").load(tiny_squad_qa).eval
    for qid, (question, context) in list(zip(dev.ids, dev.texts))[:4]:
        got = qa.answer(model, question, context, qa.QASettings(max_length=32, doc_stride=8))
        assert got.nbest[0].text == preds[qid]  # what the app loads answers as the scored model did


def test_full_finetune_keeps_no_artifact(tiny_models, tiny_squad_qa, tmp_path):
    rec = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "finetune-full")).written[0]
    assert rec.regime == "finetune-full" and "adapter_dir" not in rec.config
    assert rec.config["artifact"].startswith("none") and rec.config["training"]["trained"].startswith("every weight")
    assert not (tmp_path / "adapters").exists()


@pytest.mark.parametrize("regime, kw, message", [
    ("probe", {}, r"--regime probe on squad .* drop --folds \(--folds is for --regime finetune"),
    ("finetune", {"limit_eval": 3}, "drop --limit-eval"),
    ("finetune", {"folds": 1}, "at least 2 folds"),
])
def test_kfold_refuses_what_it_cannot_do(regime, kw, message, tiny_models, tiny_squad_qa, tmp_path):
    spec = squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, regime, **{"folds": 2, **kw})
    with pytest.raises(BertevalError, match=message):
        runs.run(spec)


def test_the_leaderboard_lists_kfold_records_apart_and_never_ranks_them(kfold_run, tiny_models, tiny_squad_qa):
    import leaderboard

    out, report = kfold_run
    official = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, out, "finetune")).written[0]
    v = leaderboard.views(paths=[out])
    assert list(v["estimates"]["run_id"]) == [r.run_id for r in report.written]  # folds and estimate, apart
    assert set(v["table"]["regime"]) == {"finetune"} and official.run_id in " ".join(v["table"]["run_ids"])
    assert v["n_records"] == 1  # nothing k-fold in what the figures and bands see


def test_committable_tunings_fit_the_artifact_limit_on_the_default_model():
    """What a committable tuning saves (its trainable weights, fp32) stays under 5 MiB for the served model."""
    from berteval import models
    from berteval.regimes.tuning import ARTIFACT_LIMIT_MB, TUNINGS

    loaded = models.load(models.DEFAULT)
    for tuned in TUNINGS.values():
        model = tuned.build(qa.head_model(loaded))
        mib = sum(p.numel() for p in model.parameters() if p.requires_grad) * 4 / 2**20
        assert (mib < ARTIFACT_LIMIT_MB) == tuned.committable, (tuned.name, round(mib, 2))


def test_plan_names_each_fold_and_the_served_head(kfold_run, tiny_models, tiny_squad_qa, capsys):
    from berteval.cli import main

    out, report = kfold_run
    code = main(["run", "--task", "squad", "--model", str(tiny_models["pretraining"]), "--regime", "finetune-lora-plus",
                 "--folds", "2", "--seeds", "0", "--max-length", "32", "--doc-stride", "8", "--epochs", "1",
                 "--batch-size", "4", "--data-dir", str(tiny_squad_qa), "--out", str(out), "--plan"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    assert [line.split()[1] for line in lines[:3]] == [r.run_id for r in report.written]
    assert [line.split("seed 0")[1].strip() for line in lines[:3]] == ["fold 1", "fold 2", "all questions"]
