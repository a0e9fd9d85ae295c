"""What a task is: a frozen metadata record plus the code that loads its examples.

Every task follows one data contract: `load(data_dir) -> TaskData` with a train and an
eval `Split` (inputs, gold labels, ids) and a checksum of the content. A task declares
its kind (which decides the regimes that can run it and what a head reads) and its
metrics (from `berteval.metrics`). Records carry `task_version`; change how a task is
scored or which data it reads and bump `version`, so older records keep their meaning.
Torch-free: the task registry is read by light commands such as `ls`.
"""

from __future__ import annotations

import errno
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import BertevalError
from ..metrics import METRICS
from ..seeds import numpy_rng

# Kinds of task. A regime says which kinds it supports; a kind says what a head reads.
SENTENCE = "sentence classification"  # one text -> a class, from one pooled vector
PAIR = "sentence-pair classification"  # two texts as [CLS] A [SEP] B [SEP] -> a class, from one pooled vector
SPAN = "span QA"  # question + context -> a span of the context, from every token's start/end logits
PAIR_REGRESSION = "sentence-pair regression"  # two texts as one BERT pair -> a score (STS-B), from one pooled vector
REGRESSION_KINDS = (PAIR_REGRESSION,)


@dataclass
class Split:
    name: str
    texts: list  # str, a (str, str) pair, or (question, context) for span QA
    labels: list  # class ids; for span QA an `Answers` per question
    ids: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)  # e.g. the article each example comes from

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, idx) -> "Split":
        pick = lambda xs: [xs[i] for i in idx] if xs else []  # noqa: E731
        return Split(self.name, pick(self.texts), pick(self.labels), pick(self.ids), pick(self.groups))


def sentence_checksum(*splits: Split) -> str:
    """sha256 over the examples' content, so a hub copy and a local copy of the same data agree
    and any edit to the data changes it."""
    digest = hashlib.sha256()
    for split in splits:
        digest.update(f"#{split.name}\n".encode())
        for text, label in zip(split.texts, split.labels):
            parts = text if isinstance(text, tuple) else (text,)
            digest.update(("\t".join(parts) + f"\t{label}\n").encode())
    return digest.hexdigest()


@dataclass
class TaskData:
    train: Split
    eval: Split
    source: str  # where the examples came from, for the record's config
    data_sha256: str  # content checksum of train + eval as used
    details: dict[str, Any] = field(default_factory=dict)  # e.g. which train file (SQuAD)

    @staticmethod
    def checksum(*splits: Split) -> str:
        return sentence_checksum(*splits)


def split_checksum(split: Split) -> str:
    return sentence_checksum(split)


def local_folder(data_dir: Path, sub: str, files, missing: str | None = None) -> Path | None:
    """`<data dir>/<sub>` or the data dir itself, whichever holds every one of `files`; with
    `missing` (what to tell the user), a BertevalError instead of None when neither does."""
    found = next((f for f in (Path(data_dir) / sub, Path(data_dir)) if all((f / n).is_file() for n in files)), None)
    if found is None and missing is not None:
        raise BertevalError(missing)
    return found


# A write that failed for want of room or permission: the cache writer's error, said in one line.
_WRITE_ERRNOS = {errno.EFBIG, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def _write_failure(exc: BaseException) -> OSError | None:
    """The OSError behind a failed `datasets` cache write, if that is what `exc` is (datasets wraps it in its
    own errors, chained: cause and context)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def load_dataset(*args, **kwargs):
    """`datasets.load_dataset`, with a cache that cannot be written (full disk, a file-size limit, read-only)
    said in one line, "cannot write <file>: <why>", as berteval's own writers say it, instead of datasets'
    three chained tracebacks."""
    import datasets  # heavy; only tasks that load data pay for it

    try:
        return datasets.load_dataset(*args, **kwargs)
    except Exception as exc:
        failed = _write_failure(exc)
        if failed is None:
            raise
        where = failed.filename or kwargs.get("cache_dir") or datasets.config.HF_DATASETS_CACHE
        raise BertevalError(f"cannot write {where}: {failed.strerror or failed} (the datasets cache, where the data "
                            f"is converted before it is read; set HF_DATASETS_CACHE to a writable folder with "
                            f"room)") from None


def hub_dataset(hub_id: str, config: str | None, local_files: str):
    """A hub dataset through `datasets`, or an error that names the offline way (`local_files`)."""
    import datasets  # heavy; only tasks that load data pay for it

    from .. import hub

    name = f"{hub_id}/{config}" if config else hub_id
    load = lambda: load_dataset(hub_id, config) if config else load_dataset(hub_id)  # noqa: E731
    if not hub.reachable():
        try:
            with hub.offline():  # the local datasets cache only: at once, not after the client's retries
                return load()
        except BertevalError:  # the cache could not be written: said as it is
            raise
        except Exception as exc:  # noqa: BLE001: not cached (datasets raises several types)
            raise BertevalError(
                f"cannot read {name}: the Hugging Face Hub is not reachable from here (offline, or HF_HUB_OFFLINE=1) "
                f"and {name} is not in the local datasets cache. Pass --data-dir with a folder holding "
                f"{local_files} (e.g. ../shared/data), or set BERTEVAL_DATA."
            ) from exc
    try:
        return load()
    except BertevalError:
        raise
    except Exception as exc:  # the hub client raises many types when offline
        raise BertevalError(
            f"cannot read {name} from the hub ({exc.__class__.__name__}). Offline? "
            f"Pass --data-dir with a folder holding {local_files}, or set BERTEVAL_DATA."
        ) from exc


@dataclass(frozen=True)
class TaskSpec:
    name: str
    version: str
    description: str
    kind: str  # SENTENCE, PAIR or SPAN
    hub_source: str  # hub dataset id (and config) used when no data dir is given
    local_layout: str  # files expected under the data dir
    metrics: tuple[str, ...]  # keys of berteval.metrics.METRICS, the main one first
    labels: tuple[str, ...]  # class names in label order (empty for span QA)
    load: Callable[[Path | None], TaskData]
    max_length: int = 128  # tokens per input (a QA window for span QA) when a run does not say
    # Content checksum of splits as used (a subset changes it); span QA hashes its own fields.
    checksum: Callable[..., str] = sentence_checksum
    label: str = ""  # how the leaderboard names it ("SQuAD v1.1"); empty = the name
    # Scored by k-fold cross-validation over its dev set (no train set to be had): records are estimates,
    # shown apart from official-dev rows and never ranked with them (QNLI here).
    dev_folds: int | None = None

    @property
    def regression(self) -> bool:
        return self.kind in REGRESSION_KINDS

    @property
    def display_name(self) -> str:
        return self.label or self.name

    @property
    def main_metric(self) -> str:
        return self.metrics[0]

    @property
    def greater_is_better(self) -> bool:
        return METRICS[self.main_metric].greater_is_better

    def subset(self, data: TaskData, train: Split, evals: Split) -> str:
        """The data checksum of a run that uses `train` and `evals` (the task's own when unchanged)."""
        return data.data_sha256 if (train is data.train and evals is data.eval) else self.checksum(train, evals)


def limit_split(split: Split, limit: int | None, what: str = "--limit-train") -> Split:
    """A fixed, seed-independent subset (so every seed and pooling reads the same cached vectors)."""
    if limit is None or limit >= len(split):
        return split
    if limit <= 0:
        raise BertevalError(f"{what} must be a positive number of examples")
    return split.subset(np.sort(numpy_rng(0, "subset").permutation(len(split))[:limit]))
