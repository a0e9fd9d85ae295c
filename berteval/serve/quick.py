"""A quick SST-2 probe, trained on demand for a model that has no committed heads (any BERT-family checkpoint).

Classify on `bert-base-uncased` found no committed record and refused. Now the page trains a
probe there and then: a fixed sample of SST-2 train sentences (2,000, seeded, the same for every
model), encoded once (the feature cache keeps the vectors per model revision, on disk), a
logistic regression per vector (`cls`, `pooler` where the checkpoint has real pooler weights,
`mean`; the same exact probe the runs fit, C chosen on a held-out slice of the sample), scored on
all of SST-2 dev. Each head is labelled with its training size and dev accuracy and kept in memory
per model revision; it is never written to the results store, so it never mixes with committed
records or the leaderboard. Data: BERTEVAL_DATA, else `../shared/data` beside the clone, else the hub.

A checkpoint with its own sequence-classification head (a hub model fine-tuned on SST-2) answers with
that head instead; its dev figure is measured the same way, once per model revision: the head as it
ships, on all of SST-2 dev (`score_checkpoint`), kept in memory and never written to the store.
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
from .task_heads import CheckpointHead, TaskHead, checkpoint_logits, sst2_label_map

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


def _sst2(what: str):
    """(SST-2's data, where it came from in a visitor's words): the local files ($BERTEVAL_DATA, else
    ../shared/data beside the clone), else the hub, through the task's one loader."""
    folder = config.local_data_dir()
    try:
        data = get(TASK).load(folder)
    except BertevalError as exc:
        raise BertevalError(f"{what} needs SST-2's sentences, and this server has no copy of them and cannot fetch "
                            f"them from the Hugging Face Hub.") from exc
    return data, "the local SST-2 files" if folder is not None else "SST-2 from the Hugging Face Hub"


def train(model: models.LoadedModel, progress: Progress | None = None, n_train: int = N_TRAIN) -> QuickProbe:
    """The quick probe of `model` (trained now, or the one trained before for this revision)."""
    progress = progress or (lambda fraction, what: None)
    key = (model.model_id, model.revision)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        progress(0.0, "reading SST-2")
        data, where = _sst2("A quick probe")
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
        found = QuickProbe(heads, n, len(dev), where)
        _CACHE[key] = found
        progress(1.0, "done")
        return found


@dataclass
class CheckpointDev:
    """A checkpoint's own SST-2 head, measured here on SST-2 dev: its accuracy, or why it has none."""

    accuracy: float | None
    n_eval: int = 0
    data: str = ""  # where the dev sentences came from, in words a visitor reads
    note: str = ""  # how its labels were read as SST-2's
    missing: str = ""  # why no figure (labels that are not sentiment, no data): a sentence for the page


_CHECKPOINT_CACHE: dict[tuple[str, str], CheckpointDev] = {}
EVAL_BATCH = 32  # dev sentences per forward pass of the checkpoint's head


def checkpoint_cached(model: models.LoadedModel) -> CheckpointDev | None:
    return _CHECKPOINT_CACHE.get((model.model_id, model.revision))


def score_checkpoint(model: models.LoadedModel, head: CheckpointHead,
                     progress: Progress | None = None) -> CheckpointDev:
    """The dev accuracy of `model`'s own sequence-classification head on all of SST-2 dev (872 sentences), measured
    once per model revision (progress reported as it goes); labels that are not SST-2's, or no SST-2 data here: a
    CheckpointDev with `missing` said in words (not kept, except for the labels, which cannot change)."""
    progress = progress or (lambda fraction, what: None)
    key = (model.model_id, model.revision)
    with _LOCK:
        if key in _CHECKPOINT_CACHE:
            return _CHECKPOINT_CACHE[key]
        mapping = sst2_label_map(head.labels)
        if mapping is None:
            found = CheckpointDev(None, missing=f"its labels ({', '.join(head.labels)}) are not SST-2's negative and "
                                                f"positive, so it is not scored on SST-2 here")
            _CHECKPOINT_CACHE[key] = found
            return found
        ids, note = mapping
        progress(0.0, "reading SST-2 dev")
        try:
            data, where = _sst2("Measuring this head")
        except BertevalError as exc:
            return CheckpointDev(None, missing=str(exc).rstrip(".") + ", so its dev accuracy is not measured")
        dev = data.eval
        texts, gold = list(dev.texts), np.asarray(dev.labels)
        classes = sorted(ids)  # the head's classes that are negative or positive
        pred = []
        for i in range(0, len(texts), EVAL_BATCH):
            progress(0.05 + 0.95 * i / len(texts), f"scoring its head on SST-2 dev: {i:,} of {len(texts):,} sentences")
            logits = checkpoint_logits(model, head, texts[i : i + EVAL_BATCH])  # (B, C)
            best = np.asarray(classes)[logits[:, classes].argmax(1)]  # the likeliest sentiment class
            pred.extend(ids[int(c)] for c in best)
        accuracy = float((np.asarray(pred) == gold).mean())
        found = CheckpointDev(accuracy, len(texts), where, note)
        _CHECKPOINT_CACHE[key] = found
        progress(1.0, "done")
        return found
