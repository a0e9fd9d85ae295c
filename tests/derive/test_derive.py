"""Derived encoders (`berteval.derive`, `berteval.models.derived`) on tiny models and tiny data.

Segment pairs follow BERT's rules (half IsNext, NotNext from another document, seeded), the
masking is BERT's 80/10/10 on 15% of the tokens, only train text is read, a derivation writes
artifacts + record that `models.load("<base>+<variant>")` applies exactly, a killed derivation
resumes to the same weights, and a missing or altered artifact is refused with what to run.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import WORDS, save_tiny

from berteval import models
from berteval.derive import RECIPES, text
from berteval.pretrain import masking, segments
from berteval.derive import cli as command
from berteval.errors import BertevalError
from berteval.models import derived
from berteval.nsp_pairs import IS_NEXT, NOT_NEXT

TINY_MAX = 64  # the tiny config's max_position_embeddings


def _squad(titles: list[str], rng: random.Random, marker: str = "") -> dict:
    words = [w for w in WORDS if w != "."]

    def sentence() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(4, 9))).capitalize() + "."

    def paragraph() -> str:
        return (marker + " " if marker else "") + " ".join(sentence() for _ in range(rng.randint(3, 6)))

    return {"version": "1.1", "data": [{"title": t, "paragraphs": [{"context": paragraph(), "qas": []}
                                                                   for _ in range(3)]} for t in titles]}


@pytest.fixture(scope="module")
def squad_dir(tmp_path_factory):
    """train-subset.json (4 articles) and dev-v1.1.json (2 other articles, every paragraph marked)."""
    root = tmp_path_factory.mktemp("data")
    (root / "squad").mkdir()
    rng = random.Random(0)
    (root / "squad" / "train-subset.json").write_text(json.dumps(_squad(["T0", "T1", "T2", "T3"], rng)))
    (root / "squad" / "dev-v1.1.json").write_text(json.dumps(_squad(["D0", "D1"], rng, marker="dull dull dull")))
    return root


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    """A tiny BertModel (pooler, no NSP head) whose tokenizer knows the tiny vocabulary."""
    from transformers import BertTokenizer

    folder = save_tiny(tmp_path_factory.mktemp("models") / "tiny", "base")
    # transformers 5's BertTokenizer takes the vocabulary as `vocab`; built with `vocab_file` it
    # knows only the special tokens and reads every word as [UNK].
    BertTokenizer(vocab=str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def _derive(name: str, data, results, cache, *extra: str):
    length = [] if name.endswith("+random") else ["--max-length", str(TINY_MAX)]
    args = command.parse([name, "--data-dir", str(data), "--out", str(results), "--no-progress", *length, *extra])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTEVAL_CACHE", str(cache))
        return command.derive(args)


NSP_OPTS = ("--dupe-factor", "3", "--epochs", "2", "--batch-size", "16")
MLM_OPTS = ("--dupe-factor", "4", "--batch-size", "8", "--rank", "4")


@pytest.fixture(scope="module")
def derivations(tmp_path_factory, tiny_base, squad_dir):
    """All three variants of the tiny base, derived once into one results root."""
    results = tmp_path_factory.mktemp("results")
    cache = tmp_path_factory.mktemp("derive-cache")
    out = {
        "nsp-pooler": _derive(f"{tiny_base}+nsp-pooler", squad_dir, results, cache, *NSP_OPTS),
        "mlm-nsp": _derive(f"{tiny_base}+mlm-nsp", squad_dir, results, cache, *MLM_OPTS),
        "random": _derive(f"{tiny_base}+random", squad_dir, results, cache),
    }
    assert all(rc == 0 for rc, _ in out.values()), out
    return results, {k: outcome for k, (_, outcome) in out.items()}


@pytest.fixture
def results_env(derivations, monkeypatch):
    """The loader reads the derivations' results root; no identity cached from another root."""
    monkeypatch.setenv("BERTEVAL_RESULTS", str(derivations[0]))
    models.identify.cache_clear()
    models.load.cache_clear()
    yield derivations
    models.identify.cache_clear()
    models.load.cache_clear()


# --- registry ------------------------------------------------------------------------------

