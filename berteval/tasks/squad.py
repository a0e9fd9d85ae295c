"""SQuAD v1.1 extractive question answering.

Read through `datasets`, from the hub (`rajpurkar/squad`) or from local files in the
official JSON format under `<data dir>/squad/`: `dev-v1.1.json` (the official dev set,
10,570 questions) for evaluation and, for training, `train-v1.1.json` when present, else
`train-subset.json` (17 real train articles, 3,939 questions: the full train set is not
available offline here, and every record says which one it used).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import BertevalError
from ..qa import DEFAULTS as QA_DEFAULTS
from . import validate
from .base import SPAN, Split, TaskData, TaskSpec, hub_dataset, load_dataset, local_folder

HUB_ID = "rajpurkar/squad"
TRAIN_FILES = ("train-v1.1.json", "train-subset.json")
RECONSTRUCTED = "train-v1.1-reconstructed.json"
DEV_FILE = "dev-v1.1.json"


@dataclass(frozen=True)
class Answers:
    """The gold answers of one question: texts and their character offsets in the context."""

    texts: tuple[str, ...]  # dev has up to several per question; train one
    starts: tuple[int, ...]


@dataclass(frozen=True)
class QAExample:
    id: str
    title: str
    question: str
    context: str
    answers: tuple[str, ...]  # gold answer texts (dev has up to several per question)
    answer_starts: tuple[int, ...]  # character offsets of each answer in the context


def to_split(name: str, examples: list[QAExample]) -> Split:
    """The task's data contract: inputs (question, context), labels `Answers`, ids, article titles."""
    return Split(name, [(e.question, e.context) for e in examples],
                 [Answers(e.answers, e.answer_starts) for e in examples], [e.id for e in examples],
                 [e.title for e in examples])


def checksum(*splits: Split) -> str:
    """sha256 over id, question, context and gold answers of every question, split by split."""
    digest = hashlib.sha256()
    for split in splits:
        digest.update(b"#split\n")
        for qid, (question, context), gold in zip(split.ids, split.texts, split.labels):
            digest.update("\x1f".join([qid, question, context, *gold.texts, *map(str, gold.starts)]).encode() + b"\n")
    return digest.hexdigest()


def _flatten_articles(rows) -> list[QAExample]:
    """Official nested format (article -> paragraphs -> qas) to one example per question."""
    out = []
    for article in rows:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                answers = qa.get("answers") or []
                out.append(QAExample(qa["id"], article.get("title", ""), qa["question"], para["context"],
                                     tuple(a["text"] for a in answers),
                                     tuple(int(a["answer_start"]) for a in answers)))
    return out


def _from_flat(rows) -> list[QAExample]:
    """The hub's flat format (one row per question, answers as parallel lists)."""
    return [QAExample(r["id"], r.get("title", ""), r["question"], r["context"], tuple(r["answers"]["text"]),
                      tuple(int(s) for s in r["answers"]["answer_start"])) for r in rows]


FULL_FILES = ("train-v1.1.json", RECONSTRUCTED)


def trained_on_full_train(config: dict) -> bool:
    """Whether a record (its config) trained on the full train set (official or reconstructed) rather than
    the 17-article subset: the record's `train_source` names the file it read."""
    source = str(config.get("train_source", ""))
    return RECONSTRUCTED in source or source.startswith("train-v1.1.json")


def _relocated(path: Path) -> tuple[Path, dict]:
    """The reconstructed train set with every ambiguous answer at the offset rule's occurrence, written once
    into the cache (keyed by the file's checksum) for `datasets` to read; and what moved."""
    import json

    from .. import config
    from ..store import write_atomic
    from . import squad_offsets

    digest = validate._sha256(path)
    out = config.cache_dir() / "squad" / f"train-relocated-{digest[:16]}.json"
    meta = out.with_suffix(".moved.json")
    if out.is_file() and meta.is_file() and json.loads(meta.read_text()).get("source_sha256") == digest:
        return out, json.loads(meta.read_text())
    doc, moved = squad_offsets.relocate(json.loads(path.read_text(encoding="utf-8")))
    moved["source_sha256"] = digest
    write_atomic(out, json.dumps(doc).encode("utf-8"))
    write_atomic(meta, json.dumps(moved).encode("utf-8"))
    return out, moved


def _local(data_dir: Path, train_set: str = "subset") -> tuple[list[QAExample], list[QAExample], str, str]:
    folder = local_folder(data_dir, "squad", [DEV_FILE])
    names = FULL_FILES if train_set == "full" else TRAIN_FILES
    train_file = next((folder / n for n in names if folder and (folder / n).is_file()), None)
    if train_set == "full" and train_file is None:
        raise BertevalError(f"--train-set full reads squad/train-v1.1.json or squad/{RECONSTRUCTED} under "
                            f"{data_dir}; neither is there")
    if folder is None or train_file is None:
        raise BertevalError(
            f"no SQuAD data under {data_dir}: expected squad/{DEV_FILE} and squad/train-v1.1.json or "
            f"squad/train-subset.json (official SQuAD v1.1 JSON). Point --data-dir at the folder holding "
            f"squad/, or omit it to read {HUB_ID} from the hub."
        )
    notes = [n for f in (train_file, folder / DEV_FILE)
             if (n := validate.squad_json(f, key=f"squad/{f.name}"))]
    read_train, source_name = train_file, train_file.name
    if train_file.name == RECONSTRUCTED:
        read_train, moved = _relocated(train_file)
        source_name = (f"{RECONSTRUCTED} (the official train set rebuilt from the explorer pages; ids synthetic; "
                       f"{moved['moved']:,} of {moved['ambiguous_answers']:,} ambiguous answers moved by the rule: "
                       f"{moved['rule']})")
    # field="data": the official files keep the articles under a top-level "data" key.
    ds = load_dataset("json", data_files={"train": str(read_train), "validation": str(folder / DEV_FILE)},
                      field="data")
    return (_flatten_articles(ds["train"]), _flatten_articles(ds["validation"]),
            f"local:{folder}" + "".join(f"; {n}" for n in notes), source_name)


def load(data_dir: Path | None, train_set: str = "subset") -> TaskData:
    if train_set not in ("subset", "full"):
        raise BertevalError(f"--train-set {train_set!r}: subset or full")
    if data_dir is not None:
        train, dev, source, train_source = _local(Path(data_dir), train_set)
    else:
        ds = hub_dataset(HUB_ID, None, f"squad/{DEV_FILE} and squad/train-subset.json")
        train, dev, source, train_source = _from_flat(ds["train"]), _from_flat(ds["validation"]), f"hub:{HUB_ID}", "hub train"
    if not dev or not train:
        raise BertevalError("SQuAD data is empty: check the files")
    splits = to_split("train", train), to_split("validation", dev)
    return TaskData(*splits, source, checksum(*splits), {"train_source": train_source})


TASK = TaskSpec(
    name="squad",
    version="1",
    description="SQuAD v1.1 span QA: a start/end head over every token; exact match and F1 (0-100) on the "
                "official dev set (10,570 questions); trained on squad/train-subset.json (3,939 questions) offline",
    kind=SPAN,
    hub_source=HUB_ID,
    local_layout=f"squad/{DEV_FILE}, squad/train-subset.json (or train-v1.1.json)",
    metrics=("f1", "exact_match"),
    labels=(),
    load=load,
    max_length=QA_DEFAULTS.max_length,
    checksum=checksum,
    label="SQuAD v1.1",
)
