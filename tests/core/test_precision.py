"""bf16 for frozen inference runs on a bf16 copy of the weights; training and its evaluation keep autocast.

The copy must be close to fp32, made once and reused, never touch the fp32 original (which may
train next), and be named in cache keys and run ids, while every fp32 key and id, and the ids of
the committed bf16 fine-tunes (trained, so still autocast), stay exactly as they were.
"""

import copy
import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from berteval import features, models, precision, records
from berteval.errors import BertevalError
from berteval.qa import inference as qa
from berteval.qa.windows import make_windows
from berteval.regimes.base import Cell
from berteval.regimes.finetune import PooledFinetune
from berteval.regimes.probe import PooledProbe
from berteval.regimes.span import SpanFinetune, SpanProbe
from berteval.tasks import get
from conftest import REPO

RESULTS = REPO / "leaderboard" / "results"
TEXTS = ["good movie", "the plot was very dull and the acting poor", "fun", "it is a fine film .", "bad"]


def _fresh(tiny_models) -> models.LoadedModel:
    """The tiny model with an encoder of its own: `models.load` is cached, and these tests train or count copies."""
    m = models.load(str(tiny_models["pretraining"]))
    return dataclasses.replace(m, encoder=copy.deepcopy(m.encoder))


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_bf16_vectors_are_close_to_fp32_at_every_layer_and_pooling(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    kw = dict(data_sha256="p", poolings=["cls", "pooler", "mean", "max"], layers=[-1, 1], use_cache=False,
              progress=False)
    f32, b16 = features.encode(m, TEXTS, dtype="fp32", **kw).vectors, features.encode(m, TEXTS, dtype="bf16", **kw).vectors
    assert set(f32) == set(b16)
    for key in f32:
        assert b16[key].dtype == np.float32
        assert _cos(f32[key], b16[key]).min() > 0.99, key


def test_the_fp32_original_stays_fp32_and_trainable_and_a_stale_copy_is_remade(tiny_models):
    m = _fresh(tiny_models)
    before = {k: v.clone() for k, v in m.encoder.state_dict().items()}
    features.encode(m, TEXTS, data_sha256="t", poolings=["mean"], dtype="bf16", use_cache=False, progress=False)
    twin = precision.bf16_copy(m.encoder)
    assert {p.dtype for p in twin.parameters()} == {torch.bfloat16} and not any(p.requires_grad for p in twin.parameters())
    assert all(p.dtype == torch.float32 and p.requires_grad for p in m.encoder.parameters())
    assert all(torch.equal(before[k], v) for k, v in m.encoder.state_dict().items())  # untouched, bit for bit
    # one training step on the original works (its tensors are ordinary, with gradients) ...
    m.encoder.train()
    batch = dict(m.tokenizer(TEXTS, padding=True, return_tensors="pt"))
    opt = torch.optim.SGD(m.encoder.parameters(), lr=0.1)
    m.encoder(**batch).last_hidden_state.pow(2).mean().backward()
    opt.step()
    # ... and the copy made before it is stale: the next bf16 call remakes it from the trained weights
    fresh = precision.bf16_copy(m.encoder)
    assert fresh is not twin
    w = m.encoder.embeddings.word_embeddings.weight
    assert torch.equal(fresh.embeddings.word_embeddings.weight, w.detach().to(torch.bfloat16))


def test_the_copy_is_made_once_per_module_and_reused(tiny_models, monkeypatch):
    m = _fresh(tiny_models)
    made = []
    real = copy.deepcopy
    monkeypatch.setattr(precision.copy, "deepcopy", lambda obj, memo=None: made.append(obj) or real(obj, memo))
    kw = dict(data_sha256="r", poolings=["cls", "mean"], dtype="bf16", use_cache=False, progress=False)
    features.encode(m, TEXTS, max_tokens=8, **kw)  # several batches
    features.encode(m, TEXTS, **kw)
    assert sum(obj is m.encoder for obj in made) == 1  # (deepcopy recurses: its inner calls are counted too)
    assert precision.bf16_copy(m.encoder) is precision.bf16_copy(m.encoder)


def test_qa_windows_on_bf16_weights_stay_close_and_leave_the_model_fp32(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    model = qa.head_model(m)
    windows = make_windows(m.tokenizer, ["what was the plot"], ["the movie was good and the plot was very dull ." * 3],
                           max_length=32, doc_stride=8)
    s32, e32 = qa.window_logits(model, m.tokenizer, windows, dtype="fp32")
    for how in (precision.FROZEN, precision.MIXED):
        s16, e16 = qa.window_logits(model, m.tokenizer, windows, dtype="bf16", how=how)
        for a, b in zip(s16 + e16, s32 + e32):
            assert a.dtype == np.float32 and np.abs(a - b).max() < 0.05 * max(1.0, np.abs(b).max())
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_running_refuses_unknown_dtypes_and_paths(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    with pytest.raises(BertevalError, match="unknown dtype"):
        with precision.running(m.encoder, "fp16"):
            pass
    with pytest.raises(BertevalError, match="unknown precision path"):
        with precision.running(m.encoder, "bf16", "int8"):
            pass
    with precision.running(m.encoder, "fp32") as same:  # fp32: the module itself, whatever the path
        assert same is m.encoder


# --- identity: cache keys and run ids --------------------------------------------------------------------


def test_fp32_cache_keys_are_as_before_and_bf16_weights_get_their_own(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    before = {"format": features.FEATURE_FORMAT, "model": m.model_id, "revision": m.revision, "data": "d",
              "max_length": 128}  # the key's fields before bf16 weights existed

    def old_key(dtype):
        import hashlib

        return hashlib.sha256(json.dumps({**before, "dtype": dtype}, sort_keys=True).encode()).hexdigest()[:24]

    assert features.key_fields(m, "d", 128, "fp32") == {**before, "dtype": "fp32"}
    assert features.feature_key(m, "d", 128, "fp32") == old_key("fp32")
    assert features.key_fields(m, "d", 128, "bf16") == {**before, "dtype": "bf16", "bf16": "weights"}
    assert features.feature_key(m, "d", 128, "bf16") != old_key("bf16")  # never served the autocast vectors
    assert features.feature_key(m, "d", 128, "bf16", precision.MIXED) == old_key("bf16")  # which autocast still names


def _records(task: str) -> list[dict]:
    return [json.loads(line) for line in (RESULTS / f"{task}.jsonl").read_text().splitlines() if line.strip()]


def _one(task: str, **want) -> dict:
    return next(r for r in _records(task) if all(r.get(k) == v for k, v in want.items())
                and "train_size" not in r["config"])


def _stub_run(rec: dict, dtype: str, regime_cls, monkeypatch, n_train: int, **spec):
    """What a regime's identity reads, from a committed record: the model, task, data checksum and sizes."""
    task = get(rec["task"])
    monkeypatch.setattr(regime_cls, "splits", lambda self, run: ([None] * n_train, None, rec["data_sha256"]))
    fields = dict(dtype=dtype, regime=rec["regime"], limit_train=None, train_sizes=None, epochs=None, lr=None,
                  batch_size=None, doc_stride=None, n_best=None, max_answer_length=None, poolings=None, layers=None)
    return SimpleNamespace(spec=SimpleNamespace(**{**fields, **spec}), task=task, max_length=task.max_length,
                           identity=SimpleNamespace(model_id=rec["model"], revision=rec["model_revision"]))


def test_a_committed_fp32_probe_keeps_its_run_id_and_its_bf16_twin_gets_a_new_one(monkeypatch):
    rec = _one("sst2", regime="probe", dtype="fp32", pooling="mean", seed=0, layer=-1,
               model="sentence-transformers/all-MiniLM-L6-v2")
    cell = Cell("mean", -1, 0)
    fp32 = PooledProbe().identity(_stub_run(rec, "fp32", PooledProbe, monkeypatch,
                                            rec["config"]["train_examples_available"]), cell)
    assert records.run_id(fp32) == rec["run_id"]
    bf16 = PooledProbe().identity(_stub_run(rec, "bf16", PooledProbe, monkeypatch,
                                            rec["config"]["train_examples_available"]), cell)
    assert bf16 == {**fp32, "dtype": "bf16", "bf16": "weights"}


def test_committed_bf16_fine_tunes_keep_their_run_ids(monkeypatch):
    """Trained, so still autocast: the fine-tune records in bf16 are what these commands produce."""
    sst2 = _one("sst2", regime="finetune", dtype="bf16", pooling="cls", seed=0)
    run = _stub_run(sst2, "bf16", PooledFinetune, monkeypatch, sst2["config"]["train_examples_available"])
    assert records.run_id(PooledFinetune().identity(run, Cell("cls", -1, 0))) == sst2["run_id"]
    squad = _one("squad", regime="finetune", dtype="bf16", seed=0)
    run = _stub_run(squad, "bf16", SpanFinetune, monkeypatch, squad["n_train"])
    assert records.run_id(SpanFinetune().identity(run, Cell("span", -1, 0))) == squad["run_id"]


def test_the_autocast_squad_probe_record_is_not_what_bf16_weights_produce(monkeypatch):
    """The committed frozen bf16 record (per-token SQuAD probe) was autocast: its id stays its own."""
    rec = _one("squad", regime="probe", dtype="bf16", pooling="span", seed=0)
    assert rec["run_id"] == "cd2fdef58671e91e"
    ident = SpanProbe().identity(_stub_run(rec, "bf16", SpanProbe, monkeypatch, rec["n_train"]), Cell("span", -1, 0))
    assert ident.pop("bf16") == "weights" and records.run_id(ident) == rec["run_id"]  # the old id, less the path
