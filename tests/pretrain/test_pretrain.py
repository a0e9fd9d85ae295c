"""Pre-training from scratch (`python -m berteval pretrain`): the text filter, the pairs, the
cache, the run (resume, twins) and the published checkpoint, on a tiny synthetic corpus.

The corpus is written on the fly as Wikipedia-style gzip JSON lines beside a two-article
SQuAD dev file, so every rule (dev titles out, articles holding an NSP dev sentence out,
1% held out) is checked on known articles; the model is a 2-layer, 32-wide BERT.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from berteval import cli
from conftest import write_wikipedia

WORDS = ("river city music science history people world water light stone night garden market school "
         "bridge forest mountain island winter summer village station library theatre harbour castle tower "
         "painting language animal engine").split()


def _sentence(rng, n_words: int) -> str:
    return " ".join(rng.choice(WORDS, n_words)).capitalize() + "."


DEV_A = ["The quiet harbour held many small boats in winter.", "Fishermen mended their nets along the stone wall."]
DEV_B = ["The old library kept maps of every island nearby.", "Scholars came from far away to read them slowly."]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A data dir: wikipedia/ (40 articles in two shards) and squad/dev-v1.1.json (two articles)."""
    rng = np.random.default_rng(0)
    articles = []
    for k in range(40):
        paragraphs = [" ".join(_sentence(rng, int(rng.integers(7, 16))) for _ in range(int(rng.integers(3, 7))))
                      for _ in range(int(rng.integers(2, 6)))]
        articles.append({"id": str(k), "url": "", "title": f"Article {k}", "text": "\n".join(["Heading.", *paragraphs])})
    articles[3]["title"] = "Harbour town"  # a dev title (spelled with a space): excluded by title
    articles[7]["text"] += "\n" + "Some say that " + DEV_B[0] + " Nobody knows why this would be so."  # by sentence
    dev = {"Harbour_town": " ".join(DEV_A), "Old library": " ".join(DEV_B)}
    return write_wikipedia(tmp_path_factory.mktemp("data"), articles, dev, shards=2, bad_line=True)


TINY = ["--vocab-size", "120", "--hidden-size", "32", "--layers", "2", "--heads", "2", "--intermediate-size", "64",
        "--long-sequences", "40", "--tiny-sequences", "200", "--tiny-batch-size", "4", "--steps", "12",
        "--batch-size", "4", "--long-batch-size", "2", "--warmup-steps", "2", "--eval-every", "6", "--checkpoint-every", "4", "--threads", "1", "--lr", "3e-3"]


def _pretrain(name, corpus, out, *extra):
    return cli.main(["pretrain", name, "--data-dir", str(corpus), "--out", str(out), "--no-progress", *TINY, *extra])


def test_text_filter_removes_dev_titles_and_dev_sentences(corpus, capsys):
    from berteval.pretrain import wikipedia

    text = wikipedia.load(corpus, seed=0, log=lambda *a: None)
    titles = {a.title for a in text.train + text.heldout}
    assert "Harbour town" not in titles and "Article 7" not in titles
    assert text.record["excluded_squad_dev_title"] == ["Harbour town"]
    assert text.record["excluded_nsp_dev_sentence"]["articles"] == 1
    assert text.record["bad_lines"] == 1 and "enwiki-2015-prefix-ab.jsonl.gz:21" in capsys.readouterr().err
    assert len(text.heldout) == 2 and len(text.train) == 36  # 1% of 38, at least two (NotNext needs another)


def test_notnext_b_carries_no_length_cue():
    """With match_length, B's length has the same distribution under both labels; the old rule ran short."""
    from berteval.pretrain import segments

    rng = np.random.default_rng(1)
    docs = [[list(range(int(rng.integers(4, 30)))) for _ in range(int(rng.integers(1, 40)))] for _ in range(300)]

    def b_lengths(match):
        stats = segments.SegmentStats()
        pairs = list(segments._one_pass(docs, 125, 0.1, np.random.default_rng(0), stats, match_length=match))
        return {lab: np.mean([len(p.tokens_b) for p in pairs if p.label == lab]) for lab in (0, 1)}

    matched, legacy = b_lengths(True), b_lengths(False)
    assert abs(matched[0] - matched[1]) / matched[0] < 0.03
    assert abs(legacy[0] - legacy[1]) / legacy[0] > 0.05  # the cue the old rule left (stubs, lone last sentences)


