"""How the leaderboard names and orders tasks, regimes, metrics and poolings: read from berteval's registries.

Each registry entry carries its display name, and registry order is reading order: a task in
`berteval.tasks.TASKS` (`TaskSpec.label`), a regime in `berteval.regimes.REGIMES` (`Regime.label`),
a metric in `berteval.metrics.METRICS` (`Metric.label`), a pooling in `berteval.pooling.POOLINGS` (its
name). A name no registry holds (records of a task or regime removed since, a test's toy names) keeps
its own name and sorts after the registered ones, alphabetically. Light: no torch.
"""

from __future__ import annotations

from berteval.metrics import METRICS
from berteval.regimes import REGIMES
from berteval.tasks import TASKS


def _rank(registry: dict, name: str) -> tuple:
    keys = list(registry)
    return (keys.index(name), "") if name in registry else (len(keys), str(name))


def task_name(task: str) -> str:
    return TASKS[task].display_name if task in TASKS else task


def task_rank(task: str) -> tuple:
    return _rank(TASKS, task)


def regime_name(regime: str) -> str:
    return REGIMES[regime].label if regime in REGIMES else regime


def regime_rank(regime: str) -> tuple:
    return _rank(REGIMES, regime)


def regime_order(names) -> list[str]:
    return sorted(dict.fromkeys(names), key=regime_rank)


def metric_name(metric: str) -> str:
    label = METRICS[metric].label if metric in METRICS else ""
    return label or str(metric).replace("_", " ")


def reading_order(groups, fields: tuple[str, ...] = ("task", "model", "regime")) -> list[tuple]:
    """Group keys (tuples of `fields`, e.g. a groupby's keys) in reading order: tasks and regimes in their
    registries' order, anything else (models) alphabetically."""
    rank = {"task": task_rank, "regime": regime_rank}
    return sorted(groups, key=lambda key: tuple(rank.get(f, lambda v: (v,))(v) for f, v in zip(fields, key)))
