"""Local data files checked before any model loads: one line naming the file, the row or field, and
what is wrong; and a word when a file is readable but not the official one.

A cut TSV row, a label GLUE does not have, a header-only file, a SQuAD question without `answers`
or with an `answer_start` outside its context: each is refused here, in a second, instead of a
traceback after minutes of encoding (or, for SQuAD, at scoring). A file that parses but differs from
the official bytes (`OFFICIAL`: sha256 and size of the files of shared/data, which its README
traces to GLUE's and SQuAD's own files) is accepted with a note: its records say so, because a
dev file cut at a row boundary is still a valid TSV and would otherwise be scored as "validation".
Standard library only.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from pathlib import Path

from ..errors import BertevalError

# (sha256, bytes) of the official files, keyed by their path under the data dir.
OFFICIAL = {
    "sst2/train.tsv": ("48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1", 3806081),
    "sst2/dev.tsv": ("54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0", 94931),
    "squad/dev-v1.1.json": ("95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9", 4854279),
    "squad/train-subset.json": ("62ab408bc5b1a022e5bd61135fc025b08ec2284ec9e09f9febb49e75b5236bbe", 1238980),
    "squad/train-v1.1-reconstructed.json": ("a2cd44bf171e60885ecbbf5c1213898e46caaf11779accc45eeae95a9e060ea0",
                                            30635262),
    "glue/MRPC/train.tsv": ("122becc469405bc16f9defcb8715d2a4b7ce600e9d9381e6dc42bfdd1494c51d", 919457),
    "glue/MRPC/dev.tsv": ("81c8a1a9e1dfe461dd2c1a4f98f43fe18bece44d2bf9e3d0b245b88e5aa5eaf7", 103255),
    "glue/RTE/train.tsv": ("81d25e323e1ab5b2ad7cd445f1a69db89f2b1c104f3e26915a9421aa4a5f4735", 846227),
    "glue/RTE/dev.tsv": ("80230dfa1347282e7b532b06a1004a76a710087541189bf874223ddf0e3819fb", 90343),
    "glue/STS-B/train.tsv": ("41c4d978b6162abdcada7e49a982211954cca5459c228db478af333124b257a2", 984099),
    "glue/STS-B/dev.tsv": ("fe7dc0632a5033562f3cadff991f6e8d9b9b6311861660e78c3c82eb7db67f59", 276928),
    "glue/QNLI/dev.tsv": ("763e95932dd3578251de71582e06829015f9c3815a518c751dc537219b159de4", 1367333),
}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def official_note(path: Path, key: str) -> str | None:
    """None for the official file; otherwise a sentence saying how this one differs."""
    known = OFFICIAL.get(key)
    if known is None:
        return None
    size = path.stat().st_size
    if size == known[1] and _sha256(path) == known[0]:
        return None
    note = (f"{key} is not the official file ({size:,} bytes, the official one {known[1]:,}; sha256 differs): "
            f"scores on it are not comparable with official-data records")
    print(f"warning: {note}", file=sys.stderr)
    return note


def _open_error(path: Path) -> BertevalError | None:
    if not path.exists():
        return BertevalError(f"{path}: no such file")
    if not path.is_file():
        return BertevalError(f"{path}: is not a file")
    return None


def glue_tsv(path: Path, required: tuple[str, ...], label: str, labels: tuple[str, ...] | None,
             key: str | None = None) -> str | None:
    """Check a GLUE TSV (QUOTE_NONE, a header, the header's number of columns in every row, a known label, or
    with `labels` None a score from 0 to 5); the not-official note (or None)."""
    path = Path(path)
    if (err := _open_error(path)) is not None:
        raise err
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if not header:
            raise BertevalError(f"{path}: empty file (a GLUE TSV starts with a header: {', '.join(required)})")
        missing = [c for c in required if c not in header]
        if missing:
            raise BertevalError(f"{path}: the header lacks {', '.join(missing)} (it has {', '.join(header)})")
        where = header.index(label)
        n = 0
        for number, row in enumerate(reader, 2):
            if not row:
                continue
            if len(row) != len(header):
                raise BertevalError(f"{path}, line {number}: {len(row)} columns, the header has {len(header)} "
                                    f"(a cut or broken row)")
            value = row[where].strip()
            if labels is not None and value not in labels:
                raise BertevalError(f"{path}, line {number}: label {value!r} is not one of {', '.join(labels)}")
            if labels is None:
                try:
                    score = float(value)
                except ValueError:
                    raise BertevalError(f"{path}, line {number}: score {value!r} is not a number") from None
                if not 0.0 <= score <= 5.0:
                    raise BertevalError(f"{path}, line {number}: score {score} is outside 0-5")
            n += 1
        if n == 0:
            raise BertevalError(f"{path}: a header and no rows")
    return official_note(path, key) if key else None


def squad_json(path: Path, key: str | None = None, check_offsets: bool = True) -> str | None:
    """Check a SQuAD v1.1 JSON file: parses, `data` of articles with paragraphs, each paragraph a `context` and
    `qas`, each question an `id`, a `question` and a non-empty `answers` list whose texts sit at their
    `answer_start` in the context; the not-official note (or None)."""
    path = Path(path)
    if (err := _open_error(path)) is not None:
        raise err
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BertevalError(f"{path}: not valid JSON ({exc}); a cut or damaged file?") from None
    articles = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(articles, list) or not articles:
        raise BertevalError(f"{path}: no `data` list of articles (official SQuAD v1.1 JSON has one)")
    for a, art in enumerate(articles):
        paragraphs = art.get("paragraphs") if isinstance(art, dict) else None
        if not isinstance(paragraphs, list):
            raise BertevalError(f"{path}: data[{a}] has no `paragraphs` list")
        for p, para in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            context = para.get("context") if isinstance(para, dict) else None
            if not isinstance(context, str):
                raise BertevalError(f"{path}: {where} has no `context` text")
            if not isinstance(para.get("qas"), list):
                raise BertevalError(f"{path}: {where} has no `qas` list")
            for q, qa in enumerate(para["qas"]):
                here = f"{where}.qas[{q}]"
                for field in ("id", "question"):
                    if not isinstance(qa.get(field) if isinstance(qa, dict) else None, str):
                        raise BertevalError(f"{path}: {here} has no `{field}`")
                answers = qa.get("answers")
                if not isinstance(answers, list) or not answers:
                    raise BertevalError(f"{path}: {here} (id {qa['id']}) has no `answers`")
                for k, ans in enumerate(answers):
                    text = ans.get("text") if isinstance(ans, dict) else None
                    start = ans.get("answer_start") if isinstance(ans, dict) else None
                    if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
                        raise BertevalError(f"{path}: {here}.answers[{k}] needs a `text` and an integer "
                                            f"`answer_start`")
                    if check_offsets and context[start : start + len(text)] != text:
                        raise BertevalError(f"{path}: {here}.answers[{k}]: `answer_start` {start} does not point "
                                            f"at its text {text[:40]!r} in the context")
    return official_note(path, key) if key else None
