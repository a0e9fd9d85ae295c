"""Find records by what a person types: a model name as `--model` takes it, one head of one run.

`--model default` writes records whose `model` is the checkpoint's id
(`sentence-transformers/all-MiniLM-L6-v2`), and a derived encoder `default+nsp-pooler` writes
`<that id>+nsp-pooler`; `export` and `disagree` accept either spelling. The short name is resolved
from the records themselves (`config.model_source` says which records came from `default`), so
this module needs neither the model loader nor torch. Torch-free.
"""

from __future__ import annotations

from .errors import BertevalError
from .records import RunRecord


def model_id(name: str, records: list[RunRecord]) -> str:
    """The records' model id for `name`: an id as written in the records, `default`, or `default+<variant>`."""
    ids = sorted({r.model for r in records})
    if name in ids:
        return name
    from .models.pretrained import PRETRAINED  # light: names only

    if name in PRETRAINED and PRETRAINED[name].model_id in ids:  # a twin pre-trained here: berteval/<name>
        return PRETRAINED[name].model_id
    base, plus, variant = name.partition("+")
    base_ids = sorted({r.model for r in records if r.config.get("model_source") == base})
    if len(base_ids) == 1:
        wanted = base_ids[0] + (f"+{variant}" if plus else "")
        if wanted in ids:
            return wanted
    raise BertevalError(f"no records of model {name!r}; models with records: {', '.join(ids) or 'none'}")


def of_model(name: str, records: list[RunRecord]) -> tuple[str, list[RunRecord]]:
    mid = model_id(name, records)
    return mid, [r for r in records if r.model == mid]


def short_name(model: str) -> str:
    """`sentence-transformers/all-MiniLM-L6-v2+nsp-pooler` -> `all-MiniLM-L6-v2+nsp-pooler`."""
    return model.rsplit("/", 1)[-1]


def main_setup(records: list[RunRecord]) -> list[RunRecord]:
    """Where one cell was run in several setups (a quick `--limit-train` run beside the full one, another dtype),
    the records of the setup trained on the most examples, then the most seeds; a leaderboard row's setup."""
    if not records:
        return []
    groups: dict[tuple, list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.model_revision, r.task_version, r.data_sha256, r.n_train, r.dtype), []).append(r)
    return max(groups.values(), key=lambda rs: (rs[0].n_train, len({r.seed for r in rs}), rs[0].dtype == "fp32"))


# The docs' folders, relative to the repository root, where a reproduce command names a folder of the machine
# that ran it: the data beside the clone, and the committed results.
DOCS_DATA_DIR = "../shared/data"
DOCS_RESULTS = "leaderboard/results"


def _docs_path(option: str, value: str) -> str:
    """`value` of a folder option as the docs write it: any absolute data folder is `../shared/data`; an absolute
    results folder ending in leaderboard/results is `leaderboard/results`. Other values stay as typed (`/tmp/r`
    names no machine's layout, and a relative path already reads the same everywhere)."""
    if not value.startswith("/"):
        return value
    if option == "--data-dir":
        return DOCS_DATA_DIR
    if option == "--out" and value.rstrip("/").endswith("/" + DOCS_RESULTS):
        return DOCS_RESULTS
    return value


def _relative(args: str) -> str:
    words = args.split(" ")
    out = []
    for i, w in enumerate(words):
        option, eq, value = w.partition("=")
        if eq and option in ("--data-dir", "--out"):
            out.append(f"{option}={_docs_path(option, value)}")
        elif i > 0 and words[i - 1] in ("--data-dir", "--out"):
            out.append(_docs_path(words[i - 1], w))
        else:
            out.append(w)
    return " ".join(out)


def command(rec: RunRecord) -> str:
    """The command that wrote a record, as a reader would type it from the repository root: `python -m berteval
    ...` in place of the interpreter's path to berteval/__main__.py, and the docs' relative folders
    (`--data-dir ../shared/data`, `--out leaderboard/results`) in place of the absolute ones of the machine that
    ran it. The records keep sys.argv as it was; only what is shown changes."""
    raw = str(rec.config.get("command", "")).strip()
    if not raw:
        return ""
    head, _, rest = raw.partition(" ")
    if head.endswith(("berteval/__main__.py", "berteval")) or head.endswith("-m"):
        return f"python -m berteval {_relative(rest)}".strip()
    return _relative(raw)
