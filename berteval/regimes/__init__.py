"""The regime registry: how a head gets its weights (probe, finetune, its LoRA variant finetune-lora whose
adapter is kept, the small-BERT protocol finetune-small, pretrained, and span QA's other fine-tunes).

Each regime is a module of this package holding a `REGIME`: its name, its label on the
leaderboard, what it does, and its implementation per kind of task; registry order is the
order the CLI, `ls` and the leaderboard list them in. Adding a regime is one module and one
entry below. An unknown regime, one that does not run the task's kind, or an option its
implementation does not declare (`Contract`), is refused with the names that would work.
k-fold cross-validation (`kfold`) wraps a span fine-tune; its records' split says so (`is_kfold`).
Importing this package imports no torch (implementations load their libraries when they run).
"""

from __future__ import annotations

from ..errors import BertevalError
from . import finetune, finetune_full, finetune_lora, finetune_lora_plus, finetune_small, pretrained, probe
from .base import COMMON_FLAGS, OPTIONS, Cell, CellRegime, CellResult, Contract, Regime, Run, RunSpec
from .kfold import KFOLD_SPLIT, KFold, is_estimate, is_kfold

REGIMES: dict[str, Regime] = {m.REGIME.name: m.REGIME
                              for m in (probe, finetune, finetune_lora, finetune_small, pretrained, finetune_lora_plus,
                                        finetune_full)}


def supported(task) -> list[str]:
    return [name for name, r in REGIMES.items() if task.kind in r.kinds]


def get(name: str, task) -> CellRegime:
    """The implementation of regime `name` for this task, or a refusal naming what would work."""
    if name not in REGIMES:
        raise BertevalError(f"unknown regime {name!r}; choose from {', '.join(REGIMES)}")
    if task.kind not in REGIMES[name].kinds:
        raise BertevalError(f"task {task.name!r} has no regime {name!r}; it supports {', '.join(supported(task))}")
    return REGIMES[name].for_task(task)


def check_options(spec: RunSpec, impl: CellRegime) -> None:
    """Refuse the options this run sets that the regime's implementation for its task does not declare: one
    message naming the regime, the options it takes and, for each refused one, the regimes that take it here."""
    refused = [name for name, (_, is_set) in OPTIONS.items() if is_set(spec) and name not in impl.contract.options]
    if not refused:
        return
    task = spec.task
    others = {r: get(r, task).contract.options for r in supported(task) if r != spec.regime}
    hints = []
    for name in refused:
        takers = [r for r, options in others.items() if name in options]
        hints.append(f"{OPTIONS[name][0]} is for --regime {' or '.join(takers)}" if takers else
                     f"no regime takes {OPTIONS[name][0]} on {task.name}")
    takes = ", ".join(impl.contract.flags()) or "no option of its own"
    raise BertevalError(f"--regime {spec.regime} on {task.name} ({task.kind}) takes {takes} (and every run's "
                        f"{COMMON_FLAGS}); drop {', '.join(OPTIONS[n][0] for n in refused)} "
                        f"({'; '.join(hints)})")


__all__ = ["KFOLD_SPLIT", "REGIMES", "Cell", "CellRegime", "CellResult", "Contract", "KFold", "Regime", "Run",
           "RunSpec", "check_options", "get", "is_estimate", "is_kfold", "supported"]
