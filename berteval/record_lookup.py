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


def command(rec: RunRecord) -> str:
    """The command that wrote a record, as a reader would type it: `python -m berteval ...` in place of the
    interpreter's path to berteval/__main__.py (records keep sys.argv as it was)."""
    raw = str(rec.config.get("command", "")).strip()
    if not raw:
        return ""
    head, _, rest = raw.partition(" ")
    if head.endswith(("berteval/__main__.py", "berteval")) or head.endswith("-m"):
        return f"python -m berteval {rest}".strip()
    return raw
