"""Span QA read from one vector (berteval.qa.vector): positions as classes, training masks, one dev
pass for every pooling and seed, and run ids that leave the per-token probe's alone."""

import pytest
import torch

from berteval import records, runs
from berteval.errors import BertevalError
from berteval.features import encode_batch
from berteval.qa import vector
from berteval.qa.windows import Windows
from conftest import squad_spec


def test_head_chooses_among_positions_masked_to_context_and_cls():
    torch.manual_seed(0)
    head = vector.VectorSpanHead(width=4, max_length=6)
    start, end = head.logits(torch.randn(3, 4))
    assert start.shape == end.shape == (3, 6)
    windows = Windows(example_index=torch.zeros(1).long().numpy(), features=[{}],
                      offsets=[[None, None, (0, 3), (4, 6), None]])
    mask = vector.position_masks(windows, 6)
    assert mask.tolist() == [[True, False, True, True, False, False]]  # [CLS] = "not in this window", context
    vec = torch.randn(1, 4, requires_grad=True)
    loss = head(vec, mask, torch.tensor([2]), torch.tensor([3]))
    loss.backward()
    assert loss.item() > 0 and vec.grad.abs().sum() > 0  # the whole answer comes from the one vector


def test_one_vector_cells_records_and_one_dev_pass(tiny_models, tiny_squad_qa, tmp_path, monkeypatch):
    token = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "probe")).written[0]
    calls = []

    def counted(*args, **kw):
        calls.append(1)
        return encode_batch(*args, **kw)

    monkeypatch.setattr(vector.features, "encode_batch", counted)
    runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path / "one", "probe", poolings=["cls"]))
    one_cell = len(calls)  # one pass over the training windows and one over dev
    calls.clear()
    rep = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "probe", poolings=["cls", "mean"],
                         seeds=[0, 1]))
    assert len(calls) == one_cell  # four cells, still one pass each: every pooling and seed shares them
    assert [(r.pooling, r.seed) for r in rep.written] == [("cls", 0), ("cls", 1), ("mean", 0), ("mean", 1)]
    assert token.run_id not in {r.run_id for r in rep.written} and token.pooling == "span"
    assert rep.written[0].config["dev_vectors"].startswith("encoded")
    assert all(r.config["dev_vectors"].startswith("reused") for r in rep.written[1:])
    for r in rep.written:
        assert r.task == "squad" and r.regime == "probe" and set(r.metrics) == {"exact_match", "f1"}
        assert r.config["training"]["trained"].startswith("span head reading one pooled vector")
    assert records.read_records([tmp_path / "squad.jsonl"])[1] == []
    again = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "probe", poolings=["cls", "mean"],
                           seeds=[0, 1]))
    assert again.written == [] and len(again.skipped) == 4


def test_one_vector_head_refuses_what_it_cannot_read(tiny_models, tiny_squad_qa, tmp_path):
    for kw, match in ((dict(poolings=["attention"]), "parameters of its own"), (dict(poolings=["cls"], layers="1"),
                                                                                "drop --layers")):
        with pytest.raises(BertevalError, match=match):
            runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "probe", **kw))
    with pytest.raises(BertevalError, match=r"--regime finetune on squad .* drop --pooling \(--pooling is for --regime probe\)"):
        runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "finetune", poolings=["cls"]))
