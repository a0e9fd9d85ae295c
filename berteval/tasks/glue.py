"""GLUE's sentence-pair tasks, one reader for all of them: GLUE's own TSV files or the hub's `nyu-mll/glue`.

Each pair task (`mrpc`, `rte`, `stsb`, `qnli`) is a `PairTask` entry: its folder and files under the data
dir, the two text columns and the label column of GLUE's TSV, how a label reads (class names in GLUE's
label order, or a 0-5 score for STS-B), and the hub config. Local files are checked first
(`validate.glue_tsv`: every row has the header's columns and a known label; not-official bytes are named),
then read through `datasets` (csv, tab-separated, QUOTE_NONE as GLUE writes them, BOM-aware); the hub's
copy gives the same columns' content as `sentence1`/`sentence2`/`label` (QNLI: `question`/`sentence`).
Labels follow the hub's order, so a local and a hub run mean the same class ids: MRPC 0 not equivalent,
1 equivalent; RTE and QNLI 0 entailment, 1 not entailment.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from ..errors import BertevalError
from . import validate
from .base import Split, TaskData, hub_dataset, load_dataset, local_folder

HUB_ID = "nyu-mll/glue"


@dataclass(frozen=True)
class PairTask:
    name: str  # the task's name in berteval (and the hub config)
    folder: str  # under <data dir>/glue/
    files: dict  # split -> file name ("train" may be missing: QNLI ships dev only here)
    columns: tuple[str, str]  # GLUE TSV columns of text A and text B
    label: str  # GLUE TSV label column
    labels: tuple[str, ...] | None  # class names in label-id order; None: a 0-5 score
    hub_columns: tuple[str, str] = ("sentence1", "sentence2")

    @property
    def layout(self) -> str:
        return ", ".join(f"glue/{self.folder}/{f}" for f in self.files.values())


def _label(task: PairTask, value) -> float | int:
    if task.labels is None:
        return float(value)
    if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
        return task.labels.index(value.strip())
    return int(value)


def load(task: PairTask, data_dir: Path | None) -> TaskData:

    splits: dict[str, Split] = {}
    if data_dir is not None:
        folder = local_folder(
            Path(data_dir), f"glue/{task.folder}", task.files.values(),
            f"no {task.name.upper()} data under {data_dir}: expected {task.layout} (GLUE's files). Point --data-dir "
            f"at the folder that holds glue/, or omit it to read {HUB_ID} ({task.name}) from the hub.")
        labels = task.labels if task.labels is None else (*task.labels, *map(str, range(len(task.labels))))
        notes = [n for split, name in task.files.items()
                 if (n := validate.glue_tsv(folder / name, (*task.columns, task.label), task.label, labels,
                                            key=f"glue/{task.folder}/{name}"))]
        ds = load_dataset("csv", data_files={s: str(folder / n) for s, n in task.files.items()},
                                   delimiter="\t", quoting=csv.QUOTE_NONE, keep_default_na=False,
                                   encoding="utf-8-sig")
        columns = (*task.columns, task.label)
        source = f"local:{folder}" + "".join(f"; {n}" for n in notes)
    else:
        ds = hub_dataset(HUB_ID, task.name, task.layout)
        columns = (*task.hub_columns, "label")
        source = f"hub:{HUB_ID}/{task.name}"
    for split in task.files:
        part = ds[split].select_columns(list(columns)).to_dict()
        a, b, y = (part[c] for c in columns)
        ys = [_label(task, v) for v in y]
        splits[split] = Split(split, [(str(x), str(z)) for x, z in zip(a, b)], ys,
                              [f"{split}-{i}" for i in range(len(ys))])
    if "validation" not in splits or not len(splits["validation"]):
        raise BertevalError(f"{task.name}: no dev examples were read")
    train = splits.get("train", Split("train", [], [], []))
    return TaskData(train, splits["validation"], source, TaskData.checksum(train, splits["validation"]))


MRPC = PairTask("mrpc", "MRPC", {"train": "train.tsv", "validation": "dev.tsv"}, ("#1 String", "#2 String"),
                "Quality", ("not_equivalent", "equivalent"))
RTE = PairTask("rte", "RTE", {"train": "train.tsv", "validation": "dev.tsv"}, ("sentence1", "sentence2"), "label",
               ("entailment", "not_entailment"))
STSB = PairTask("stsb", "STS-B", {"train": "train.tsv", "validation": "dev.tsv"}, ("sentence1", "sentence2"), "score",
                None)
QNLI = PairTask("qnli", "QNLI", {"validation": "dev.tsv"}, ("question", "sentence"), "label",
                ("entailment", "not_entailment"), hub_columns=("question", "sentence"))