def test_every_variant_has_a_recipe_and_a_loader():
    assert list(RECIPES) == list(derived.VARIANTS) == ["nsp-pooler", "mlm-nsp", "mlm-nsp-wiki", "mlm-wiki", "random"]


def test_names_parse_into_base_and_variant(tmp_path):
    spec = derived.parse("default+nsp-pooler")
    assert spec.base == "default" and spec.variant.suffix == "nsp-pooler" and spec.folder_name == "default+nsp-pooler"
    assert derived.parse("owner/name+random").folder_name == "owner--name+random"
    assert derived.parse("default") is None and derived.parse("bert-base-uncased") is None
    with pytest.raises(BertevalError, match="unknown derived encoder.*nsp-pooler"):
        derived.parse("default+nsp")
    folder = tmp_path / "odd+random"  # an existing folder is a folder, '+' or not
    folder.mkdir()
    assert derived.parse(str(folder)) is None


# --- segment pairs -------------------------------------------------------------------------

def _documents(n_docs: int = 5, seed: int = 0) -> list[list[list[int]]]:
    """Documents whose token ids count up, so contiguity and origin can be read off the ids."""
    rng = np.random.default_rng(seed)
    docs, next_id = [], 0
    for _ in range(n_docs):
        doc = []
        for _ in range(int(rng.integers(6, 30))):
            n = int(rng.integers(3, 15))
            doc.append(list(range(next_id, next_id + n)))
            next_id += n
        docs.append(doc)
    return docs


def _doc_of(token: int, docs) -> int:
    return next(d for d, doc in enumerate(docs) if doc[0][0] <= token <= doc[-1][-1])


def test_segment_pairs_follow_bert_rules():
    docs = _documents()
    instances, stats = segments.build(docs, max_length=512, dupe_factor=5, seed=0)  # long: nothing truncated
    labels = [x.label for x in instances]
    assert labels.count(IS_NEXT) == labels.count(NOT_NEXT) == len(instances) // 2  # exactly 50/50
    assert stats.truncated == 0 and stats.short_target > 0
    for x in instances:
        a, b = list(x.tokens_a), list(x.tokens_b)
        assert a and b
        assert a == list(range(a[0], a[0] + len(a)))  # A is contiguous text of one document
        assert b == list(range(b[0], b[0] + len(b)))
        assert _doc_of(a[0], docs) == x.doc and _doc_of(b[0], docs) == x.b_doc
        if x.label == IS_NEXT:
            assert x.b_doc == x.doc and b[0] == a[-1] + 1  # B is the actual next segment
        else:
            assert x.b_doc != x.doc  # NotNext: a segment of another document


def test_segment_pairs_fit_the_length_and_are_seeded():
    docs = _documents()
    instances, stats = segments.build(docs, max_length=32, dupe_factor=3, seed=1)
    assert max(x.length for x in instances) <= 32 and stats.truncated > 0
    again, _ = segments.build(docs, max_length=32, dupe_factor=3, seed=1)
    other, _ = segments.build(docs, max_length=32, dupe_factor=3, seed=2)
    assert segments.checksum(instances) == segments.checksum(again) != segments.checksum(other)
    ids, types = segments.encode(instances[0], 101, 102)
    assert ids[0] == 101 and ids.count(102) == 2 and types == [0] * (len(instances[0].tokens_a) + 2) + [1] * (
        len(instances[0].tokens_b) + 1)


def test_segment_pairs_need_two_documents():
    with pytest.raises(ValueError, match="two"):
        segments.build(_documents(1))


# --- masking -------------------------------------------------------------------------------

