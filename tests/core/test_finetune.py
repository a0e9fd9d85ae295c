"""Fine-tune regime for classification: the encoder really trains, a killed run resumes from
its saved step, and the same seed gives the same record (tiny model, tiny data)."""

import pytest
import torch

from berteval import features, models, records, runs, training
from berteval.heads.classifier import Examples, PooledClassifier, collate_fn
from berteval.errors import BertevalError
from berteval.tasks import get


def _dataset(m, data_dir):
    train = get("sst2").load(data_dir).train
    enc = features.tokenise(m, train.texts, 32)
    return Examples({k: v for k, v in enc.items() if k != "offset_mapping"}, train.labels)


def _model(m, seed=0):
    import copy

    torch.manual_seed(seed)
    return PooledClassifier(copy.deepcopy(m.encoder), "mean", 2)


def test_a_few_steps_change_the_encoder_and_lower_the_loss(tiny_models, tiny_sst2):
    m = models.load(str(tiny_models["pretraining"]))
    ds = _dataset(m, tiny_sst2)
    model = _model(m)
    before = {k: v.detach().clone() for k, v in model.encoder.named_parameters()}
    cfg = training.TrainConfig(epochs=8, batch_size=16, lr=3e-3, warmup_ratio=0.0, dtype="fp32")
    res = training.train(model, ds, collate_fn(m.tokenizer, ds), lambda mm, b: mm(**b)[0], cfg, progress=False)
    unchanged = {k for k, v in model.encoder.named_parameters() if torch.equal(v, before[k])}
    # every encoder weight moved, not only the head; the pooler gets no gradient through mean pooling
    assert unchanged == {"pooler.dense.weight", "pooler.dense.bias"}
    assert sum(res.losses[-8:]) / 8 < sum(res.losses[:8]) / 8 - 0.01
    assert res.steps == 8 * 8 and res.examples_seen == 8 * 120


def test_a_killed_run_resumes_from_its_saved_step(tiny_models, tiny_sst2, tmp_path):
    m = models.load(str(tiny_models["pretraining"]))
    ds = _dataset(m, tiny_sst2)
    collate = collate_fn(m.tokenizer, ds)
    loss = lambda mm, b: mm(**b)[0]  # noqa: E731
    base = dict(epochs=2, batch_size=16, lr=1e-3, dtype="fp32", checkpoint_every=4)

    straight = _model(m)
    full = training.train(straight, ds, collate, loss, training.TrainConfig(**base), progress=False)

    ckpt = tmp_path / "ckpt"
    killed = _model(m)
    part = training.train(killed, ds, collate, loss,
                          training.TrainConfig(**base, checkpoint_dir=ckpt, stop_after_steps=5), progress=False)
    # the counters travel inside the checkpoint's folder, swapped in with the weights they describe
    assert part.steps == 5 and (ckpt / "state" / "progress.json").is_file() and not (ckpt / "progress.json").exists()
    resumed_model = _model(m, seed=123)  # a fresh process would rebuild the model from scratch
    resumed = training.train(resumed_model, ds, collate, loss, training.TrainConfig(**base, checkpoint_dir=ckpt),
                             progress=False)
    assert resumed.resumed_from_step == 5 and resumed.steps == full.steps == 16
    # The steps before the kill come back from the checkpoint (the record reports the whole run); only the
    # steps after it were run again.
    assert len(resumed.losses) == 16 and resumed.losses[:5] == part.losses
    assert resumed.examples_seen == full.examples_seen
    # The record's wall time and peak RSS are the whole run's: the killed process's part (to its checkpoint)
    # comes back from the progress file, beside this process's.
    assert [(s["from_step"], s["to_step"]) for s in resumed.segments] == [(0, 5), (5, 16)]
    assert resumed.wall_s == pytest.approx(sum(s["wall_s"] for s in resumed.segments))
    assert resumed.wall_s > resumed.segments[-1]["wall_s"] > 0
    assert resumed.peak_rss_mb == max(s["peak_rss_mb"] for s in resumed.segments) > 0
    assert [(s["from_step"], s["to_step"]) for s in full.segments] == [(0, 16)] and full.wall_s > 0
    for (k, a), (_, b) in zip(straight.state_dict().items(), resumed_model.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-5), k  # the same weights as the run that was never killed


