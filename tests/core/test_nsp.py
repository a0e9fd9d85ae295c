"""Next-sentence prediction: the pair builder's rules, BERT's label order on a hand-set
head, the refusal for checkpoints without an NSP head, the probe run and the demo head,
on tiny SQuAD-format files written here."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from berteval import models, nsp_pairs, records, runs
from berteval.heads import nsp as nsp_head
from berteval.serve import nsp
from berteval.store import Store
from berteval.errors import BertevalError
from berteval.tasks import get
from conftest import REPO, SHARED_DATA, WORDS, _tokenizer, tiny_config

DATA = Path(os.environ.get("BERTEVAL_DATA") or SHARED_DATA)

needs_data = pytest.mark.skipif(not (DATA / "squad" / "dev-v1.1.json").is_file(), reason="no ../shared/data here")

SHORT = "Not bad."  # two words: too short to be an NSP sentence


def _sentence(rng, n):
    words = rng.choice(WORDS[:-1], size=n).tolist()
    return " ".join(words).capitalize() + "."


def _articles(seed, prefix):
    """Three articles of two paragraphs, five or six sentences each; one short sentence."""
    rng = np.random.default_rng(seed)
    out = []
    for a in range(3):
        paragraphs = []
        for p in range(2):
            sents = [_sentence(rng, int(rng.integers(5, 9))) for _ in range(5)]
            if a == 1 and p == 0:
                sents.insert(2, SHORT)
            paragraphs.append({"context": " ".join(sents), "qas": []})
        out.append({"title": f"{prefix}_{a}", "paragraphs": paragraphs})
    return out


@pytest.fixture(scope="module")
def tiny_squad(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    (root / "squad").mkdir()
    for name, seed in (("dev-v1.1.json", 1), ("train-subset.json", 2)):
        (root / "squad" / name).write_text(json.dumps({"data": _articles(seed, name[:3]), "version": "1.1"}))
    return root


@pytest.fixture(scope="module")
def dev_articles(tiny_squad):
    data = json.loads((tiny_squad / "squad" / "dev-v1.1.json").read_text())["data"]
    return [nsp_pairs.Article(a["title"], tuple(p["context"] for p in a["paragraphs"])) for a in data]


def _sentence_at(articles, where):
    a, p, s = (int(x) for x in where.split("/"))
    return nsp_pairs.split_sentences(articles[a].paragraphs[p])[s]


def test_same_seed_same_pairs_other_seed_other_pairs(dev_articles):
    first, _ = nsp_pairs.build_pairs(dev_articles, 0)
    again, _ = nsp_pairs.build_pairs(dev_articles, 0)
    other, _ = nsp_pairs.build_pairs(dev_articles, 1)
    assert first == again
    assert [p.label for p in first] != [p.label for p in other]


def test_labels_exactly_balanced(dev_articles):
    built, stats = nsp_pairs.build_pairs(dev_articles, 0)
    labels = [p.label for p in built]
    assert labels.count(nsp_pairs.IS_NEXT) == labels.count(nsp_pairs.NOT_NEXT) == len(built) // 2 > 5
    assert stats.pairs == len(built) and stats.candidates - stats.pairs in (0, 1)


def test_is_next_partners_are_consecutive_sentences_of_one_paragraph(dev_articles):
    built, _ = nsp_pairs.build_pairs(dev_articles, 0)
    for p in (p for p in built if p.label == nsp_pairs.IS_NEXT):
        a_art, a_par, a_sent = p.id.split("/")
        assert p.b_from == f"{a_art}/{a_par}/{int(a_sent) + 1}"
        assert _sentence_at(dev_articles, p.id) == p.a and _sentence_at(dev_articles, p.b_from) == p.b


def test_not_next_partners_come_from_another_article(dev_articles):
    built, _ = nsp_pairs.build_pairs(dev_articles, 0)
    negatives = [p for p in built if p.label == nsp_pairs.NOT_NEXT]
    assert negatives
    for p in negatives:
        assert p.b_from.split("/")[0] != p.id.split("/")[0]
        assert _sentence_at(dev_articles, p.b_from) == p.b


def test_no_sentence_paired_with_itself_and_short_ones_never_used(dev_articles):
    built, stats = nsp_pairs.build_pairs(dev_articles, 0)
    assert all(p.a != p.b for p in built)
    assert stats.too_short == 1 and all(SHORT not in (p.a, p.b) for p in built)
    # The pairs around the short sentence are dropped, not bridged over it.
    assert not any(p.id == "1/0/1" or p.id == "1/0/2" for p in built)


def test_sentence_rule():
    assert nsp_pairs.is_sentence("The cat was very good.")
    assert not nsp_pairs.is_sentence("[citation needed]")
    assert not nsp_pairs.is_sentence("Tesla stated, [citation needed]")
    assert not nsp_pairs.is_sentence(":12 3 4 5")


def test_hub_layout_gives_the_same_articles(dev_articles):
    import datasets

    rows = {"title": [], "context": []}
    for art in dev_articles:
        for ctx in art.paragraphs:
            rows["title"] += [art.title] * 2  # two questions per paragraph, as the hub repeats contexts
            rows["context"] += [ctx] * 2
    assert nsp_pairs.articles_from_rows(datasets.Dataset.from_dict(rows)) == dev_articles


def test_task_loads_pairs_with_their_checksum(tiny_squad, dev_articles):
    data = get("nsp").load(tiny_squad)
    built, _ = nsp_pairs.build_pairs(dev_articles, 0)
    assert data.eval.texts == [(p.a, p.b) for p in built] and data.eval.labels == [p.label for p in built]
    assert data.train.name == "train" and len(data.train) > 10
    assert data.data_sha256 == get("nsp").load(tiny_squad).data_sha256
    assert "pysbd==0.3.4" in data.source


def _nsp_checkpoint(folder, bias):
    """A tiny BertForNextSentencePrediction whose seq_relationship ignores its input: the
    logits are the bias, so we know which index wins."""
    from transformers import BertForNextSentencePrediction

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = BertForNextSentencePrediction(tiny_config())
    with torch.no_grad():
        model.cls.seq_relationship.weight.zero_()
        model.cls.seq_relationship.bias.copy_(torch.tensor(bias))
    model.save_pretrained(folder)
    _tokenizer(folder).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("bias, label", [((4.0, -4.0), nsp_pairs.IS_NEXT), ((-4.0, 4.0), nsp_pairs.NOT_NEXT)])
def test_pretrained_head_label_order(tmp_path, tiny_squad, bias, label):
    folder = _nsp_checkpoint(tmp_path / "nsp", bias)
    loaded = models.load(str(folder))
    assert loaded.heads.has_nsp_head
    proba = nsp_head.pretrained_proba(loaded, [("the cat was good", "the dog was bad")])
    assert proba.shape == (1, 2) and proba[0, label] > 0.99  # index 0 = IsNext, 1 = NotNext

    spec = runs.RunSpec(task=get("nsp"), model=str(folder), regime="pretrained", seeds=[0],
                          data_dir=tiny_squad, out=tmp_path / "out", progress=False)
    rec = runs.run(spec).written[0]
    preds = json.loads((tmp_path / "out" / rec.predictions_file).read_text())
    assert set(preds["pred"]) == {label}
    assert rec.pooling == "nsp-head" and rec.regime == "pretrained" and rec.metrics["accuracy"] == 0.5
    assert runs.run(spec).written == []

    demo = nsp.load_demo_head(str(folder))
    answer = demo.predict("the cat was good", "the dog was bad")
    assert answer.source == nsp.PRETRAINED_SOURCE
    assert answer.label == nsp_pairs.LABELS[label] and (answer.p_is_next > 0.99) == (label == nsp_pairs.IS_NEXT)


def test_checkpoint_without_nsp_head_is_refused(tiny_models, tiny_squad, tmp_path, capsys):
    from berteval.cli import main

    spec = runs.RunSpec(task=get("nsp"), model=str(tiny_models["base"]), regime="pretrained",
                          data_dir=tiny_squad, out=tmp_path, progress=False)
    with pytest.raises(BertevalError, match="silently attach a randomly initialised head.*--regime probe"):
        runs.run(spec)
    code = main(["run", "--task", "nsp", "--model", str(tiny_models["distilbert"]), "--regime", "pretrained",
                 "--data-dir", str(tiny_squad), "--out", str(tmp_path), "--no-progress"])
    assert code == 2 and "no pretrained next-sentence (NSP) head" in capsys.readouterr().err
    assert not (tmp_path / "nsp.jsonl").exists()


def test_probe_run_writes_records_and_a_rerun_adds_none(tiny_models, tiny_squad, tmp_path):
    spec = runs.RunSpec(task=get("nsp"), model=str(tiny_models["base"]), poolings=["cls", "pooler", "mean", "max"],
                          seeds=[0, 1], data_dir=tiny_squad, out=tmp_path, progress=False)
    rep = runs.run(spec)
    data = get("nsp").load(tiny_squad)
    recs, problems = records.read_records([tmp_path / "nsp.jsonl"])
    assert problems == [] and len(recs) == len(rep.written) == 8
    for r in recs:
        assert r.task == "nsp" and r.regime == "probe" and r.main_metric == "accuracy"
        assert 0.0 <= r.metrics["accuracy"] <= 1.0
        assert r.data_sha256 == data.data_sha256
        assert r.n_eval == len(data.eval) and r.config["train_examples_available"] == len(data.train)
    again = runs.run(spec)
    assert again.written == [] and len(again.skipped) == 8
    assert len(records.read_records([tmp_path / "nsp.jsonl"])[0]) == 8

    # The demo falls back to the best probe and says so; P(IsNext) is 1 - sigmoid(class-1 logit).
    demo = nsp.load_demo_head(str(tiny_models["base"]), store=Store(tmp_path))
    assert demo.source.startswith(f"trained probe on {demo.pooling}") and "not BERT's pre-training head" in demo.source
    by_cell = {}
    for r in recs:
        by_cell.setdefault((r.pooling, r.layer), []).append(r.main_value)
    assert demo.dev_accuracy == pytest.approx(max(np.mean(v) for v in by_cell.values()))
    a, b = data.eval.texts[0]
    answer = nsp.predict_is_next(demo, a, b)
    preds = json.loads((tmp_path / f"predictions/nsp/{demo.run_id}.json").read_text())
    assert answer.p_is_next == pytest.approx(1.0 - preds["proba"][0], abs=1e-4)  # proba = P(class 1 = NotNext)
    assert type(answer.p_is_next) is float and answer.label == ("IsNext" if answer.p_is_next >= 0.5 else "NotNext")


def test_demo_head_without_records_says_so_to_a_visitor(tiny_models, tmp_path):
    with pytest.raises(BertevalError, match="has no trained next-sentence head.*no NSP probe is committed") as e:
        nsp.load_demo_head(str(tiny_models["base"]), store=Store(tmp_path))
    assert "--" not in str(e.value) and "python" not in str(e.value)  # the page's visitor has no command line


# slow: the NSP pair set built from the real SQuAD files (about 10 CPU s)
@pytest.mark.slow
@needs_data
def test_real_pair_set_counts_and_committed_records(tmp_path):
    data = get("nsp").load(DATA)
    assert (len(data.train), len(data.eval)) == (2_598, 8_118)  # the counts `berteval ls` states
    assert sum(data.train.labels) == 1_299 and sum(data.eval.labels) == 4_059
    committed = REPO / "leaderboard" / "results" / "nsp.jsonl"
    if committed.is_file():
        recs, problems = records.read_records([committed])
        assert problems == [] and {r.data_sha256 for r in recs} == {data.data_sha256}
