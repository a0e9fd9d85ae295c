"""What a regime is, and what one cell of a run hands back to the cell loop.

A regime turns a task's data and an encoder into predictions. It is split in four, so
the loop in `berteval.runs` can skip finished work before paying for anything:
- `cells(run)`: the grid this run asks for (pooling x layer x seed), refusing options
  that do not apply; nothing is loaded.
- `identity(run, cell)`: everything that defines the cell's result; its hash is the run
  id. It may read the data (for its checksum) and the model's config, not its weights.
- `prepare(run, todo)`: once per run, for the unfinished cells only: load the model,
  encode the data, tokenise.
- `fit_predict(prepared, cell, run_id)`: train (or not) and predict one cell.
Torch-free at import time: heavy libraries are imported inside `prepare`/`fit_predict`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import BertevalError

if TYPE_CHECKING:
    import numpy as np

    from ..runs import Run


@dataclass(frozen=True)
class Cell:
    pooling: str  # a key of berteval.pooling.POOLINGS, or what the head reads ("span", "nsp-head")
    layer: int = -1  # canonical hidden-state index, -1 = last
    seed: int = 0
    # Training examples drawn by the seed from the run's train set (a learning-curve point); None = all of
    # it. Only a sized cell adds the size and the draw rule to its identity, so every other run id stays.
    train_size: int | None = None


@dataclass
class CellResult:
    metrics: dict[str, float]
    data_sha256: str  # checksum of the train + eval data this cell used
    split: str  # the split the metrics are computed on
    n_train: int
    n_eval: int
    config: dict[str, Any] = field(default_factory=dict)  # regime-specific, into the record's config
    predictions: dict | None = None  # per-example predictions, written beside the record
    correct: "np.ndarray | None" = None  # per-example correctness, for paired tests (classification)
    head: dict | None = None  # arrays of a linear head, saved as heads/<task>/<run_id>.npz
    wall_s: float | None = None  # the cell's own cost; None = the loop times fit_predict
    cleanup: Callable[[], None] | None = None  # run once the record is stored (e.g. drop a checkpoint)


class CellRegime:
    """One regime's implementation for the kinds of task it serves."""

    def cells(self, run: "Run") -> list[Cell]:
        raise NotImplementedError

    def identity(self, run: "Run", cell: Cell) -> dict:
        raise NotImplementedError

    def prepare(self, run: "Run", todo: list[Cell]) -> Any:
        raise NotImplementedError

    def fit_predict(self, prepared: Any, cell: Cell, run_id: str) -> CellResult:
        raise NotImplementedError


@dataclass(frozen=True)
class Regime:
    """A regime's name, what it does, and its implementation per kind of task."""

    name: str
    description: str
    implementations: dict[str, Callable[[], CellRegime]]  # task kind -> factory

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.implementations)

    def for_task(self, task) -> CellRegime:
        if task.kind not in self.implementations:
            raise BertevalError(f"regime {self.name!r} does not run {task.kind} tasks such as {task.name!r}; "
                                f"it runs {', '.join(self.kinds)}")
        return self.implementations[task.kind]()