def test_twins_pretrain_publish_and_load(corpus, tmp_path, monkeypatch):
    from transformers import AutoModelForNextSentencePrediction, AutoModelForPreTraining, pipeline

    from berteval import models
    from berteval.pretrain import loop
    from berteval.models import pretrained

    monkeypatch.setenv("BERTEVAL_RESULTS", str(tmp_path))
    assert _pretrain("wiki-bert-mini", corpus, tmp_path) == 0
    assert _pretrain("wiki-bert-mini-nonsp", corpus, tmp_path) == 0
    nsp_dir, control_dir = pretrained.folder("wiki-bert-mini", tmp_path), pretrained.folder("wiki-bert-mini-nonsp",
                                                                                             tmp_path)
    rec = json.loads((nsp_dir / "derivation.json").read_text())
    assert rec["training"]["steps"] == 12 and rec["training"]["tokens_seen"] > 0
    # three phases in order: 32-token pairs (3 steps of 4), 128 (8 of 4), 512 (1 of 2)
    assert (rec["schedule"]["tiny_steps"], rec["schedule"]["short_steps"], rec["schedule"]["long_steps"]) == (3, 8, 1)
    assert rec["examples"]["sequences"]["train32"]["max_length"] == 32
    assert rec["examples"]["text"]["excluded_nsp_dev_sentence"]["articles"] == 1
    assert [e["step"] for e in rec["evaluations"]] == [6, 12] and "heldout_512" in rec["final"]
    # what the NSP head learned, by editing B (the control's head never trained: no such test in its record)
    assert rec["deletion_test"]["IsNext"]["as_given"]["n"] >= 1 and "stop_removed_drop_on_true_pairs" in rec[
        "deletion_test"]
    assert "deletion_test" not in json.loads((control_dir / "derivation.json").read_text())
    for f in rec["files"].values():
        assert f["bytes"] < 9_000_000
    model, info = AutoModelForNextSentencePrediction.from_pretrained(str(nsp_dir), output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"]
    fill = pipeline("fill-mask", model=str(nsp_dir))
    assert len(fill("the river [MASK] the city .")) == 5
    # Same examples, order and initialisation: the control's pooler and NSP head are exactly the initial ones.
    twin = AutoModelForPreTraining.from_pretrained(str(control_dir))
    hyper = {**rec["hyperparameters"], "mlm_bias_init": "zero"}  # the output bias is set after the seeded init
    init = loop.build_model(hyper, twin.config.vocab_size, 0).state_dict()
    trained = twin.state_dict()
    for key in ("bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.seq_relationship.weight"):
        assert np.array_equal(trained[key].numpy(), init[key].numpy()), key
    assert not np.array_equal(trained["bert.encoder.layer.0.output.dense.weight"].numpy(),
                              init["bert.encoder.layer.0.output.dense.weight"].numpy())
    assert json.loads((control_dir / "derivation.json").read_text())["examples"]["prepared"] == rec["examples"][
        "prepared"]
    # berteval's loader: the named twins resolve offline; the control's NSP head is reported as absent.
    models.identify.cache_clear()
    models.load.cache_clear()
    a, b = models.load("wiki-bert-mini"), models.load("wiki-bert-mini-nonsp")
    assert a.heads.has_nsp_head and a.heads.pooler_kind == "nsp-trained" and a.model_id == "berteval/wiki-bert-mini"
    assert not b.heads.has_nsp_head and b.nsp_model is None and b.heads.pooler_kind == "untrained"
    models.identify.cache_clear()
    models.load.cache_clear()


def test_a_killed_pretraining_resumes_to_the_same_weights(corpus, tmp_path):
    from safetensors.torch import load_file

    def weights(folder):
        return {k: v for f in sorted(folder.glob("model*.safetensors")) for k, v in load_file(str(f)).items()}

    assert _pretrain("wiki-bert-mini", corpus, tmp_path / "a") == 0
    assert _pretrain("wiki-bert-mini", corpus, tmp_path / "b", "--stop-after-steps", "5") == 3
    assert _pretrain("wiki-bert-mini", corpus, tmp_path / "b") == 0
    wa = weights(tmp_path / "a" / "encoders" / "wiki-bert-mini")
    wb = weights(tmp_path / "b" / "encoders" / "wiki-bert-mini")
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)
    rb = json.loads((tmp_path / "b" / "encoders" / "wiki-bert-mini" / "derivation.json").read_text())
    ra = json.loads((tmp_path / "a" / "encoders" / "wiki-bert-mini" / "derivation.json").read_text())
    assert rb["training"]["resumed_at_steps"] == [5]
    for key in ("tokens_seen", "sequences_seen", "first_loss", "loss_curve"):
        assert rb["training"][key] == ra["training"][key], key


