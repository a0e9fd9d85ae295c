"""The small-BERT protocol (`--regime finetune-small`) on a tiny model and tiny data: the grid is chosen on
held-out train only (a run whose dev labels are flipped chooses, trains and predicts exactly as the plain run),
its records validate and hold the grid, a finished cell is skipped and a cell killed between grid points resumes
with the point it finished, and it is a regime of its own (run ids apart from `finetune`'s, listed by `ls`)."""

from __future__ import annotations

import json

import pytest

from berteval import cli, records, regimes, runs
from berteval.errors import BertevalError
from berteval.regimes import finetune_small
from berteval.tasks import TASKS


def _spec(task, model, data, out, **kw):
    base = dict(model=str(model), data_dir=data, out=out, progress=False, regime="finetune-small", seeds=[0],
                poolings=["mean"], dtype="fp32")
    base.update(kw)
    return runs.RunSpec(TASKS[task], **base)


@pytest.fixture
def learnable_grid(monkeypatch):
    """A grid whose points differ in what they learn: 1e-6 learns nothing in 4 epochs, 1e-2 learns the tiny
    SST-2's one-word rule (held-out accuracy ~0.9, dev ~0.7)."""
    monkeypatch.setattr(finetune_small, "GRID", {"lr": (1e-6, 1e-2), "batch_size": (16,)})


def _flipped_dev(src, dst):
    """A copy of the tiny SST-2 with every dev label flipped (train unchanged)."""
    (dst / "sst2").mkdir(parents=True)
    (dst / "sst2" / "train.tsv").write_text((src / "sst2" / "train.tsv").read_text())
    lines = (src / "sst2" / "dev.tsv").read_text().splitlines()
    flipped = [f"{line[:-1]}{1 - int(line[-1])}" for line in lines[1:]]
    (dst / "sst2" / "dev.tsv").write_text("\n".join([lines[0], *flipped]) + "\n")
    return dst


def test_the_grid_is_chosen_on_heldout_train_never_on_dev(learnable_grid, tiny_models, tiny_sst2, tmp_path):
    # The point that learns scores high on held-out train and, with dev's labels flipped, low on dev; the one
    # that learns nothing sits near 0.5 on both. Chosen on dev, the flipped run would take the other point.
    plain = runs.run(_spec("sst2", tiny_models["pretraining"], tiny_sst2, tmp_path / "a")).written[0]
    data = _flipped_dev(tiny_sst2, tmp_path / "flipped")
    flipped = runs.run(_spec("sst2", tiny_models["pretraining"], data, tmp_path / "b")).written[0]
    a, b = plain.config["finetune"], flipped.config["finetune"]
    assert a["chosen"]["lr"] == b["chosen"]["lr"] == 1e-2
    strip = lambda grid: [{k: v for k, v in p.items() if k != "train_wall_s"} for p in grid]  # noqa: E731
    assert strip(a["grid"]) == strip(b["grid"])  # the same held-out scores, epoch by epoch
    assert a["grid"][1]["heldout_score"] > a["grid"][0]["heldout_score"]
    assert plain.metrics["accuracy"] > 0.6 and flipped.metrics["accuracy"] == pytest.approx(
        1 - plain.metrics["accuracy"])  # the same dev predictions, scored against the opposite labels


def test_records_validate_and_hold_the_grid_the_choice_and_the_time(glue_dir, tiny_models, tmp_path):
    spec = _spec("stsb", tiny_models["pretraining"], glue_dir, tmp_path, poolings=["cls", "mean"], epochs=2)
    rep = runs.run(spec)
    assert [r.pooling for r in rep.written] == ["cls", "mean"]
    recs, problems = records.read_records([tmp_path / "stsb.jsonl"])
    assert problems == [] and len(recs) == 2
    rec = rep.written[0]
    ft = rec.config["finetune"]
    assert rec.regime == "finetune-small" and rec.n_train == 108 and rec.n_eval == 40
    assert rec.config["train_subset"] == "full train" and "squared-error" in ft["head"]
    assert [(p["lr"], p["batch_size"]) for p in ft["grid"]] == [(1e-4, 32), (3e-4, 32)]
    for point in ft["grid"]:
        assert len(point["heldout_per_epoch"]) == 2 and point["steps"] == 2 * 4 and point["train_wall_s"] > 0
        assert point["heldout_score"] == max(point["heldout_per_epoch"])
    best = max(ft["grid"], key=lambda p: p["heldout_score"])
    assert ft["chosen"]["lr"] == best["lr"] and ft["chosen"]["heldout_score"] == best["heldout_score"]
    assert ft["selected_on"] == "heldout_pearson" and ft["n_heldout"] == 12
    assert rec.wall_s >= ft["train_wall_s"]
    # its own run ids: the same cell under --regime finetune is another cell
    ident = regimes.get("finetune", TASKS["stsb"])
    other = runs.Run(runs.RunSpec(TASKS["stsb"], model=str(tiny_models["pretraining"]), data_dir=glue_dir,
                                  regime="finetune", epochs=2))
    assert records.run_id(ident.identity(other, runs.Cell("cls", -1, 0))) != rec.run_id
    again = runs.run(spec)
    assert again.written == [] and sorted(again.skipped) == sorted(r.run_id for r in rep.written)


