"""Shared fixtures: tiny models built from configs and tiny data written on the fly.

Everything here is offline and takes milliseconds: a 2-layer, 16-wide BERT with a
hand-written WordPiece vocabulary, saved with save_pretrained so berteval loads it
through exactly the path a real checkpoint takes. Slow tests (real model on real data)
are opt-in: `pytest -m slow` or BERTEVAL_SLOW=1.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

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


# Everything a test session writes goes under one temporary folder, set before any test module
# imports `datasets` or berteval (both read these variables once): the feature cache, the datasets
# cache, evaluate's module cache and gradio's uploads. Results are always written to a test's own
# tmp_path (`out=`), never to the committed leaderboard/results.
_SESSION_DIR = Path(tempfile.mkdtemp(prefix="berteval-tests-"))
_CACHES = {"BERTEVAL_CACHE": "berteval", "HF_DATASETS_CACHE": "datasets", "HF_MODULES_CACHE": "modules",
           "GRADIO_TEMP_DIR": "gradio"}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: real model on real data; run with -m slow or BERTEVAL_SLOW=1")
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
    filler = ["the", "movie", "film", "plot", "was", "is", "very", "and", "it", "story", "acting"]

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
