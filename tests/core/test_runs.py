"""`berteval run` on a tiny model and tiny data: records, resume, determinism, paired tests."""

import json

import numpy as np

from berteval import records, runs
from berteval.tasks import get


def spec(model_dir, data_dir, out, **kw):
    base = dict(task=get("sst2"), model=str(model_dir), poolings=["cls", "pooler", "mean", "max"], seeds=[0, 1],
                data_dir=data_dir, out=out, progress=False)
    base.update(kw)
    return runs.RunSpec(**base)


def test_run_writes_valid_records_and_skips_them_on_rerun(tiny_models, tiny_sst2, tmp_path):
    out = tmp_path / "results"
    rep = runs.run(spec(tiny_models["pretraining"], tiny_sst2, out))
    assert len(rep.written) == 8 and rep.encoded_examples == 160
    recs, problems = records.read_records([out / "sst2.jsonl"])
    assert problems == [] and len(recs) == 8
    r = recs[0]
    assert r.task == "sst2" and r.regime == "probe" and r.split == "validation" and r.n_eval == 40
    assert r.n_train == 108 and r.config["probe"]["n_heldout"] == 12  # 10% held out of 120
    assert 0.0 <= r.metrics["accuracy"] <= 1.0 and r.versions["torch"]
    preds = json.loads((out / r.predictions_file).read_text())
    assert len(preds["pred"]) == 40 and preds["label"][:2] == [0, 1]
    head = np.load(out / r.config["head_file"])
    assert head["weight"].shape == (1, 16)
    # the paired tests cover every earlier pooling of the same seed
    last_seed0 = [x for x in recs if x.seed == 0][-1]
    assert {t["other"]["pooling"] for t in last_seed0.paired_tests} == {"cls", "pooler", "mean"}
    assert all(0 <= t["p_value"] <= 1 for t in last_seed0.paired_tests)

    again = runs.run(spec(tiny_models["pretraining"], tiny_sst2, out))
    assert again.written == [] and len(again.skipped) == 8 and again.encoded_examples == 0
    assert len(records.read_records([out / "sst2.jsonl"])[0]) == 8


def test_killed_run_resumes_with_the_missing_cells_only(tiny_models, tiny_sst2, tmp_path):
    out = tmp_path / "results"
    runs.run(spec(tiny_models["pretraining"], tiny_sst2, out, poolings=["cls"], seeds=[0]))
    rep = runs.run(spec(tiny_models["pretraining"], tiny_sst2, out, poolings=["cls", "mean"], seeds=[0, 1]))
    assert len(rep.skipped) == 1 and len(rep.written) == 3


def test_same_seed_same_metrics(tiny_models, tiny_sst2, tmp_path):
    a = runs.run(spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "a", seeds=[3]))
    b = runs.run(spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "b", seeds=[3]))
    assert [(r.run_id, r.metrics, r.config["probe"]["chosen_c"]) for r in a.written] == \
           [(r.run_id, r.metrics, r.config["probe"]["chosen_c"]) for r in b.written]


def test_layers_grid_and_limit_train(tiny_models, tiny_sst2, tmp_path):
    rep = runs.run(spec(tiny_models["pretraining"], tiny_sst2, tmp_path, poolings=["cls", "pooler"],
                          layers="-1,1", seeds=[0], limit_train=50))
    assert sorted((r.pooling, r.layer) for r in rep.written) == [("cls", -1), ("cls", 1), ("pooler", -1)]
    assert any("last layer only" in n for n in rep.notes)
    assert all(r.config["train_examples_available"] == 50 for r in rep.written)


# -- the regime contract -------------------------------------------------------------------------------

def _implementations():
    from berteval.regimes import REGIMES

    return [(name, kind, factory()) for name, regime in REGIMES.items() for kind, factory in
            regime.implementations.items()]


def test_every_regime_declares_its_contract_and_none_builds_its_own_identity():
    from berteval import precision
    from berteval.regimes.base import OPTIONS, OPTIONAL, CellRegime

    for name, kind, impl in _implementations():
        c = impl.contract
        assert set(c.options) <= set(OPTIONS) and set(c.optional) <= set(OPTIONAL), (name, kind)
        # a frozen model's bf16 path is named in the id, a trained one's (autocast) is not
        assert ("bf16" in c.optional) == (impl.bf16_path == precision.FROZEN), (name, kind)
        # every regime runs under accelerate launch; only the pooled probe's cells are the same cell there (each
        # process encodes a share, gathered in order, one fit), so only it leaves the process count out of the id
        from berteval.regimes.probe import PooledProbe

        assert ("processes" in c.optional) != isinstance(impl, PooledProbe), (name, kind)
        assert type(impl).identity is CellRegime.identity, (name, kind)  # built once, in regimes.base
        assert ("folds" in c.options) == ("folds" in c.optional), (name, kind)


def test_an_option_the_regime_does_not_take_is_refused_naming_what_it_takes(tiny_models, tiny_sst2, tmp_path):
    import pytest

    from berteval.errors import BertevalError

    with pytest.raises(BertevalError) as err:
        runs.run(spec(tiny_models["pretraining"], tiny_sst2, tmp_path, epochs=3, doc_stride=64))
    text = str(err.value)
    assert text.startswith("--regime probe on sst2 (sentence classification) takes --pooling, --layers, --train-sizes")
    assert "drop --epochs, --doc-stride" in text and "--epochs is for --regime finetune" in text
    assert "no regime takes --doc-stride on sst2" in text
    assert not (tmp_path / "sst2.jsonl").exists()
    rep = runs.run(spec(tiny_models["pretraining"], tiny_sst2, tmp_path, layers="-1", poolings=["mean"], seeds=[0],
                        plan=True))  # -1, the last layer, is every regime's: not an option set
    assert len(rep.planned) == 1