def test_a_cell_killed_between_grid_points_resumes_with_the_point_it_finished(tiny_models, glue_dir, tmp_path,
                                                                              monkeypatch):
    from berteval import training

    spec = lambda out: _spec("mrpc", tiny_models["pretraining"], glue_dir, out, epochs=2)  # noqa: E731
    whole = runs.run(spec(tmp_path / "whole")).written[0]
    real, calls = training.train, []

    def killed_at_the_second_point(*args, **kwargs):
        calls.append(args[4].lr)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "train", killed_at_the_second_point)
    with pytest.raises(KeyboardInterrupt):
        runs.run(spec(tmp_path / "cut"))
    calls.clear()
    monkeypatch.setattr(training, "train", lambda *a, **k: (calls.append(a[4].lr), real(*a, **k))[1])
    resumed = runs.run(spec(tmp_path / "cut")).written[0]
    assert calls == [3e-4]  # the first point was not trained again
    assert resumed.run_id == whole.run_id and resumed.metrics == whole.metrics
    strip = lambda grid: [{k: v for k, v in p.items() if k != "train_wall_s"} for p in grid]  # noqa: E731
    assert strip(resumed.config["finetune"]["grid"]) == strip(whole.config["finetune"]["grid"])


def test_the_grid_its_pins_and_its_refusals(tiny_models, tiny_sst2, tmp_path, capsys):
    spec = _spec("sst2", tiny_models["pretraining"], tiny_sst2, tmp_path)
    assert finetune_small.grid(spec) == [{"lr": 1e-4, "batch_size": 32}, {"lr": 3e-4, "batch_size": 32}]
    assert finetune_small.grid(_spec("sst2", "m", tiny_sst2, tmp_path, lr=5e-5, batch_size=16)) == [
        {"lr": 5e-5, "batch_size": 16}]
    assert finetune_small.choose([{"heldout_score": 0.7}, {"heldout_score": 0.8}, {"heldout_score": 0.8}]) == 1
    impl = regimes.get("finetune-small", TASKS["sst2"])
    plain = impl.identity(runs.Run(spec), runs.Cell("mean", -1, 0))
    pinned = impl.identity(runs.Run(_spec("sst2", tiny_models["pretraining"], tiny_sst2, tmp_path, lr=1e-4)),
                           runs.Cell("mean", -1, 0))
    assert plain["grid"] != pinned["grid"] and plain["epochs"] == 4.0 and plain["protocol"] == "small-bert"
    with pytest.raises(BertevalError, match="--train-sizes"):
        runs.run(_spec("sst2", tiny_models["pretraining"], tiny_sst2, tmp_path, train_sizes=[32]))
    with pytest.raises(BertevalError, match="has no regime 'finetune-small'"):
        regimes.get("finetune-small", TASKS["squad"])
    assert cli.main(["ls"]) == 0
    assert "finetune-small" in capsys.readouterr().out
    json.dumps(plain)  # the identity is plain JSON (it is hashed into the run id)


def test_seed_0_searches_the_grid_and_the_other_seeds_train_its_choice(learnable_grid, tiny_models, tiny_sst2,
                                                                         tmp_path, monkeypatch):
    from berteval import training

    real, calls = training.train, []
    monkeypatch.setattr(training, "train", lambda *a, **k: (calls.append((a[4].seed, a[4].lr)), real(*a, **k))[1])
    model = tiny_models["pretraining"]
    both = runs.run(_spec("sst2", model, tiny_sst2, tmp_path / "both", seeds=[0, 1])).written
    assert calls == [(0, 1e-6), (0, 1e-2), (1, 1e-2)]  # 3 trainings, not 4
    zero, one = (r.config["finetune"] for r in both)
    assert zero["chosen"]["searched_at_seed"] == 0 and len(zero["grid"]) == 2
    assert one["chosen"]["searched_at_seed"] == 0 and [p["lr"] for p in one["grid"]] == [1e-2]
    assert one["chosen"]["lr"] == zero["chosen"]["lr"] == 1e-2
    # seed 1 alone, in a fresh results folder and cache: it makes seed 0's search itself, and seed 0's cell,
    # run after it, reuses those grid points instead of training them again
    calls.clear()
    monkeypatch.setenv("BERTEVAL_CACHE", str(tmp_path / "cache2"))
    alone = runs.run(_spec("sst2", model, tiny_sst2, tmp_path / "alone", seeds=[1])).written[0]
    assert calls == [(0, 1e-6), (0, 1e-2), (1, 1e-2)] and alone.run_id == both[1].run_id
    calls.clear()
    later = runs.run(_spec("sst2", model, tiny_sst2, tmp_path / "alone", seeds=[0])).written[0]
    assert calls == [] and later.run_id == both[0].run_id and later.metrics == both[0].metrics