def test_a_run_published_early_says_so_and_still_resumes_to_the_planned_end(corpus, tmp_path):
    """--publish-at-step publishes a standard folder at that step, recorded (and carded) as stopped early; the
    schedule and the resume state are kept, so --force later finishes the planned run, to the same weights as one
    run straight through."""
    from safetensors.torch import load_file

    def weights(folder):
        return {k: v for f in sorted(folder.glob("model*.safetensors")) for k, v in load_file(str(f)).items()}

    assert _pretrain("wiki-bert-mini-nonsp", corpus, tmp_path / "a") == 0
    assert _pretrain("wiki-bert-mini-nonsp", corpus, tmp_path / "b", "--publish-at-step", "5") == 0
    folder = tmp_path / "b" / "encoders" / "wiki-bert-mini-nonsp"
    rec = json.loads((folder / "derivation.json").read_text())
    assert rec["training"]["steps"] == 5
    assert rec["stopped_early"]["at_step"] == 5 and rec["stopped_early"]["planned_steps"] == 12
    assert "Stopped early" in (folder / "README.md").read_text()
    assert Path(rec["stopped_early"]["resume_state"]).is_file()
    assert _pretrain("wiki-bert-mini-nonsp", corpus, tmp_path / "b", "--force") == 0
    done = json.loads((folder / "derivation.json").read_text())
    assert done["training"]["steps"] == 12 and "stopped_early" not in done
    wa, wb = weights(tmp_path / "a" / "encoders" / "wiki-bert-mini-nonsp"), weights(folder)
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)


def test_a_corrupt_prepared_cache_is_rebuilt(corpus, tmp_path, capsys):
    import os

    assert _pretrain("wiki-bert-mini", corpus, tmp_path, "--prepare-only") == 0
    cache = Path(os.environ["BERTEVAL_CACHE"]) / "pretrain"
    (folder,) = [p for p in cache.iterdir() if p.is_dir()]
    target = folder / "train128.npz"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    target.write_bytes(bytes(data))
    capsys.readouterr()
    assert cli.main(["pretrain", "wiki-bert-mini", "--data-dir", str(corpus), "--out", str(tmp_path),
                     *TINY, "--prepare-only"]) == 0
    assert "do not match their manifest" in capsys.readouterr().out


