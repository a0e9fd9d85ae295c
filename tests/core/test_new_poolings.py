"""The poolings added for the ablations: first-last-avg and cls+mean on hand-built states,
attention pooling's semantics and training (fine-tune and the token-state probe), and the
probe's refusal when token states would not fit in memory."""

import numpy as np
import pytest
import torch

from berteval import models, pooling, records, runs
from berteval.errors import BertevalError
from berteval.heads import tokens
from berteval.pooling.attention import AttentionPooling
from berteval.heads.classifier import PooledClassifier
from berteval.tasks import get


def _states():
    torch.manual_seed(0)
    states = tuple(torch.randn(2, 4, 3) for _ in range(3))  # embeddings, layer 1, layer 2: (B, T, H) each
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    return states, mask


def test_first_last_avg_reads_the_first_transformer_layer_not_the_embeddings():
    states, mask = _states()
    got = pooling.apply("first-last-avg", states[-1], mask, None, states)
    by_hand = (states[1][1, :2].mean(0) + states[2][1, :2].mean(0)) / 2  # padding ignored, index 1 = first layer
    assert torch.allclose(got[1], by_hand)
    with_embeddings = (states[0][1, :2].mean(0) + states[2][1, :2].mean(0)) / 2
    assert pooling.FIRST_LAYER == 1 and not torch.allclose(got[1], with_embeddings)
    spec = pooling.POOLINGS["first-last-avg"]
    assert spec.needs_all_states and spec.last_layer_only and not spec.default


def test_cls_plus_mean_is_the_two_concatenated():
    states, mask = _states()
    got = pooling.apply("cls+mean", states[-1], mask, None)
    assert got.shape == (2, 6) and pooling.POOLINGS["cls+mean"].width(3) == 6
    assert torch.equal(got[:, :3], states[-1][:, 0])
    assert torch.allclose(got[1, 3:], states[-1][1, :2].mean(0))


def test_attention_starts_as_the_mean_ignores_padding_and_learns():
    states, mask = _states()
    hidden = states[-1]
    attn = AttentionPooling(3)
    assert torch.allclose(attn(hidden, mask), pooling.masked_mean(hidden, mask))  # zero query: uniform weights
    with torch.no_grad():
        attn.query.copy_(torch.tensor([1.0, -2.0, 0.5]))
    poisoned = hidden.clone()
    poisoned[1, 2:] = 1e6
    assert torch.allclose(attn(poisoned, mask), attn(hidden, mask))
    w = attn.weights(hidden, mask)
    assert torch.allclose(w.sum(1), torch.ones(2)) and torch.all(w[1, 2:] == 0)
    attn(hidden, mask).sum().backward()
    assert attn.query.grad is not None and attn.query.grad.abs().sum() > 0


def test_a_pooling_with_parameters_is_never_a_fixed_vector():
    states, mask = _states()
    assert pooling.POOLINGS["attention"].trained and not pooling.POOLINGS["mean"].trained
    with pytest.raises(BertevalError, match="parameters of its own"):
        pooling.apply("attention", states[-1], mask, None)


def test_fine_tune_head_trains_the_attention_query(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    torch.manual_seed(0)
    model = PooledClassifier(m.encoder, "attention", 2)
    assert "pool.query" in dict(model.named_parameters())
    batch = m.tokenizer(["good movie", "the plot was dull"], padding=True, return_tensors="pt")
    loss, logits = model(**batch, labels=torch.tensor([1, 0]))
    loss.backward()
    assert logits.shape == (2, 2) and model.pool.query.grad.abs().sum() > 0


def _spec(model_dir, data_dir, out, **kw):
    base = dict(task=get("sst2"), model=str(model_dir), seeds=[0], data_dir=data_dir, out=out, progress=False)
    base.update(kw)
    return runs.RunSpec(**base)


def test_new_poolings_run_as_probe_and_fine_tune(tiny_models, tiny_sst2, tmp_path):
    probe = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path,
                           poolings=["first-last-avg", "cls+mean", "attention"]))
    by = {r.pooling: r for r in probe.written}
    assert np.load(tmp_path / by["cls+mean"].config["head_file"])["weight"].shape == (1, 32)
    assert "head_file" not in by["attention"].config  # not an affine map of a fixed vector: nothing to serve
    att = by["attention"].config["probe"]
    assert len(att["heldout_accuracy_per_epoch"]) == 4 and att["selected_epoch"] in (1, 2, 3, 4)
    tuned = runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path, regime="finetune",
                           poolings=["first-last-avg", "attention"], epochs=1, batch_size=32))
    assert [(r.pooling, r.regime) for r in tuned.written] == [("first-last-avg", "finetune"),
                                                               ("attention", "finetune")]
    assert records.read_records([tmp_path / "sst2.jsonl"])[1] == []


def test_attention_probe_refused_when_token_states_do_not_fit(tiny_models, tiny_sst2, tmp_path, monkeypatch):
    monkeypatch.setattr(tokens, "available_memory", lambda: 10_000)
    with pytest.raises(BertevalError, match="held in memory.*--regime finetune"):
        runs.run(_spec(tiny_models["pretraining"], tiny_sst2, tmp_path, poolings=["attention"]))
    assert not (tmp_path / "sst2.jsonl").exists()
