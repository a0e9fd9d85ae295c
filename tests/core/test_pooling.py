"""Pooling semantics on hand-built tensors, and the pooler against the model's own."""

import numpy as np
import pytest
import torch

from berteval import models, pooling
from berteval.errors import BertevalError


def _batch():
    torch.manual_seed(0)
    hidden = torch.randn(2, 4, 3)  # (B, T, H)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])  # second example: 2 real tokens, 2 padding
    return hidden, mask


def test_cls_is_first_token():
    hidden, mask = _batch()
    assert torch.equal(pooling.apply("cls", hidden, mask, None), hidden[:, 0])


def test_mean_ignores_padding():
    hidden, mask = _batch()
    got = pooling.apply("mean", hidden, mask, None)
    assert torch.allclose(got[0], hidden[0].mean(0))
    assert torch.allclose(got[1], hidden[1, :2].mean(0))
    poisoned = hidden.clone()
    poisoned[1, 2:] = 1e6  # whatever sits in padding must not matter
    assert torch.allclose(pooling.apply("mean", poisoned, mask, None), got)


def test_max_ignores_padding():
    hidden, mask = _batch()
    poisoned = hidden.clone()
    poisoned[1, 2:] = 1e6
    got = pooling.apply("max", poisoned, mask, None)
    assert torch.allclose(got[1], hidden[1, :2].max(0).values)
    assert torch.allclose(got[0], hidden[0].max(0).values)


@pytest.mark.parametrize("name", [n for n, p in pooling.POOLINGS.items() if not p.separate])
def test_every_pooling_gives_one_vector_per_input(name, tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    batch = m.tokenizer(["good movie", "the plot was dull and very poor"], padding=True, return_tensors="pt")
    spec = pooling.POOLINGS[name]
    with torch.no_grad():
        out = m.encoder(**batch, output_hidden_states=spec.needs_all_states)
        module = spec.build(m.hidden_size) if spec.trained else None  # a pooling's own parameters
        vec = pooling.apply(name, out.last_hidden_state, batch["attention_mask"], m.encoder, out.hidden_states, module)
    assert vec.shape == (2, spec.width(m.hidden_size))


def test_pooler_is_tanh_dense_of_cls_and_matches_pooler_output(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    batch = m.tokenizer(["good movie", "bad film"], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = m.encoder(**batch)
        ours = pooling.apply("pooler", out.last_hidden_state, batch["attention_mask"], m.encoder)
        dense = m.encoder.pooler.dense
        by_hand = torch.tanh(out.last_hidden_state[:, 0] @ dense.weight.T + dense.bias)  # (B, H), from the weights
    assert torch.allclose(ours, by_hand, atol=1e-6)
    assert torch.allclose(ours, out.pooler_output)
    assert not torch.allclose(ours, out.last_hidden_state[:, 0], atol=1e-2)  # a projection, not the raw [CLS]


def test_parse_refuses_unknown_and_dedupes():
    assert pooling.parse("cls, mean,cls") == ["cls", "mean"]
    with pytest.raises(BertevalError, match="unknown pooling nope; choose from cls, pooler, mean, max"):
        pooling.parse("cls,nope")


def test_pooler_refused_without_real_pooler_weights(tiny_models):
    m = models.load(str(tiny_models["nopooler"]))
    assert m.heads.has_pooler and not m.heads.pooler_pretrained
    with pytest.raises(BertevalError, match="random pooler is not BERT's pooler"):
        pooling.check_available("pooler", m.heads)
    for other in ("cls", "mean", "max"):
        pooling.check_available(other, m.heads)


def test_pooler_refused_for_architecture_without_pooler(tiny_models):
    m = models.load(str(tiny_models["distilbert"]))
    assert not m.heads.has_pooler
    with pytest.raises(BertevalError, match="has none"):
        pooling.check_available("pooler", m.heads)


def test_a_new_pooling_is_one_registry_entry(tiny_models, tiny_sst2, tmp_path, monkeypatch):
    """Registering a pooling here, and nowhere else, is enough for the probe and the fine-tune."""
    from berteval import records, runs
    from berteval.tasks import get

    def cls_and_mean(x):
        return torch.cat([x.hidden[:, 0], pooling.masked_mean(x.hidden, x.mask)], dim=-1)  # (B, 2H)

    new = pooling.Pooling("cls-and-mean-test", cls_and_mean, "[CLS] and the mean, concatenated", width_factor=2,
                          default=False)
    monkeypatch.setitem(pooling.POOLINGS, new.name, new)
    common = dict(task=get("sst2"), model=str(tiny_models["pretraining"]), poolings=[new.name], seeds=[0],
                  data_dir=tiny_sst2, out=tmp_path, progress=False)
    probe = runs.run(runs.RunSpec(**common)).written
    tuned = runs.run(runs.RunSpec(**common, regime="finetune", epochs=1, batch_size=16)).written
    assert [(r.pooling, r.regime) for r in probe + tuned] == [(new.name, "probe"), (new.name, "finetune")]
    assert np.load(tmp_path / probe[0].config["head_file"])["weight"].shape == (1, 32)  # twice the hidden size
    assert records.read_records([tmp_path / "sst2.jsonl"])[1] == []
    assert new.name not in pooling.default_names()  # not in the default grid: asked for by name
