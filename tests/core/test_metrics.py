"""Metrics through evaluate: the modules shipped in berteval/metrics load by local path, offline, and give
exactly the numbers the committed records hold (re-scored from the committed predictions).

The first test to load evaluate pays for its import (it imports torch and transformers: 15-40 s on a
busy 2-core machine); the rest reuse it.
"""

from __future__ import annotations

import json

import pytest

from berteval import metrics
from berteval.metrics import modules
from berteval.regimes.kfold import is_kfold
from berteval.store import Store
from berteval.tasks import get
from conftest import SHARED_DATA

STORE = Store()  # the committed leaderboard/results


def _predictions(rec) -> dict:
    return json.loads((STORE.root / rec.predictions_file).read_text())


def test_modules_load_by_local_path_into_the_configured_module_cache(monkeypatch, tmp_path):
    # conftest points HF_MODULES_CACHE at the session's temporary folder: the module is copied there.
    import os
    from pathlib import Path

    acc = modules.load("accuracy")
    assert acc.compute(predictions=[1, 0, 1, 1], references=[1, 1, 1, 1]) == {"accuracy": 0.75}
    copied = list(Path(os.environ["HF_MODULES_CACHE"]).rglob("accuracy.py"))
    assert copied, "evaluate did not copy the module into HF_MODULES_CACHE"
    with pytest.raises(KeyError, match="shipped"):
        modules.path("squad")  # the hub's module is never loaded


def test_each_module_keeps_one_import_per_line():
    # evaluate finds a module's dependencies by reading its import lines one at a time.
    for name in modules.NAMES:
        for line in modules.path(name).joinpath(f"{name}.py").read_text().splitlines():
            if line.startswith(("import ", "from ")):
                assert "," not in line and " as " not in line.replace("numpy as np", ""), line


def test_squad_module_follows_the_published_definition():
    squad = modules.load("squad_v1")
    out = squad.compute(predictions=["the Broncos", "Carolina", ""],
                        references=[["Denver Broncos", "Broncos"], ["Denver Broncos"], ["x"]])
    assert out["exact_match"] == pytest.approx(100 / 3) and out["f1"] == pytest.approx(100 / 3)
    # compute() of the registry: a question without a prediction scores 0.
    got = metrics.compute(("exact_match", "f1"), predictions={"q1": "Broncos"}, golds={"q1": ["Broncos"], "q2": ["Paris"]})
    assert got == {"exact_match": 50.0, "f1": 50.0}


@pytest.mark.parametrize("task", ["sst2", "nsp"])
def test_committed_classification_records_rescore_identically_through_evaluate(task):
    recs = [r for r in STORE.read(task)[0] if r.predictions_file]
    assert recs, f"no committed {task} records with predictions"
    for rec in recs:
        pred = _predictions(rec)
        got = metrics.compute(get(task).metrics, pred=pred["pred"], label=pred["label"])
        assert got == rec.metrics, rec.run_id  # bit for bit, not approximately


# slow: every committed SST-2 paired test recomputed through evaluate (about 13 CPU s)
@pytest.mark.slow
def test_committed_paired_tests_equal_the_mcnemar_module():
    mcnemar = modules.load("mcnemar_exact")
    by_id = {r.run_id: r for r in STORE.read("sst2")[0]}
    checked = 0
    for rec in by_id.values():
        mine = _predictions(rec)
        for test in rec.paired_tests:
            other = _predictions(by_id[test["other"]["run_id"]])
            assert other["label"] == mine["label"]
            out = mcnemar.compute(predictions1=mine["pred"], predictions2=other["pred"], references=mine["label"])
            assert (out["n_only_1_correct"], out["n_only_2_correct"]) == (test["n_only_self_correct"],
                                                                          test["n_only_other_correct"])
            assert out["p_value"] == pytest.approx(test["p_value"], rel=1e-12)
            checked += 1
    assert checked >= 30


# slow: every committed SQuAD prediction file re-scored on the real dev set (about 14 CPU s)
@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "squad" / "dev-v1.1.json").is_file(),
                    reason=f"no SQuAD v1.1 dev set under {SHARED_DATA}: the committed SQuAD predictions cannot be re-scored")
def test_committed_squad_predictions_rescore_to_the_records_em_and_f1():
    dev = get("squad").load(SHARED_DATA).eval
    golds = {qid: list(answers.texts) for qid, answers in zip(dev.ids, dev.labels)}
    recs = STORE.read("squad")[0]
    assert recs
    for rec in recs:
        preds = _predictions(rec)
        # A k-fold fold answers its held-out articles only: scored on exactly those questions, no fewer.
        scored = {q: golds[q] for q in preds} if is_kfold(rec.split) else golds
        assert len(preds) == rec.n_eval == len(scored), rec.run_id
        got = metrics.compute(get("squad").metrics, predictions=preds, golds=scored)
        # The QA regime writes EM and F1 rounded to 4 decimals.
        assert {k: round(v, 4) for k, v in got.items()} == rec.metrics, rec.run_id
