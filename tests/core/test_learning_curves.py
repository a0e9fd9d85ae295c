"""Learning curves (--train-sizes): seeded nested draws from one encoding, identities that leave
every unsized run id alone, and the fine-tune's equal step budget (tiny model, tiny data)."""

import numpy as np
import pytest

from berteval import records, runs
from berteval.errors import BertevalError
from berteval.regimes import finetune, grid
from berteval.regimes.base import Cell
from berteval.tasks import get


def _spec(model_dir, data_dir, out, **kw):
    base = dict(task=get("sst2"), model=str(model_dir), poolings=["cls", "mean"], seeds=[0, 1], data_dir=data_dir,
                out=out, progress=False)
    base.update(kw)
    return runs.RunSpec(**base)


def test_parse_train_sizes():
    assert grid.parse_train_sizes("32, 128,full,32") == [32, 128, None]
    assert grid.parse_train_sizes(None) is None and grid.parse_train_sizes("") is None
    for bad in ("abc", "1", "-5", "3.5"):
        with pytest.raises(BertevalError, match="--train-sizes takes"):
            grid.parse_train_sizes(bad)


def test_draws_are_seeded_nested_and_differ_between_seeds():
    small, large = grid.draw_rows(1000, Cell("cls", -1, 3, 32)), grid.draw_rows(1000, Cell("cls", -1, 3, 128))
    assert len(small) == 32 and len(large) == 128 and set(small) <= set(large)  # nested: the curve adds data
    assert np.array_equal(small, grid.draw_rows(1000, Cell("mean", 5, 3, 32)))  # pooling and layer do not matter
    assert not np.array_equal(small, grid.draw_rows(1000, Cell("cls", -1, 4, 32)))  # the seed draws
    assert np.array_equal(grid.draw_rows(7, Cell("cls", -1, 0)), np.arange(7))  # no size: every row


def test_sized_probe_one_encoding_every_size_and_unsized_ids_unchanged(tiny_models, tiny_sst2, tmp_path):
    plain = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "plain"))
    rep = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "sized", train_sizes=[16, 64, None]))
    # every size is a row subset of the whole train set's cached vectors: the sized run encodes nothing
    assert plain.encoded_examples == 160 and rep.encoded_examples == 0
    by_size = {}
    for r in rep.written:
        by_size.setdefault(r.config.get("train_size"), []).append(r)
    assert sorted(by_size, key=str) == sorted([16, 64, None], key=str)
    # 'full' is the run without sizes: the same run ids, so committed records are never redone
    assert sorted(r.run_id for r in by_size[None]) == sorted(r.run_id for r in plain.written)
    small = by_size[16][0]
    assert small.n_train == 14 and small.config["probe"]["n_heldout"] == 2  # 10% of the draw chooses C
    assert small.config["train_drawn_from"] == 120 and small.data_sha256 == plain.written[0].data_sha256
    assert by_size[64][0].n_train == 58
    # paired tests only within one size (its records share n_train)
    assert all(t["other"]["run_id"] in {r.run_id for r in by_size[16]} for t in by_size[16][-1].paired_tests)
    assert records.read_records([tmp_path / "sized" / "sst2.jsonl"])[1] == []
    again = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "sized", train_sizes=[16, 64, None]))
    assert again.written == [] and len(again.skipped) == 12


def test_sizes_the_train_set_cannot_give_are_refused(tiny_models, tiny_sst2, tmp_path):
    with pytest.raises(BertevalError, match="has 120 examples"):
        runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path, train_sizes=[32, 120]))


def test_sized_finetune_trains_the_default_protocols_step_count(tiny_models, tiny_sst2, tmp_path):
    spec = _spec(tiny_models["pretraining"], tiny_sst2, tmp_path, regime="finetune", poolings=["mean"], seeds=[0],
                 train_sizes=[16, 64], epochs=0.1, batch_size=32)
    budget = finetune.step_budget(spec)
    assert budget == round(0.1 * 113)  # 0.1 epochs over the default 3,600 training examples at batch 32
    rep = runs.run(spec)
    for rec in rep.written:
        ft = rec.config["finetune"]
        assert ft["steps"] == budget and ft["epochs"] == budget / np.ceil(rec.n_train / 32)
        assert rec.config["train_size"] in (16, 64) and rec.config["train_examples_available"] == 120
    assert finetune.step_budget(runs.RunSpec(task=get("sst2"))) == 226  # the committed protocol: 2 x 113