def test_pretrain_refusals(corpus, tmp_path, capsys):
    assert cli.main(["pretrain", "wiki-bert-mini", "--data-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "wikipedia/" in capsys.readouterr().err
    assert cli.main(["pretrain", "wiki-bert-mini", "--data-dir", str(corpus), "--out", str(tmp_path), "--device", "cuda:3"]) == 2
    assert "not available here" in capsys.readouterr().err


def test_the_masked_lm_bias_starts_at_the_targets_log_unigram():
    """mlm_bias_init log-unigram: the output bias (tied to the decoder's) is the centred log frequency of each
    token among the training targets, so the most frequent target has the largest bias and the rest of the
    initialisation is transformers' own under the seed; zero keeps transformers' zero bias; a prior of the wrong
    width or an unknown name is refused."""
    import torch

    from berteval.pretrain import examples, loop
    from berteval.errors import BertevalError

    hyper = {"hidden_size": 16, "layers": 1, "heads": 2, "intermediate_size": 32}
    seqs = examples.Sequences(np.zeros((2, 8), np.uint16), np.array([8, 8], np.int16), np.array([3, 3], np.int16),
                                   np.zeros(2, np.uint8), np.array([[1, 2, -1], [3, -1, -1]], np.int16),
                                   np.array([[7, 7, 0], [5, 0, 0]], np.uint16))
    counts = loop.target_counts(seqs, 12)
    assert counts[7] == 2 and counts[5] == 1 and counts.sum() == 3  # padding slots (-1) are not targets
    prior = loop.build_model({**hyper, "mlm_bias_init": "log-unigram"}, 12, 0, counts)
    plain = loop.build_model(hyper, 12, 0)
    bias = prior.cls.predictions.bias.detach()
    assert int(bias.argmax()) == 7 and abs(float(bias.mean())) < 1e-6
    assert torch.equal(prior.cls.predictions.decoder.bias, prior.cls.predictions.bias)  # tied, as transformers ties it
    assert torch.count_nonzero(plain.cls.predictions.bias) == 0
    assert torch.equal(prior.bert.encoder.layer[0].attention.self.query.weight,
                       plain.bert.encoder.layer[0].attention.self.query.weight)
    with pytest.raises(BertevalError, match="counts"):
        loop.build_model({**hyper, "mlm_bias_init": "log-unigram"}, 12, 0, counts[:5])
    with pytest.raises(BertevalError, match="zero or log-unigram"):
        loop.build_model({**hyper, "mlm_bias_init": "uniform"}, 12, 0)


def test_a_reused_vocabulary_rebuilds_the_same_examples(corpus, tmp_path):
    """`tokenizers`' WordPiece trainer is not deterministic (huggingface/tokenizers#1794), so `--vocab` takes a saved
    vocabulary: prepared with a published twin's tokenizer, the examples are those the twin was trained on (same
    vocabulary checksum, same sequences), and a folder with no tokenizer is refused."""
    from berteval.pretrain import examples, vocab
    from berteval.errors import BertevalError

    hyper = {"vocab_size": 120, "short_seq_prob": 0.1, "long_sequences": 40, "limit_articles": None}
    first = examples.prepare(corpus, tmp_path / "a", 0, hyper, log=lambda m: None)
    saved = tmp_path / "tok"
    first.tokenizer.save_pretrained(str(saved))
    again = examples.prepare(corpus, tmp_path / "b", 0, {**hyper, "vocab": str(saved)}, log=lambda m: None)
    assert again.record["vocabulary"]["trainer"] == "reused"
    assert again.record["vocabulary"]["vocab_sha256"] == first.record["vocabulary"]["vocab_sha256"]
    assert examples.sequences_sha256(again.train) == examples.sequences_sha256(first.train)
    with pytest.raises(BertevalError, match="no tokenizer"):
        vocab.reuse(tmp_path)


def test_a_run_resumes_on_a_new_machine_from_its_committed_weights(corpus, tmp_path, monkeypatch, capsys):
    """A session commits --export-resume (weights, tokenizer, run state; no optimiser state); a machine without the
    checkpoint file (another cache) resumes from it at the same step and finishes, saying how; it takes the
    vocabulary from that folder as --vocab would (training a new one would give other examples)."""
    from berteval.pretrain import command as pretrain_command

    out = tmp_path / "out"
    monkeypatch.setenv("BERTEVAL_CACHE", str(tmp_path / "cache-a"))
    assert _pretrain("wiki-bert-mini-g2", corpus, out, "--stop-after-steps", "5") == 3
    assert _pretrain("wiki-bert-mini-g2", corpus, out, "--export-resume") == 0
    folder = pretrain_command.resume_folder("wiki-bert-mini-g2", out)
    state = json.loads((folder / "run_state.json").read_text())
    assert state["step"] == 5 and (folder / "tokenizer.json").is_file() and not list(folder.glob("*.pt"))
    monkeypatch.setenv("BERTEVAL_CACHE", str(tmp_path / "cache-b"))  # the lost machine: no checkpoint, no examples
    assert _pretrain("wiki-bert-mini-g2", corpus, out) == 0
    assert "the vocabulary is the one the resumed weights were trained with" in capsys.readouterr().out
    rec = json.loads((out / "encoders" / "wiki-bert-mini-g2" / "derivation.json").read_text())
    assert rec["training"]["steps"] == 12 and rec["training"]["resumed_at_steps"] == [5]
    assert rec["hyperparameters"]["vocab"] == "pretrain-resume/wiki-bert-mini-g2"  # no machine path in the record
    segments = rec["training"]["segments"]
    assert [s["resumed_from"] for s in segments] == ["start", "weights"] and segments[1]["from_step"] == 5
    assert segments[0]["vocab_sha256"] == segments[1]["vocab_sha256"] and segments[0]["dtype"] in ("bf16", "fp32")


def test_two_runs_preparing_the_same_examples_build_them_once(corpus, tmp_path):
    """The twins start side by side on a new machine and both need the same prepared folder: one builds it, the
    other waits for its lock and reads it (before, both built into one temporary folder and deleted each other's)."""
    import threading

    from berteval.pretrain import examples

    hyper = {"vocab_size": 120, "short_seq_prob": 0.1, "long_sequences": 40, "limit_articles": None}
    logs, got = [[], []], [None, None]

    def run(i):
        got[i] = examples.prepare(corpus, tmp_path, 0, hyper, log=logs[i].append)

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    built = [any(m.startswith("prepared in") for m in log) for log in logs]
    assert sorted(built) == [False, True]
    assert examples.sequences_sha256(got[0].train) == examples.sequences_sha256(got[1].train)
    assert not list((tmp_path / "pretrain").glob("*.partial"))


def test_a_snapshot_is_published_from_its_runs_committed_weights(corpus, tmp_path, monkeypatch, capsys):
    """The main pair at the seed-1 pair's budget (`wiki-bert-mini-g2-50m`): published from the weights its run wrote
    at that step, not trained: the same weights, evaluated as a finished run is (deletion test included), its
    record saying whose step it is; a missing folder, a folder at another step or a step option is refused."""
    import dataclasses

    from safetensors.torch import load_file

    from berteval.models import pretrained
    from berteval.pretrain import command as pretrain_command

    monkeypatch.setitem(pretrained.PRETRAINED, "wiki-bert-mini-g2-50m",
                        dataclasses.replace(pretrained.PRETRAINED["wiki-bert-mini-g2-50m"], at_step=4))
    out = tmp_path / "out"
    assert _pretrain("wiki-bert-mini-g2-50m", corpus, out) == 2
    assert "not here" in capsys.readouterr().err
    snap = pretrain_command.snapshot_folder("wiki-bert-mini-g2", 4, out)
    assert _pretrain("wiki-bert-mini-g2", corpus, out, "--stop-after-steps", "4") == 3
    assert _pretrain("wiki-bert-mini-g2", corpus, out, "--export-resume", "--resume-weights", str(snap)) == 0
    assert _pretrain("wiki-bert-mini-g2", corpus, out, "--stop-after-steps", "1") == 3
    later = tmp_path / "step5"
    assert _pretrain("wiki-bert-mini-g2", corpus, out, "--export-resume", "--resume-weights", str(later)) == 0
    capsys.readouterr()
    assert _pretrain("wiki-bert-mini-g2-50m", corpus, out, "--resume-weights", str(later)) == 2
    assert "holds step 5" in capsys.readouterr().err
    assert _pretrain("wiki-bert-mini-g2-50m", corpus, out, "--publish-at-step", "3") == 2
    capsys.readouterr()
    assert cli.main(["pretrain", "wiki-bert-mini-g2-50m", "--data-dir", str(corpus), "--out", str(out), *TINY]) == 0
    said = capsys.readouterr().out
    assert "wiki-bert-mini-g2's weights at step 4" in said and "resume state kept" not in said
    published = pretrained.folder("wiki-bert-mini-g2-50m", out)
    rec = json.loads((published / "derivation.json").read_text())
    assert rec["training"]["steps"] == 4 and rec["stopped_early"]["snapshot_of"] == "wiki-bert-mini-g2"
    assert rec["stopped_early"]["resume_state"] is None and "deletion_test" in rec
    assert rec["stopped_early"]["weights_from"] == "pretrain-snapshots/wiki-bert-mini-g2.step4"  # no machine path
    card = (published / "README.md").read_text()  # says whose weights, and what trained them (not the evaluation)
    assert "**A snapshot**: the weights of `wiki-bert-mini-g2` at step 4" in card and "Stopped early" not in card
    assert "(1 working session: 4 steps in " in card
    mine, theirs = ({k: v for f in folder.glob("*.safetensors") for k, v in load_file(str(f)).items()}
                    for folder in (published, snap))
    assert mine.keys() == theirs.keys() and all((mine[k] == theirs[k]).all() for k in mine)
