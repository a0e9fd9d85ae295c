"""Shared fixtures: tiny models built from configs and tiny data written on the fly.

Everything here is offline and takes milliseconds: a 2-layer, 16-wide BERT with a
hand-written WordPiece vocabulary, saved with save_pretrained so berteval loads it
through exactly the path a real checkpoint takes. Slow tests (real model on real data, the browser,
subprocesses that import torch) are opt-in: `pytest -m slow` or BERTEVAL_SLOW=1; .ci/run runs them too.

The tests live in one folder per concept (core, qa, derive, leaderboard, app, e2e). What more than one
folder uses lives here, not in a test module: fixtures (tiny models, SST-2, GLUE pair and SQuAD files) are
found by name from every folder, and helpers are imported as `from conftest import ...` (pytest puts this
folder on sys.path when it loads this file, as it does each test file's own folder).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def docs_text() -> str:
    """README.md and every page under docs/, one text: what the tests that quote the documentation read
    (README.md is the front door; the findings, CLI, performance and reliability pages live in docs/)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)

WORDS = ["good", "great", "fine", "bad", "awful", "poor", "movie", "film", "plot", "the", "a", "is", "was",
         "very", "not", "and", "it", "story", "acting", "fun", "dull", "sun", "rain", "cat", "dog", "."]
POSITIVE, NEGATIVE = ["good", "great", "fine", "fun"], ["bad", "awful", "poor", "dull"]
FILLER = ["the", "movie", "film", "plot", "was", "is", "very", "and", "it", "story", "acting"]


# Everything a test session writes goes under one temporary folder, set before any test module
# imports `datasets` or berteval (both read these variables once): the feature cache, the datasets
# cache, evaluate's module cache and gradio's uploads. Results are always written to a test's own
# tmp_path (`out=`), never to the committed leaderboard/results.
_SESSION_DIR = Path(tempfile.mkdtemp(prefix="berteval-tests-"))
_CACHES = {"BERTEVAL_CACHE": "berteval", "HF_DATASETS_CACHE": "datasets", "HF_MODULES_CACHE": "modules",
           "GRADIO_TEMP_DIR": "gradio"}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: minutes of CPU and not needed to trust a change (real model on real "
                                       "data, the browser, subprocesses that import torch); .ci/run runs them after "
                                       "the README's command: -m slow or BERTEVAL_SLOW=1")
    for var, sub in _CACHES.items():
        os.environ[var] = str(_SESSION_DIR / sub)