def test_masking_is_bert_80_10_10_on_15_percent():
    rng = np.random.default_rng(0)
    rule = masking.MaskingRule()
    random_ids = np.arange(1000, 2000)
    mask_id, chosen, kinds = 4, 0, np.zeros(3)
    maskable = 0
    for _ in range(400):
        ids = rng.integers(5000, 9000, size=100)
        ids[0], ids[50], ids[-1] = 101, 102, 102  # [CLS] ... [SEP] ... [SEP]
        candidates = ~np.isin(ids, [101, 102])
        out, labels = masking.mask_tokens(ids, candidates, rule, mask_id, random_ids, rng)
        sel = labels != masking.IGNORE
        assert not sel[~candidates].any()  # never [CLS] or [SEP]
        assert (labels[sel] == ids[sel]).all()  # the label is the original token
        assert (out[~sel] == ids[~sel]).all()  # nothing else changes
        chosen += sel.sum()
        maskable += candidates.sum()
        kinds += [(out[sel] == mask_id).sum(), np.isin(out[sel], random_ids).sum(), (out[sel] == ids[sel]).sum()]
    assert abs(chosen / maskable - 0.15) < 0.005
    share = kinds / chosen
    assert abs(share[0] - 0.8) < 0.03 and abs(share[1] - 0.1) < 0.02 and abs(share[2] - 0.1) < 0.02


def test_masking_caps_predictions_and_masks_at_least_one():
    rng = np.random.default_rng(0)
    rule = masking.MaskingRule(max_predictions=20)
    _, labels = masking.mask_tokens(np.arange(500), np.ones(500, bool), rule, 4, np.arange(10), rng)
    assert (labels != masking.IGNORE).sum() == 20
    _, labels = masking.mask_tokens(np.arange(3), np.ones(3, bool), rule, 4, np.arange(10), rng)
    assert (labels != masking.IGNORE).sum() == 1


def test_random_replacements_skip_special_and_unused_tokens():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(models.default_model_path()))
    ids = masking.replacement_ids(tok)
    assert not set(ids) & set(tok.all_special_ids)
    assert not any(t.startswith("[unused") for t in tok.convert_ids_to_tokens(ids[:2000].tolist()))


# --- training text -------------------------------------------------------------------------

def test_only_train_text_is_read(squad_dir):
    got = text.load(squad_dir)
    assert [a.title for a in got.articles] == ["T0", "T1", "T2", "T3"] and got.dev_checked
    assert not any("dull dull dull" in p for a in got.articles for p in a.paragraphs)


def test_train_text_shared_with_dev_is_refused(tmp_path, squad_dir):
    (tmp_path / "squad").mkdir()
    shutil.copy(squad_dir / "squad" / "train-subset.json", tmp_path / "squad" / "train-subset.json")
    shutil.copy(squad_dir / "squad" / "train-subset.json", tmp_path / "squad" / "dev-v1.1.json")
    with pytest.raises(BertevalError, match="dev text must never"):
        text.load(tmp_path)
    with pytest.raises(BertevalError, match="--data-dir"):
        text.load(None)


# --- derivations and loading ---------------------------------------------------------------

def test_nsp_pooler_artifacts_record_and_loading(results_env, tiny_base):
    results, outcomes = results_env
    name = f"{tiny_base}+nsp-pooler"
    folder = results / "encoders" / "tiny+nsp-pooler"
    record = json.loads((folder / "derivation.json").read_text())
    assert sorted(p.name for p in folder.iterdir()) == ["derivation.json", "heads.safetensors"]
    assert record["base"]["revision"] == models.identify(str(tiny_base)).revision
    assert record["pairs"]["is_next"] == record["pairs"]["not_next"] > 0
    assert record["data"]["articles"] == 4 and len(record["data"]["text_sha256"]) == 64
    assert record["training"]["steps"] == record["training"]["steps_total"] > 0
    assert {"first", "last", "mean"} <= set(record["training"]["loss"])
    assert "nsp_accuracy_train_all" in record["training"]
    assert record["versions"]["torch"] and record["git_commit"] and record["device"]

    loaded = models.load(name)
    assert loaded.model_id == f"{tiny_base.resolve()}+nsp-pooler" and loaded.source == "derived"
    assert loaded.revision.startswith(record["base"]["revision"] + " +nsp-pooler sha256:")
    assert models.identify(name).revision == loaded.revision
    heads = loaded.heads
    assert heads.has_nsp_head and loaded.nsp_model is not None and heads.pooler_kind == "nsp-trained"
    assert heads.derivation.endswith("derivation.json") and "NSP-trained by berteval derive" in heads.pooler_provenance
    trained = outcomes["nsp-pooler"].tensors
    state = loaded.nsp_model.state_dict()
    for key in (*derived.POOLER_KEYS, *derived.NSP_KEYS):
        assert torch.equal(state[key], trained[key])
    base = models.load(str(tiny_base))  # the encoder itself is the base's, unchanged
    for key, value in base.encoder.state_dict().items():
        if not key.startswith("pooler."):
            assert torch.equal(loaded.encoder.state_dict()[key], value)
    assert not torch.equal(state["bert.pooler.dense.weight"], base.encoder.state_dict()["pooler.dense.weight"])


