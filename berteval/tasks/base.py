"""What a task is: a frozen metadata record plus the code that loads its examples.

Records carry `task_version`; change how a task is scored or which data it reads and
bump `version`, so older records keep the meaning they were written with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import BertevalError


@dataclass
class Split:
    name: str
    texts: list  # str, or (str, str) pairs
    labels: list[int]
    ids: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class TaskData:
    train: Split
    eval: Split
    source: str  # where the examples came from, for the record's config
    data_sha256: str  # content checksum of train + eval as used

    @staticmethod
    def checksum(*splits: Split) -> str:
        """sha256 over the examples' content, so a hub copy and a local copy of the same
        data agree and any edit to the data changes it."""
        digest = hashlib.sha256()
        for split in splits:
            digest.update(f"#{split.name}\n".encode())
            for text, label in zip(split.texts, split.labels):
                parts = text if isinstance(text, tuple) else (text,)
                digest.update(("\t".join(parts) + f"\t{label}\n").encode())
        return digest.hexdigest()


def split_checksum(split: Split) -> str:
    return TaskData.checksum(split)


def local_folder(data_dir: Path, sub: str, files, missing: str | None = None) -> Path | None:
    """`<data dir>/<sub>` or the data dir itself, whichever holds every one of `files`; with
    `missing` (what to tell the user), a BertevalError instead of None when neither does."""
    found = next((f for f in (Path(data_dir) / sub, Path(data_dir)) if all((f / n).is_file() for n in files)), None)
    if found is None and missing is not None:
        raise BertevalError(missing)
    return found


def hub_dataset(hub_id: str, config: str | None, local_files: str):
    """A hub dataset through `datasets`, or an error that names the offline way (`local_files`)."""
    import datasets  # heavy; only tasks that load data pay for it

    name = f"{hub_id}/{config}" if config else hub_id
    try:
        return datasets.load_dataset(hub_id, config) if config else datasets.load_dataset(hub_id)
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
    hub_source: str  # hub dataset id (and config) used when no data dir is given
    local_layout: str  # files expected under the data dir
    train_split: str
    eval_split: str
    main_metric: str
    greater_is_better: bool
    uses_pooling: bool
    regimes: tuple[str, ...]
    labels: tuple[str, ...]
    load: Callable[[Path | None], TaskData]
    # Regimes this task runs with its own code (e.g. span QA, a pretrained NSP head), as
    # regime -> "module:function" taking a RunSpec and returning a RunReport. Named, not
    # imported, so loading the registry never pulls in training code. Regimes not listed
    # use the pooled probe grid.
    regime_runners: dict[str, str] = field(default_factory=dict)
