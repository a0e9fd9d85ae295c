"""Issue 43's pair (`<base>+mlm-nsp-wiki`, `<base>+mlm-wiki`, berteval.derive.continued) on a tiny base and a
tiny synthetic Wikipedia: same examples and order, the masked-LM-only twin's pooler and NSP head exactly as
initialised, a killed run resuming to the same weights, the cue audit in derivation.json, loading by name.

The corpus is Wikipedia-style gzip JSON lines made of the tiny tokenizer's words (so the base's own
vocabulary reads them), beside a one-article SQuAD dev file; the base is a 2-layer, 16-wide BERT with 512
positions (the prepared examples are 128 and 512 tokens long).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import WORDS, save_tiny, tiny_config, write_wikipedia

from berteval import models
from berteval.derive import cli as command

OPTS = ("--steps", "8", "--batch-size", "4", "--warmup-steps", "2", "--eval-every", "4", "--checkpoint-every", "2",
        "--long-sequences", "20", "--rank", "2", "--lr", "1e-3")


def _sentence(rng) -> str:
    words = [w for w in WORDS if w != "."]
    return " ".join(rng.choice(words, int(rng.integers(5, 12)))).capitalize() + "."


@pytest.fixture(scope="module")
def wiki(tmp_path_factory) -> Path:
    """wikipedia/ (200 articles, one shard) and squad/dev-v1.1.json (two articles; one's title is in the text)."""
    rng = np.random.default_rng(3)
    dev = {title: " ".join(_sentence(rng) for _ in range(4)) for title in ("Dev one", "Dev two")}
    articles = []
    for k in range(200):
        paragraphs = [" ".join(_sentence(rng) for _ in range(int(rng.integers(3, 7))))
                      for _ in range(int(rng.integers(2, 5)))]
        title = "Dev one" if k == 5 else f"Article {k}"
        articles.append({"id": str(k), "url": "", "title": title, "text": "\n".join(paragraphs)})
    return write_wikipedia(tmp_path_factory.mktemp("wiki"), articles, dev)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A tiny BertModel with a pooler and 512 positions; its tokenizer is the vocabulary the examples reuse."""
    from transformers import BertModel, BertTokenizer

    folder = save_tiny(tmp_path_factory.mktemp("models") / "tiny512", "base")
    BertModel(tiny_config(max_position_embeddings=512)).save_pretrained(folder)
    BertTokenizer(vocab=str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def _derive(name, data, results, cache, *extra):
    args = command.parse([name, "--data-dir", str(data), "--out", str(results), "--no-progress", *OPTS, *extra])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTEVAL_CACHE", str(cache))
        return command.derive(args)


@pytest.fixture(scope="module")
def pair(tmp_path_factory, base, wiki):
    results, cache = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("cache")
    out = {v: _derive(f"{base}+{v}", wiki, results, cache) for v in ("mlm-nsp-wiki", "mlm-wiki")}
    assert all(rc == 0 for rc, _ in out.values()), out
    return results, cache, {v: o for v, (_, o) in out.items()}


def _record(results: Path, variant: str) -> dict:
    return json.loads((results / "encoders" / f"tiny512+{variant}" / "derivation.json").read_text())


def test_both_twins_train_on_the_same_examples_in_the_same_order(pair):
    results, _, _ = pair
    nsp, mlm = _record(results, "mlm-nsp-wiki"), _record(results, "mlm-wiki")
    assert nsp["examples"]["prepared"] == mlm["examples"]["prepared"]
    assert nsp["examples"]["vocabulary"]["trainer"] == "reused"  # the base's own WordPiece vocabulary
    for key in ("steps", "tokens_seen", "sequences_seen"):  # the same batches, step by step
        assert nsp["training"][key] == mlm["training"][key], key
    assert nsp["training"]["steps"] == 8 and nsp["training"]["tokens_seen"] > 0
    assert nsp["examples"]["text"]["excluded_squad_dev_title"] == ["Dev one"]
    # the same masked-LM targets: the MLM-only twin differs only by the NSP term
    assert nsp["training"]["first_loss"][1] == pytest.approx(mlm["training"]["first_loss"][1], abs=1e-3)
    assert mlm["training"]["first_loss"][0] == mlm["training"]["first_loss"][1]  # its loss is masked LM alone


def test_derivation_json_holds_the_cue_audit_curves_and_recipe(pair):
    results, _, _ = pair
    rec = _record(results, "mlm-nsp-wiki")
    assert "train128" in rec["cue_audit"] and "train512" in rec["cue_audit"]
    audit = rec["cue_audit"]["train128"]
    assert audit is not None and "classifier_5fold_accuracy" in audit
    assert rec["hyperparameters"]["tuning"] == "lora" and rec["training"]["loss_curve"]["step"][-1] == 8
    assert [e["step"] for e in rec["evaluations"]] == [4] and "heldout_512" in rec["final"]
    test = rec["deletion_test"]  # the NSP head, B's final "." deleted: the twins' test, in the record
    assert test["IsNext"]["as_given"]["n"] >= 1 and "stop_removed_drop_on_true_pairs" in test
    assert "deletion_test" not in _record(results, "mlm-wiki")  # its NSP head never trained


def test_the_mlm_only_twin_leaves_pooler_and_nsp_head_as_initialised(pair, base):
    from berteval.derive import continued
    from berteval.models import derived

    results, _, outcomes = pair
    hyper = _record(results, "mlm-wiki")["hyperparameters"]
    init = continued.base_model(str(base), 0, hyper).state_dict()
    for variant, same in (("mlm-wiki", True), ("mlm-nsp-wiki", False)):
        got = outcomes[variant].tensors
        for key in (*derived.POOLER_KEYS, *derived.NSP_KEYS):
            assert np.array_equal(got[key].numpy(), init[key].numpy()) == same, (variant, key)
    assert not np.array_equal(outcomes["mlm-wiki"].tensors["cls.predictions.bias"].numpy(),
                              init["cls.predictions.bias"].numpy())  # its MLM head did train


def test_both_resolve_by_name_with_honest_heads(pair, base, monkeypatch):
    results, _, _ = pair
    monkeypatch.setenv("BERTEVAL_RESULTS", str(results))
    models.identify.cache_clear()
    models.load.cache_clear()
    try:
        nsp, mlm = models.load(f"{base}+mlm-nsp-wiki"), models.load(f"{base}+mlm-wiki")
        assert nsp.heads.has_nsp_head and nsp.nsp_model is not None
        assert not mlm.heads.has_nsp_head and mlm.nsp_model is None and "untouched" in mlm.heads.derived_pooler
        plain = models.load(str(base)).encoder.state_dict()
        key = "encoder.layer.0.output.dense.weight"
        assert not np.array_equal(mlm.encoder.state_dict()[key].numpy(), plain[key].numpy())  # LoRA merged
    finally:
        models.identify.cache_clear()
        models.load.cache_clear()


@pytest.mark.parametrize("tuning", ["lora", "full"])
def test_a_killed_run_resumes_to_the_same_weights(tmp_path, base, wiki, pair, tuning):
    _, cache, outcomes = pair
    extra = ("--tuning", tuning)
    rc, whole = (0, outcomes["mlm-nsp-wiki"]) if tuning == "lora" else _derive(
        f"{base}+mlm-nsp-wiki", wiki, tmp_path / "a", cache, *extra)
    assert rc == 0
    assert _derive(f"{base}+mlm-nsp-wiki", wiki, tmp_path / "b", cache, *extra, "--stop-after-steps", "3")[0] == 3
    rc, resumed = _derive(f"{base}+mlm-nsp-wiki", wiki, tmp_path / "b", cache, *extra)
    assert rc == 0 and whole.tensors.keys() == resumed.tensors.keys()
    for key in whole.tensors:
        assert np.array_equal(whole.tensors[key].numpy(), resumed.tensors[key].numpy()), key
    rec = _record(tmp_path / "b", "mlm-nsp-wiki")
    assert rec["training"]["resumed_at_steps"] == [3] and rec["training"]["tuning"] == tuning
    if tuning == "full":  # the layers, in shards under the committed-file limit
        assert any(name.startswith("encoder-") for name in rec["artifacts"]["files"])


def _resume_files(folder: Path) -> dict:
    from safetensors.torch import load_file

    weights = {}
    for shard in sorted(folder.glob("*.safetensors")):
        weights.update(load_file(str(shard)))
    return weights


@pytest.mark.parametrize("tuning", ["lora", "full"])
def test_a_run_spans_machines_through_its_committed_resume_state(tmp_path, base, wiki, tuning):
    """--export-resume after 3 steps writes what trains (LoRA adapter or encoder layers, and heads; never the base's
    frozen embeddings), the tokenizer and the run state, each file under the committed-file limit; with the cache's
    checkpoint gone (a new machine), the same command resumes from that folder at step 3 (the frozen weights rebuilt
    from the base, Adam's moments restarted), finishes the schedule and says how it resumed."""
    import shutil

    import torch

    from berteval.derive import continued
    from berteval.errors import BertevalError

    name, out, cache = f"{base}+mlm-nsp-wiki", tmp_path / "results", tmp_path / "cache"
    extra = ("--tuning", tuning)
    with pytest.raises(BertevalError, match="no checkpoint to export"):  # nothing has run yet
        _derive(name, wiki, out, cache, *extra, "--export-resume")
    assert _derive(name, wiki, out, cache, *extra, "--stop-after-steps", "3")[0] == 3
    assert _derive(name, wiki, out, cache, *extra, "--export-resume")[0] == 0
    folder = out / "pretrain-resume" / "tiny512+mlm-nsp-wiki"
    state = json.loads((folder / "run_state.json").read_text())
    assert state["step"] == 3 and len(state["losses"]) == 3 and (folder / "tokenizer.json").is_file()
    assert all(f.stat().st_size <= 9_000_000 for f in folder.iterdir()) and not list(folder.glob("*.pt"))
    checkpoint = max((cache / "checkpoints" / "derive").glob("tiny512+mlm-nsp-wiki-*/run.pt"),
                     key=lambda f: f.stat().st_mtime)
    saved = torch.load(checkpoint, weights_only=False, map_location="cpu")["model"]
    weights = _resume_files(folder)
    trains = {n for n, p in continued.base_model(str(base), 0, {**continued_hyper(), "tuning": tuning})
              .named_parameters() if p.requires_grad}
    assert set(weights) == trains and not any("embeddings" in k for k in weights)
    assert all(torch.equal(weights[k], saved[k]) for k in weights)  # the step-3 weights, exactly
    shutil.rmtree(checkpoint.parent)  # the machine is lost: only the committed folder is left
    rc, _ = _derive(name, wiki, out, cache, *extra)
    assert rc == 0
    training = _record(out, "mlm-nsp-wiki")["training"]
    assert training["steps"] == 8 and training["resumed_at_steps"] == [3] and training["tuning"] == tuning
    segments = training["segments"]
    assert [s["resumed_from"] for s in segments] == ["start", "weights"] and segments[1]["from_step"] == 3
    assert segments[1]["from_tokens"] == state["tokens"]


def continued_hyper() -> dict:
    """The wiki pair's hyper-parameters with the tests' overrides (what `base_model` reads: tuning and LoRA's)."""
    from berteval.derive import CONTINUED

    return {**CONTINUED, "rank": 2}


def test_export_resume_is_refused_where_a_run_does_not_span_sessions(tmp_path, base):
    from berteval.errors import BertevalError

    for option in (("--export-resume",), ("--resume-weights", str(tmp_path))):
        with pytest.raises(BertevalError, match="span sessions"):
            command.derive(command.parse([f"{base}+random", "--out", str(tmp_path), *option]))


def test_the_tuning_comparison_runs_both_modes_on_one_budget(tmp_path, base, wiki):
    from berteval.derive import tuning_compare

    out = tmp_path / "comparison.json"
    assert tuning_compare.main(["--data-dir", str(wiki), "--base", str(base), "--cpu-seconds", "30",
                                "--eval-cpu-seconds", "1000", "--eval-sequences", "8", "--max-steps", "3",
                                "--batch-size", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    lora, full = result["modes"]
    assert (lora["tuning"], full["tuning"]) == ("lora", "full")
    assert lora["trainable_parameters"] > 0 and full["trainable_parameters"] > 0  # (tiny: rank 16 > width 16)
    for mode in (lora, full):  # a held-out point before the first step and one at the end, same examples
        assert [p["step"] for p in mode["curve"]] == [0, 3] and mode["curve"][0]["n"] <= 8
    assert lora["curve"][0]["mlm_loss"] == full["curve"][0]["mlm_loss"]  # the same start
    assert result["lower_heldout_mlm_loss"] in ("lora", "full")


def test_a_run_spanning_sessions_keeps_its_checkpoint_across_dtype_and_intervals(tmp_path, monkeypatch):
    """The Wikipedia-continued pair resumes over sessions on CPUs that differ (bf16 here, fp32 there) and with
    other evaluation or checkpoint intervals: none of these changes the weights, so none changes the key; the lr
    does. A one-session derivation keeps its old key (dtype included)."""
    from types import SimpleNamespace

    from berteval.derive.base import Context

    monkeypatch.setenv("BERTEVAL_CACHE", str(tmp_path))
    spec = SimpleNamespace(folder_name="x")
    hyper = {"lr": 1e-4, "eval_every": 250, "checkpoint_every": 50}

    def key(dtype="bf16", spans=True, **over):
        ctx = Context(spec, None, tmp_path, 0, {**hyper, **over}, dtype)
        return ctx.checkpoint_dir("rev", "examples", spans_sessions=spans)

    assert key() == key(dtype="fp32") == key(eval_every=100, checkpoint_every=10)
    assert key(lr=2e-4) != key()
    assert key(spans=False) != key(dtype="fp32", spans=False)