def test_nsp_pooler_head_scores_pairs(results_env, tiny_base):
    from berteval.heads.nsp import pretrained_proba

    loaded = models.load(f"{tiny_base}+nsp-pooler")
    proba = pretrained_proba(loaded, [("the cat is fun.", "the dog was dull."), ("a movie.", "it rain.")],
                             max_length=TINY_MAX)
    assert proba.shape == (2, 2) and np.allclose(proba.sum(1), 1, atol=1e-5)
    # the NSP model's logits are the trained head on the trained pooler of the [CLS] state
    enc = loaded.tokenizer("the cat is fun.", "the dog was dull.", return_tensors="pt")
    with torch.inference_mode():
        cls_state = loaded.encoder(**enc).last_hidden_state[:, 0]
        by_hand = loaded.nsp_model.cls.seq_relationship(torch.tanh(loaded.encoder.pooler.dense(cls_state)))
        assert torch.allclose(loaded.nsp_model(**enc).logits, by_hand, atol=1e-6)


def test_mlm_nsp_artifacts_and_merged_loading(results_env, tiny_base):
    results, outcomes = results_env
    folder = results / "encoders" / "tiny+mlm-nsp"
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["adapter_config.json", "adapter_model.safetensors", "derivation.json", "heads.safetensors"]
    assert all((folder / f).stat().st_size < 5 * 2**20 for f in files)
    record = json.loads((folder / "derivation.json").read_text())
    assert record["masking"]["masked_share"] == pytest.approx(0.15, abs=0.03)
    assert "mlm_accuracy" in record["training"] and "nsp_accuracy" in record["training"]
    adapter_config = json.loads((folder / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == str(tiny_base.resolve())

    loaded = models.load(f"{tiny_base}+mlm-nsp")
    assert loaded.heads.pooler_kind == "nsp-trained" and loaded.nsp_model is not None
    trained = outcomes["mlm-nsp"].tensors
    state = loaded.nsp_model.state_dict()
    for key in (*derived.POOLER_KEYS, *derived.NSP_KEYS):
        assert torch.equal(state[key], trained[key])
    assert any(k.startswith("lora:") for k in trained)
    # the merged encoder equals base + the LoRA update: W + B A (alpha / r), layer by layer
    base = models.load(str(tiny_base)).encoder.state_dict()
    scale = record["hyperparameters"]["alpha"] / record["hyperparameters"]["rank"]
    query = "encoder.layer.0.attention.self.query"
    lora_a = next(v for k, v in trained.items() if f"{query}.lora_A" in k)
    lora_b = next(v for k, v in trained.items() if f"{query}.lora_B" in k)
    expected = base[f"{query}.weight"] + scale * lora_b @ lora_a
    assert torch.allclose(loaded.encoder.state_dict()[f"{query}.weight"], expected, atol=1e-6)
    assert not torch.equal(lora_b, torch.zeros_like(lora_b))  # training moved the adapter


def test_pretraining_objective_equals_bert_for_pretraining_loss(tiny_base):
    from transformers import BertForPreTraining

    from berteval.derive import mlm_nsp

    hyper = dict(RECIPES["mlm-nsp"].defaults, rank=4)
    objective = mlm_nsp.PretrainingObjective(mlm_nsp.pretraining_model(str(tiny_base), 0, hyper)).eval()
    reference = objective.model.get_base_model()
    assert isinstance(reference, BertForPreTraining)
    assert reference.cls.predictions.decoder.weight is reference.bert.embeddings.word_embeddings.weight  # tied
    ids = torch.tensor([[2, 9, 4, 11, 3, 12, 4, 3], [2, 13, 14, 3, 15, 3, 0, 0]])
    mask = (ids != 0).long()
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 0, 0]])
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[0, 6], labels[1, 2] = 10, 17, 14
    nsp = torch.tensor([0, 1])
    with torch.inference_mode():
        ours = objective(input_ids=ids, token_type_ids=types, attention_mask=mask, mlm_labels=labels, nsp_labels=nsp)
        theirs = reference(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels,
                           next_sentence_label=nsp)
    assert torch.allclose(ours["loss"], theirs.loss, atol=1e-5)
    trainable = {n for n, p in objective.named_parameters() if p.requires_grad}
    assert any("lora_A" in n for n in trainable) and any("bert.pooler." in n for n in trainable)
    assert any("cls.seq_relationship" in n for n in trainable) and any("transform.dense" in n for n in trainable)
    assert not any("word_embeddings" in n or ("lora" not in n and ".encoder.layer." in n) for n in trainable)


