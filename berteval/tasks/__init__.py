"""The task registry: one entry per task, read by the CLI, the runner and `ls`."""

from __future__ import annotations

from ..errors import BertevalError
from . import mrpc, nsp, qnli, rte, squad, sst2, stsb
from .base import Split, TaskData, TaskSpec

# Registry order is reading order: the CLI, `ls`, the leaderboard's panels and findings list tasks so.
TASKS: dict[str, TaskSpec] = {t.name: t for t in (sst2.TASK, nsp.TASK, mrpc.TASK, rte.TASK, stsb.TASK, qnli.TASK,
                                                   squad.TASK)}


def get(name: str) -> TaskSpec:
    try:
        return TASKS[name]
    except KeyError:
        raise BertevalError(f"unknown task {name!r}; choose from {', '.join(TASKS)}") from None


__all__ = ["TASKS", "Split", "TaskData", "TaskSpec", "get"]