@pytest.mark.parametrize("layout", ["killed-before-the-staged-rename", "killed-while-staging", "older-berteval"])
def test_a_checkpoint_cut_mid_swap_or_from_an_older_berteval_still_resumes(layout, tiny_models, tiny_sst2, tmp_path):
    """A kill between the swap's two renames leaves no state folder: the staged one is used when it is whole (its
    progress file is written last), else the previous one. An older berteval kept progress.json beside the
    folder: it is read from there once and moved in."""
    import shutil

    m = models.load(str(tiny_models["pretraining"]))
    ds = _dataset(m, tiny_sst2)
    collate = collate_fn(m.tokenizer, ds)
    loss = lambda mm, b: mm(**b)[0]  # noqa: E731
    base = dict(epochs=1, batch_size=16, lr=1e-3, dtype="fp32", checkpoint_every=4)
    ckpt = tmp_path / "ckpt"
    part = training.train(_model(m), ds, collate, loss,
                          training.TrainConfig(**base, checkpoint_dir=ckpt, stop_after_steps=5), progress=False)
    state = ckpt / "state"
    if layout == "killed-before-the-staged-rename":  # the last state had moved to .old, the staged one was whole
        shutil.copytree(state, ckpt / "state.old")
        state.rename(ckpt / "state.tmp")
    elif layout == "killed-while-staging":  # the staged folder has no progress file: the previous state is used
        state.rename(ckpt / "state.old")
        (ckpt / "state.tmp").mkdir()
        (ckpt / "state.tmp" / training.CHECKPOINT_WEIGHTS).write_bytes(b"half a file")
    else:
        (state / "progress.json").rename(ckpt / "progress.json")
    assert training.checkpoint_step(ckpt) == 5  # what the derivations' step log reads before training starts
    resumed = training.train(_model(m, seed=123), ds, collate, loss, training.TrainConfig(**base, checkpoint_dir=ckpt),
                             progress=False)
    assert resumed.resumed_from_step == 5 and resumed.losses[:5] == part.losses and resumed.steps == 8
    assert (state / "progress.json").is_file() and not (ckpt / "progress.json").exists()


def test_a_checkpoint_keeps_only_the_trained_weights_and_still_resumes_exactly(tiny_models, tiny_sst2, tmp_path):
    """A run with frozen weights (as LoRA's) saves only what trains: the frozen ones are the base model's, loaded
    again on restart. The resumed run ends with the never-killed run's weights; a checkpoint of another model
    is refused rather than half-loaded."""
    from safetensors.torch import load_file

    m = models.load(str(tiny_models["pretraining"]))
    ds = _dataset(m, tiny_sst2)
    collate = collate_fn(m.tokenizer, ds)
    loss = lambda mm, b: mm(**b)[0]  # noqa: E731
    base = dict(epochs=1, batch_size=16, lr=1e-3, dtype="fp32", checkpoint_every=4)

    def frozen(seed=0):
        model = _model(m, seed)
        for name, p in model.named_parameters():
            p.requires_grad = "encoder.layer.1." in name or not name.startswith("encoder.")
        return model

    straight = frozen()
    training.train(straight, ds, collate, loss, training.TrainConfig(**base), progress=False)
    ckpt = tmp_path / "ckpt"
    training.train(frozen(), ds, collate, loss, training.TrainConfig(**base, checkpoint_dir=ckpt, stop_after_steps=5),
                   progress=False)
    saved = set(load_file(str(ckpt / "state" / training.CHECKPOINT_WEIGHTS)))
    trained = {n for n, p in frozen().named_parameters() if p.requires_grad}
    assert saved == trained and len(saved) < len(frozen().state_dict())
    resumed_model = frozen(seed=123)
    resumed = training.train(resumed_model, ds, collate, loss, training.TrainConfig(**base, checkpoint_dir=ckpt),
                             progress=False)
    assert resumed.resumed_from_step == 5
    for (k, a), (_, b) in zip(straight.state_dict().items(), resumed_model.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-5), k
    other = _model(m)  # every weight trains: the checkpoint lacks most of them
    with pytest.raises(BertevalError, match="not this run's"):
        training.train(other, ds, collate, loss, training.TrainConfig(**base, checkpoint_dir=ckpt), progress=False)


def test_short_epochs_do_not_each_write_a_checkpoint_and_a_kill_still_resumes_exactly(tiny_models, tiny_sst2,
                                                                                       tmp_path, monkeypatch):
    """120 sentences in batches of 16: an epoch every 8 steps. With checkpoints every 64 steps, an epoch's end
    saves only when the last save is 16 or more steps back (a full state per short epoch cost more than the
    steps), and a run killed between saves resumes from the last one with the uninterrupted run's weights."""
    m = models.load(str(tiny_models["pretraining"]))
    ds = _dataset(m, tiny_sst2)
    collate = collate_fn(m.tokenizer, ds)
    loss = lambda mm, b: mm(**b)[0]  # noqa: E731
    base = dict(epochs=8, batch_size=16, lr=1e-3, dtype="fp32", checkpoint_every=64)
    score = lambda mm, epoch: float(epoch % 3)  # noqa: E731  model selection across epochs, as the fine-tune does
    straight = _model(m)
    training.train(straight, ds, collate, loss, training.TrainConfig(**base), progress=False, on_epoch_end=score)
    saves = []
    real = training._checkpoint
    monkeypatch.setattr(training, "_checkpoint",
                        lambda acc, cfg, step, res, seg: (saves.append(step), real(acc, cfg, step, res, seg)))
    ckpt = tmp_path / "ckpt"
    killed = _model(m)
    training.train(killed, ds, collate, loss, training.TrainConfig(**base, checkpoint_dir=ckpt, stop_after_steps=40),
                   progress=False, on_epoch_end=score)
    assert saves == [16, 32, 40]  # epoch ends at 8, 24 skipped (too recent); 40: the kill's own save
    resumed_model = _model(m, seed=123)
    resumed = training.train(resumed_model, ds, collate, loss, training.TrainConfig(**base, checkpoint_dir=ckpt),
                             progress=False, on_epoch_end=score)
    assert resumed.resumed_from_step == 40 and saves == [16, 32, 40, 56]  # 48 too recent; 64 is the last step
    for (k, a), (_, b) in zip(straight.state_dict().items(), resumed_model.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-5), k