def pytest_unconfigure(config):
    shutil.rmtree(_SESSION_DIR, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("BERTEVAL_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: run with -m slow or BERTEVAL_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own feature cache, so no test sees another's vectors."""
    monkeypatch.setenv("BERTEVAL_CACHE", str(tmp_path_factory.mktemp("cache")))


def _tokenizer(folder: Path):
    from transformers import BertTokenizer

    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return BertTokenizer(vocab=str(vocab))  # transformers 5: `vocab=`; `vocab_file=` is ignored (only the special tokens)


def tiny_config(**kw):
    from transformers import BertConfig

    base = dict(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=64, type_vocab_size=2)
    base.update(kw)
    return BertConfig(**base)


def save_tiny(folder: Path, kind: str = "pretraining", seed: int = 0) -> Path:
    """kind: 'pretraining' (pooler + NSP head), 'nopooler' (BertModel without pooler),
    'distilbert' (no pooler in the architecture), 'base' (BertModel with a trained-looking pooler)."""
    import torch
    from transformers import BertForPreTraining, BertModel, DistilBertConfig, DistilBertModel

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    tok = _tokenizer(folder)
    if kind == "pretraining":
        model = BertForPreTraining(tiny_config())
    elif kind == "nopooler":
        model = BertModel(tiny_config(), add_pooling_layer=False)
    elif kind == "base":
        model = BertModel(tiny_config())
    elif kind == "distilbert":
        model = DistilBertModel(DistilBertConfig(vocab_size=5 + len(WORDS), dim=16, n_layers=2, n_heads=2,
                                                 hidden_dim=32, max_position_embeddings=64))
    else:
        raise ValueError(kind)
    # A trained pooler has a non-zero bias; give ours one so it reads as trained.
    pooler = getattr(getattr(model, "bert", model), "pooler", None)
    if pooler is not None:
        with torch.no_grad():
            pooler.dense.bias.normal_(0, 0.1)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {kind: save_tiny(root / kind, kind) for kind in ("pretraining", "nopooler", "distilbert", "base")}


@pytest.fixture(scope="session")
def tiny_sst2(tmp_path_factory) -> Path:
    """A data dir with sst2/train.tsv and sst2/dev.tsv in GLUE's format, learnable from one word."""
    import random

    root = tmp_path_factory.mktemp("data")
    rng = random.Random(0)
    filler = FILLER

    def rows(n):
        out = []
        for i in range(n):
            label = i % 2
            words = rng.sample(filler, 4) + [rng.choice(POSITIVE if label else NEGATIVE)]
            rng.shuffle(words)
            out.append(f"{' '.join(words)} \t{label}")
        return "sentence\tlabel\n" + "\n".join(out) + "\n"

    (root / "sst2").mkdir()
    (root / "sst2" / "train.tsv").write_text(rows(120))
    (root / "sst2" / "dev.tsv").write_text(rows(40))
    return root


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory) -> Path:
    """glue/{MRPC,RTE,STS-B,QNLI}/ in GLUE's TSV layout; a pair's label follows whether both sentences agree."""
    import random

    root = tmp_path_factory.mktemp("glue")
    rng = random.Random(0)

    def sentence(word):
        words = rng.sample(FILLER, 3) + [word]
        rng.shuffle(words)
        return " ".join(words)

    def pairs(n):
        out = []
        for i in range(n):
            same = i % 2 == 0
            a = rng.choice(POSITIVE)
            b = rng.choice(POSITIVE) if same else rng.choice(NEGATIVE)
            out.append((sentence(a), sentence(b), same))
        return out

    def write(folder, name, header, rows):
        (root / "glue" / folder).mkdir(parents=True, exist_ok=True)
        (root / "glue" / folder / name).write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n"
                                                                                      for r in rows))

    for split, n in (("train.tsv", 120), ("dev.tsv", 40)):
        p = pairs(n)
        write("MRPC", split, ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
              [(int(s), i, i + 1, a, b) for i, (a, b, s) in enumerate(p)])
        write("RTE", split, ["index", "sentence1", "sentence2", "label"],
              [(i, a, b, "entailment" if s else "not_entailment") for i, (a, b, s) in enumerate(p)])
        write("STS-B", split, ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                               "sentence2", "score"],
              [(i, "g", "f", "y", i, "s", "s", a, b, f"{(4.5 if s else 0.5) + rng.random() * 0.5:.3f}")
               for i, (a, b, s) in enumerate(p)])
    write("QNLI", "dev.tsv", ["index", "question", "sentence", "label"],
          [(i, a, b, "entailment" if s else "not_entailment") for i, (a, b, s) in enumerate(pairs(60))])
    return root


def tiny_context(rng, n: int) -> str:
    """n words of the tiny vocabulary and a final full stop: a SQuAD context the tiny models can read."""
    return " ".join(rng.choice([w for w in WORDS if w != "."], size=n).tolist()) + " ."


