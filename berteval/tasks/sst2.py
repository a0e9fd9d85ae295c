"""GLUE SST-2: binary sentence sentiment (0 = negative, 1 = positive).

Train on GLUE train (67,349 sentences), report on GLUE dev (872), read through
`datasets` either from the hub (`nyu-mll/glue`, config `sst2`) or from a local folder
with GLUE's own `train.tsv` and `dev.tsv` (header `sentence<TAB>label`, no quoting).
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..errors import BertevalError
from . import validate
from .base import SENTENCE, Split, TaskData, TaskSpec, hub_dataset, load_dataset, local_folder

HUB_ID, HUB_CONFIG = "nyu-mll/glue", "sst2"
FILES = {"train": "train.tsv", "validation": "dev.tsv"}


def _local_folder(data_dir: Path) -> Path:
    return local_folder(
        data_dir, "sst2", FILES.values(),
        f"no SST-2 data under {data_dir}: expected sst2/train.tsv and sst2/dev.tsv (GLUE's files). "
        f"Point --data-dir at the folder that holds sst2/, or omit it to read {HUB_ID} from the hub.",
    )


def load(data_dir: Path | None) -> TaskData:

    if data_dir is not None:
        folder = _local_folder(Path(data_dir))
        files = {split: str(folder / name) for split, name in FILES.items()}
        notes = [n for name in FILES.values()
                 if (n := validate.glue_tsv(folder / name, ("sentence", "label"), "label", ("0", "1"),
                                            key=f"sst2/{name}"))]
        # QUOTE_NONE: GLUE's TSV has bare quotes inside sentences; keep_default_na keeps
        # sentences such as "null" as text.
        ds = load_dataset(
            "csv", data_files=files, delimiter="\t", quoting=csv.QUOTE_NONE, keep_default_na=False
        )
        source = f"local:{folder}" + "".join(f"; {n}" for n in notes)
    else:
        ds = hub_dataset(HUB_ID, HUB_CONFIG, "sst2/train.tsv and sst2/dev.tsv")
        source = f"hub:{HUB_ID}/{HUB_CONFIG}"
    splits = []
    for name in ("train", "validation"):
        part = ds[name].select_columns(["sentence", "label"]).to_dict()  # column-wise: row-wise reads take seconds
        if set(part["label"]) - {0, 1}:
            raise BertevalError(f"SST-2 {name} has labels other than 0/1; is this the GLUE file?")
        splits.append(Split(name, list(part["sentence"]), [int(x) for x in part["label"]],
                            [f"{name}-{i}" for i in range(len(part["label"]))]))
    return TaskData(splits[0], splits[1], source, TaskData.checksum(*splits))


TASK = TaskSpec(
    name="sst2",
    version="1",
    description="GLUE SST-2 sentence sentiment: train on train (67,349), report accuracy on dev (872)",
    kind=SENTENCE,
    hub_source=f"{HUB_ID} ({HUB_CONFIG})",
    local_layout="sst2/train.tsv, sst2/dev.tsv",
    metrics=("accuracy",),
    labels=("negative", "positive"),
    load=load,
    label="SST-2",
)
