"""Next-sentence prediction on a fixed, documented pair set built from SQuAD v1.1's
Wikipedia paragraphs (construction in `berteval.nsp_pairs`): 0 = IsNext, 1 = NotNext.

Probes train on pairs from the SQuAD train subset's articles and report on pairs from
the official dev file's articles (or, without a data dir, rajpurkar/squad's train and
validation splits from the hub). The `pretrained` regime scores a checkpoint's own NSP
head on the dev pairs; `probe` trains a head on one pooled vector.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from .. import nsp_pairs
from .base import PAIR, Split, TaskData, TaskSpec, hub_dataset, load_dataset, local_folder

HUB_ID = "rajpurkar/squad"
FILES = {"train": "train-subset.json", "validation": "dev-v1.1.json"}
PAIR_SEED = 0  # part of the task's definition: a new seed is a new pair set and a new task version


def _local_folder(data_dir: Path) -> Path:
    return local_folder(
        data_dir, "squad", FILES.values(),
        f"no SQuAD files under {data_dir}: NSP pairs are built from squad/dev-v1.1.json (evaluation) and "
        f"squad/train-subset.json (probe training), official SQuAD v1.1 JSON. Point --data-dir at the folder "
        f"that holds squad/, or omit it to read {HUB_ID} from the hub.",
    )


def load(data_dir: Path | None) -> TaskData:

    if data_dir is not None:
        folder = _local_folder(Path(data_dir))
        # field="data": the official file nests articles under "data"; datasets reads it
        # as one row per article with its paragraphs as a list.
        ds = load_dataset(
            "json", data_files={split: str(folder / name) for split, name in FILES.items()}, field="data"
        )
        source = f"local:{folder}"
    else:
        ds = hub_dataset(HUB_ID, None, "squad/dev-v1.1.json and squad/train-subset.json")
        source = f"hub:{HUB_ID}"
    splits = []
    for name in ("train", "validation"):
        built, _ = nsp_pairs.build_pairs(nsp_pairs.articles_from_rows(ds[name]), PAIR_SEED)
        splits.append(Split(name, [(p.a, p.b) for p in built], [p.label for p in built],
                            [f"{name}/{p.id}" for p in built]))
    # The splitter's version and the rules travel with the records (task_version pins them too).
    source += (f"; pairs: pysbd=={importlib.metadata.version('pysbd')}, seed {PAIR_SEED}, "
               f">= {nsp_pairs.MIN_WORDS} words per sentence")
    return TaskData(splits[0], splits[1], source, TaskData.checksum(*splits))


TASK = TaskSpec(
    name="nsp",
    version="1",
    description=(
        "next-sentence prediction on Wikipedia sentence pairs built from SQuAD v1.1 contexts: pysbd sentences "
        f"with >= {nsp_pairs.MIN_WORDS} words ([notes] not counted; pairs over a shorter one are dropped); "
        "IsNext = sentences i, i+1 of one paragraph, NotNext = sentence i + a random sentence from another "
        f"article; exactly 50/50, seed {PAIR_SEED}; train on train-subset articles (2,598 pairs), report "
        "accuracy on dev articles (8,118 pairs); labels 0 = IsNext, 1 = NotNext (BERT's order)"
    ),
    kind=PAIR,
    hub_source=HUB_ID,
    local_layout="squad/train-subset.json, squad/dev-v1.1.json",
    metrics=("accuracy",),
    labels=nsp_pairs.LABELS,
    load=load,
    label="NSP",
)