def test_random_control_is_regenerated_and_honestly_reported(results_env, tiny_base):
    results, outcomes = results_env
    folder = results / "encoders" / "tiny+random"
    assert sorted(p.name for p in folder.iterdir()) == ["derivation.json"]  # nothing to commit but the record
    record = json.loads((folder / "derivation.json").read_text())
    loaded = models.load(f"{tiny_base}+random")
    assert loaded.revision.endswith(f"+random weights-sha256:{record['weights_sha256'][:16]}")
    assert loaded.nsp_model is None and not loaded.heads.has_nsp_head
    assert loaded.heads.pooler_kind == "untrained" and loaded.heads.pooler_provenance.startswith("random")
    assert derived.state_sha256(loaded.encoder.state_dict()) == derived.state_sha256(
        {k[len("bert."):]: v for k, v in outcomes["random"].tensors.items() if k.startswith("bert.")})
    from berteval import pooling

    pooling.check_available("pooler", loaded.heads)  # the floor's pooler may be probed, with its caveat
    assert "random" in pooling.warning("pooler", loaded.heads)


def _tampered_results(results: Path, tmp_path: Path, name: str, edit) -> Path:
    """A copy of the results root whose derivation record of `name` went through `edit(record)`."""
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    record_file = copy / "encoders" / name / "derivation.json"
    record = json.loads(record_file.read_text())
    edit(record)
    record_file.write_text(json.dumps(record))
    return copy


def test_random_control_refuses_drifted_weights(results_env, tiny_base, tmp_path, monkeypatch):
    results, _ = results_env
    copy = _tampered_results(results, tmp_path, "tiny+random", lambda r: r.update(weights_sha256="0" * 64))
    monkeypatch.setenv("BERTEVAL_RESULTS", str(copy))
    models.identify.cache_clear()
    with pytest.raises(BertevalError, match="no longer reproduces"):
        models.load(f"{tiny_base}+random")


def test_task_models_sit_on_the_derived_encoder(results_env, tiny_base):
    from transformers import AutoModelForQuestionAnswering

    loaded = models.load(f"{tiny_base}+mlm-nsp")
    qa, missing = models.load_with_head(loaded, AutoModelForQuestionAnswering)
    assert all("qa_outputs" in k for k in missing) and missing
    for key, value in qa.base_model.state_dict().items():
        assert torch.equal(value, loaded.encoder.state_dict()[key])


