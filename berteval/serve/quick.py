"""A quick SST-2 probe, trained on demand for a model that has no committed heads (any BERT-family checkpoint).

Classify on `bert-base-uncased` found no committed record and refused. Now the page trains a
probe there and then: a fixed sample of SST-2 train sentences (2,000, seeded, the same for every
model), encoded once (the feature cache keeps the vectors per model revision, on disk), a
logistic regression per vector (`cls`, `pooler` where the checkpoint has real pooler weights,
`mean`; the same exact probe the runs fit, C chosen on a held-out slice of the sample), scored on
all of SST-2 dev. Each head is labelled with its training size and dev accuracy and kept in memory
per model revision; it is never written to the results store, so it never mixes with committed
records or the leaderboard. Data: BERTEVAL_DATA, else `../shared/data` beside the clone, else the hub.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import config, features, models, pooling
from ..errors import BertevalError
from ..heads.probe import fit_probe
from ..seeds import numpy_rng
from ..tasks import get
from .task_heads import TaskHead

TASK = "sst2"
N_TRAIN = 2000  # sentences the quick probe trains on
SEED = 0
POOLINGS = ("cls", "pooler", "mean")
MAX_LENGTH = 128
CHUNK = 250  # sentences per encoding step: the progress bar moves after each

Progress = Callable[[float, str], None]


@dataclass
class QuickProbe:
    heads: dict[str, TaskHead]
    n_train: int
    n_eval: int
    data: str  # where the sentences came from, in words a visitor reads


_CACHE: dict[tuple[str, str], QuickProbe] = {}
_LOCK = threading.Lock()  # one quick probe trains at a time (a second request for it waits, then reuses it)


def cached(model: models.LoadedModel) -> QuickProbe | None:
    return _CACHE.get((model.model_id, model.revision))


def _sha(texts) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def _encode(model, texts, names, label, progress: Progress, start: float, span: float) -> dict[str, np.ndarray]:
    """Vectors of `texts` in chunks (cached per model revision and chunk), reporting progress after each."""
    parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for i in range(0, len(texts), CHUNK):
        chunk = texts[i : i + CHUNK]
        progress(start + span * i / len(texts), f"encoding {label}: {i:,} of {len(texts):,} sentences")
        vecs = features.encode(model, chunk, data_sha256=f"quick-{_sha(chunk)}", poolings=list(names), layers=[-1],
                               max_length=MAX_LENGTH, progress=False).vectors
        for n in names:
            parts[n].append(vecs[(n, -1)])
    return {n: np.concatenate(parts[n]) for n in names}


def train(model: models.LoadedModel, progress: Progress | None = None, n_train: int = N_TRAIN) -> QuickProbe:
    """The quick probe of `model` (trained now, or the one trained before for this revision)."""
    progress = progress or (lambda fraction, what: None)
    key = (model.model_id, model.revision)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        folder = config.local_data_dir()
        progress(0.0, "reading SST-2")
        try:
            data = get(TASK).load(folder)
        except BertevalError as exc:
            raise BertevalError("A quick probe needs SST-2's sentences, and this server has no copy of them and "
                                "cannot fetch them from the Hugging Face Hub.") from exc
        train_split, dev = data.train, data.eval
        n = min(n_train, len(train_split))
        idx = np.sort(numpy_rng(SEED, "subset").choice(len(train_split), size=n, replace=False))
        texts, labels = [train_split.texts[i] for i in idx], np.asarray([train_split.labels[i] for i in idx])
        names = []
        for name in POOLINGS:
            try:
                pooling.check_available(name, model.heads)
                names.append(name)
            except BertevalError:  # no pooler, or a random one: that head is not offered
                continue
        x_train = _encode(model, texts, names, "the training sample", progress, 0.02, 0.68)
        x_dev = _encode(model, list(dev.texts), names, "SST-2 dev", progress, 0.70, 0.25)
        progress(0.96, "fitting one logistic regression per vector")
        y_dev = np.asarray(dev.labels)
        heads = {}
        for name in names:
            fit = fit_probe(x_train[name], labels, x_dev[name], SEED)
            accuracy = float((fit.pred == y_dev).mean())
            heads[name] = TaskHead(TASK, name, fit.head.weight.astype(np.float32), fit.head.bias.astype(np.float32),
                                   {"accuracy": accuracy}, "accuracy", accuracy, 1, fit.n_train, MAX_LENGTH, SEED,
                                   None, len(dev))
        where = "the local SST-2 files" if folder is not None else "SST-2 from the Hugging Face Hub"
        found = QuickProbe(heads, n, len(dev), where)
        _CACHE[key] = found
        progress(1.0, "done")
        return found