def _spec(model_dir, data_dir, out, **kw):
    base = dict(task=get("sst2"), model=str(model_dir), regime="finetune", poolings=["cls", "mean"], seeds=[0],
                data_dir=data_dir, out=out, progress=False, epochs=2, batch_size=16, lr=1e-3)
    base.update(kw)
    return runs.RunSpec(**base)


def test_finetune_records_selection_and_determinism(tiny_models, tiny_sst2, tmp_path):
    a = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "a"))
    b = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "b"))
    assert [(r.run_id, r.metrics) for r in a.written] == [(r.run_id, r.metrics) for r in b.written]
    rec = a.written[1]
    assert rec.regime == "finetune" and rec.pooling == "mean" and rec.n_train == 108 and rec.n_eval == 40
    ft = rec.config["finetune"]
    assert len(ft["heldout_accuracy_per_epoch"]) == 2 and ft["selected_epoch"] in (1, 2)
    assert ft["heldout_accuracy_per_epoch"][ft["selected_epoch"] - 1] == max(ft["heldout_accuracy_per_epoch"])
    assert rec.paired_tests and rec.paired_tests[0]["other"]["pooling"] == "cls"
    assert records.read_records([tmp_path / "a" / "sst2.jsonl"])[1] == []
    again = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path / "a"))
    assert again.written == [] and len(again.skipped) == 2


def test_finetune_refuses_layers(tiny_models, tiny_sst2, tmp_path):
    import pytest

    with pytest.raises(BertevalError, match="drop --layers"):
        runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path, layers="-2"))


def test_the_fine_tuned_attention_query_gets_its_own_learning_rate():
    """The attention pooling's query starts at zero; at the encoder's rate it never moved (every fine-tuned
    attention record equalled mean). The fine-tune gives it QUERY_LR_SCALE x the rate; everything else keeps it."""
    import torch

    from berteval import training
    from berteval.pooling.attention import QUERY_LR_SCALE, AttentionPooling

    pool, linear = AttentionPooling(8), torch.nn.Linear(8, 2)
    pool.query.lr_scale = QUERY_LR_SCALE
    model = torch.nn.ModuleDict({"pool": pool, "head": linear})
    _, opt, _ = training._optimiser(model, training.TrainConfig(lr=1e-4), total=10)
    rates = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    assert rates[id(pool.query)] == pytest.approx(1e-4 * QUERY_LR_SCALE)
    assert rates[id(linear.weight)] == rates[id(linear.bias)] == pytest.approx(1e-4)


def test_the_selected_epochs_weights_are_written_whole_and_survive_a_kill(tmp_path):
    """best.pt (the weights of the best epoch so far) goes through the atomic writer, beside the checkpoint; a run
    killed after it and resumed ends on the same selected weights as a run never killed."""
    data = [{"x": torch.randn(4, generator=torch.Generator().manual_seed(i)), "y": torch.tensor(i % 2)}
            for i in range(40)]

    def collate(rows):
        return {"x": torch.stack([r["x"] for r in rows]), "y": torch.stack([r["y"] for r in rows])}

    def loss_fn(model, batch):
        return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])

    def fresh():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 2)

    def score(model, epoch):  # the first epoch scores best: its weights must be the ones kept
        return {1: 1.0, 2: 0.0, 3: 0.5}[epoch]

    cfg = lambda d, stop=None: training.TrainConfig(epochs=3, batch_size=8, lr=1e-2, dtype="fp32",  # noqa: E731
                                                    checkpoint_dir=d, checkpoint_every=3, stop_after_steps=stop)
    whole_model = fresh()
    whole = training.train(whole_model, data, collate, loss_fn, cfg(tmp_path / "a"), progress=False,
                           on_epoch_end=score)
    assert whole.best_epoch == 1
    training.train(fresh(), data, collate, loss_fn, cfg(tmp_path / "b", 7), progress=False, on_epoch_end=score)
    assert (tmp_path / "b" / "best.pt").is_file()
    assert not [p for p in (tmp_path / "b").rglob("*") if p.name.endswith(".tmp")]  # no temporary file left
    resumed_model = fresh()
    resumed = training.train(resumed_model, data, collate, loss_fn, cfg(tmp_path / "b"), progress=False,
                             on_epoch_end=score)
    assert resumed.resumed_from_step == 7 and resumed.best_epoch == 1 and resumed.epoch_scores == whole.epoch_scores
    for (k, a), (_, b) in zip(whole_model.state_dict().items(), resumed_model.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), k