def test_missing_or_altered_artifacts_are_refused(results_env, tiny_base, tmp_path, monkeypatch):
    results, _ = results_env
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    monkeypatch.setenv("BERTEVAL_RESULTS", str(copy))
    models.identify.cache_clear()
    with open(copy / "encoders" / "tiny+nsp-pooler" / "heads.safetensors", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(BertevalError, match="does not match the sha256.*python -m berteval.derive"):
        models.load(f"{tiny_base}+nsp-pooler")
    (copy / "encoders" / "tiny+mlm-nsp" / "adapter_model.safetensors").unlink()
    with pytest.raises(BertevalError, match="adapter_model.safetensors is missing.*python -m berteval.derive"):
        models.identify(f"{tiny_base}+mlm-nsp")
    shutil.rmtree(copy / "encoders")
    with pytest.raises(BertevalError, match="not available.*python -m berteval.derive .*\\+random"):
        models.load(f"{tiny_base}+random")


def test_derived_from_another_base_revision_is_refused(results_env, tiny_base, tmp_path, monkeypatch):
    results, _ = results_env
    copy = _tampered_results(results, tmp_path, "tiny+nsp-pooler",
                             lambda r: r["base"].update(revision="sha256:something-else"))
    monkeypatch.setenv("BERTEVAL_RESULTS", str(copy))
    models.identify.cache_clear()
    with pytest.raises(BertevalError, match="derived from base revision"):
        models.identify(f"{tiny_base}+nsp-pooler")


@pytest.mark.parametrize("variant, opts", [("nsp-pooler", NSP_OPTS), ("mlm-nsp", MLM_OPTS)])
def test_a_killed_derivation_resumes_to_the_same_weights(derivations, tiny_base, squad_dir, tmp_path, variant, opts):
    _, outcomes = derivations
    name = f"{tiny_base}+{variant}"
    results, cache = tmp_path / "results", tmp_path / "cache"
    rc, stopped = _derive(name, squad_dir, results, cache, *opts, "--stop-after-steps", "2")
    assert rc == command.STOPPED and stopped.steps == 2 < stopped.steps_total
    assert not (results / "encoders" / f"tiny+{variant}").exists()  # no half encoder
    rc, resumed = _derive(name, squad_dir, results, cache, *opts)
    assert rc == 0 and resumed.steps == stopped.steps_total
    uninterrupted = outcomes[variant].tensors
    assert set(resumed.tensors) == set(uninterrupted)
    for key, value in uninterrupted.items():
        assert torch.allclose(resumed.tensors[key], value, atol=1e-6), key
    record = json.loads((results / "encoders" / f"tiny+{variant}" / "derivation.json").read_text())
    assert record["training"]["resumed_from_step"] == 2
    assert record["training"]["steps"] == stopped.steps_total
    assert len(record["training"]["curve"]["step"]) == min(50, stopped.steps_total)
    assert not stopped.checkpoint.exists()  # cleared once the artifacts are written


def test_existing_derivation_is_kept_unless_forced(derivations, tiny_base, squad_dir, capsys):
    results, _ = derivations
    record = results / "encoders" / "tiny+random" / "derivation.json"
    before = record.read_text()
    rc, outcome = _derive(f"{tiny_base}+random", squad_dir, results, results.parent / "c2")
    assert rc == 0 and outcome is None and "already derived" in capsys.readouterr().out
    assert record.read_text() == before


def test_command_refusals(tiny_base, squad_dir, tmp_path):
    with pytest.raises(BertevalError, match="not a derived name"):
        _derive(str(tiny_base), squad_dir, tmp_path, tmp_path)
    with pytest.raises(BertevalError, match="does not apply"):
        _derive(f"{tiny_base}+random", squad_dir, tmp_path, tmp_path, "--rank", "4")
    with pytest.raises(BertevalError, match="exceeds the model's 64 positions"):
        args = command.parse([f"{tiny_base}+nsp-pooler", "--data-dir", str(squad_dir), "--out", str(tmp_path)])
        command.derive(args)
    assert command.main([f"{tiny_base}+nsp", "--out", str(tmp_path)]) == 2


def test_pooler_kinds_of_plain_checkpoints(tiny_models):
    kinds = {k: models.load(str(tiny_models[k])).heads.pooler_kind for k in tiny_models}
    assert kinds == {"pretraining": "nsp-trained", "nopooler": "untrained", "distilbert": "absent",
                     "base": "trained-unknown"}
    assert set(kinds.values()) <= set(models.POOLER_KINDS)


def test_offline_names_list_committed_derivations(tmp_path):
    (tmp_path / "encoders" / "default+random").mkdir(parents=True)
    (tmp_path / "encoders" / "default+random" / "derivation.json").write_text("{}")
    assert derived.offline_names(tmp_path) == ["default+random"]


def test_the_derive_verb_is_light_until_it_runs():
    import subprocess
    import sys

    from conftest import REPO

    code = ("import argparse, sys, berteval.derive as d; d.add_arguments(argparse.ArgumentParser()); "
            "heavy = [m for m in ('torch', 'transformers', 'datasets') if m in sys.modules]; assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