@pytest.fixture(scope="module")
def tiny_squad_qa(tmp_path_factory) -> Path:
    """A data dir with squad/train-subset.json (6 articles, 1 gold answer each) and squad/dev-v1.1.json
    (3 articles, 2 golds each) in SQuAD v1.1's layout; every answer is one word of its 40-word context."""
    import json

    import numpy as np

    root = tmp_path_factory.mktemp("squad")
    rng = np.random.default_rng(1)

    def articles(prefix, n, golds):
        out = []
        for a in range(n):
            context = tiny_context(rng, 40)
            words = context.split(" ")
            qas = []
            for q in range(3):
                k = int(rng.integers(0, len(words) - 2))
                text = words[k]
                start = len(" ".join(words[:k])) + (1 if k else 0)
                answers = [{"text": text, "answer_start": start}] * golds
                qas.append({"id": f"{prefix}{a}-{q}", "question": "what is the plot", "answers": answers})
            out.append({"title": f"{prefix}{a}", "paragraphs": [{"context": context, "qas": qas}]})
        return {"data": out, "version": "1.1"}

    (root / "squad").mkdir()
    (root / "squad" / "train-subset.json").write_text(json.dumps(articles("t", 6, 1)))
    (root / "squad" / "dev-v1.1.json").write_text(json.dumps(articles("d", 3, 2)))
    return root


def write_wikipedia(root: Path, articles: list[dict], dev: dict[str, str], shards: int = 1,
                    bad_line: bool = False) -> Path:
    """A data dir as the pre-training text reads it: wikipedia/ (gzip JSON lines, `articles` split over
    `shards` files; `bad_line` appends an unreadable line to the last) and squad/dev-v1.1.json (one
    one-paragraph article per `dev` title -> context). Shared by the scratch twins' and the continued pair's
    tests, which build their own articles."""
    import gzip
    import json

    (root / "wikipedia").mkdir(parents=True)
    (root / "squad").mkdir()
    squad = {"version": "1.1", "data": [{"title": title, "paragraphs": [{"context": context, "qas": []}]}
                                        for title, context in dev.items()]}
    (root / "squad" / "dev-v1.1.json").write_text(json.dumps(squad))
    per = -(-len(articles) // shards)
    for k in range(shards):
        with gzip.open(root / "wikipedia" / f"enwiki-2015-prefix-a{chr(ord('a') + k)}.jsonl.gz", "wt") as fh:
            for row in articles[k * per:(k + 1) * per]:
                fh.write(json.dumps(row) + "\n")
            if bad_line and k == shards - 1:
                fh.write("{not json\n")  # a bad line: reported and skipped, not fatal
    return root


def squad_spec(model_dir, data_dir, out, regime, **kw):
    """A small SQuAD RunSpec for the tiny models (32-token windows, stride 8, seed 0, one epoch of 4)."""
    from berteval import runs
    from berteval.tasks import get

    base = dict(task=get("squad"), model=str(model_dir), regime=regime, seeds=[0], data_dir=data_dir, out=out,
                progress=False, max_length=32, doc_stride=8)
    if regime != "pretrained":  # a pretrained head trains nothing: its contract refuses training options
        base.update(epochs=1, batch_size=4)
    base.update(kw)
    return runs.RunSpec(**base)


def make_record(**kw):
    """A valid RunRecord; keyword arguments replace its fields."""
    from berteval import records

    base = dict(
        schema_version=records.SCHEMA_VERSION, run_id="abc", timestamp="2026-12-02T00:00:00+00:00",
        model="m", model_revision="r", task="sst2", task_version="1", data_sha256="d", split="validation",
        pooling="cls", regime="probe", layer=-1, seed=0, metrics={"accuracy": 0.8}, main_metric="accuracy",
        n_train=10, n_eval=5, config={}, versions={"python": "3"}, git_commit="x", device="cpu", dtype="fp32",
        wall_s=1.0,
    )
    base.update(kw)
    return records.RunRecord(**base)


def records_frame(path: Path, recs) -> "pd.DataFrame":
    """The leaderboard's records frame of `recs`, appended to the .jsonl at `path` as a run appends them (every
    line must read back: no problems)."""
    from berteval import store
    from leaderboard import data

    for r in recs:
        store.append_record(path, r)
    df, problems = data.load([path])
    assert problems == []
    return df
