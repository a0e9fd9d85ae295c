"""The regime registry: how a head gets its weights (probe, finetune, pretrained).

Each regime is a module of this package holding a `REGIME`: its name, what it does, and
its implementation per kind of task. Adding a regime is one module and one entry below.
An unknown regime, or one that does not run the task's kind, is refused with the names
that would work. Importing this package imports no torch (implementations load their
libraries when they run).
"""

from __future__ import annotations

from ..errors import BertevalError
from . import finetune, finetune_full, finetune_lora_plus, pretrained, probe
from .base import Cell, CellRegime, CellResult, Regime

REGIMES: dict[str, Regime] = {m.REGIME.name: m.REGIME
                              for m in (probe, finetune, pretrained, finetune_lora_plus, finetune_full)}


def supported(task) -> list[str]:
    return [name for name, r in REGIMES.items() if task.kind in r.kinds]


def get(name: str, task) -> CellRegime:
    """The implementation of regime `name` for this task, or a refusal naming what would work."""
    if name not in REGIMES:
        raise BertevalError(f"unknown regime {name!r}; choose from {', '.join(REGIMES)}")
    if task.kind not in REGIMES[name].kinds:
        raise BertevalError(f"task {task.name!r} has no regime {name!r}; it supports {', '.join(supported(task))}")
    return REGIMES[name].for_task(task)


__all__ = ["REGIMES", "Cell", "CellRegime", "CellResult", "Regime", "get", "supported"]
