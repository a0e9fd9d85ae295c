"""The pooled grid shared by the probe and the fine-tune: poolings x layers x seeds.

Layer ids are canonical: -1 for the last layer, otherwise the absolute hidden-state
index (0 = embeddings), so `-2` on a 6-layer model and `5` name the same cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import pooling
from ..errors import BertevalError
from .base import Cell


@dataclass
class PooledData:
    """What a pooled regime prepares once: its run and the splits (and checksum) every cell reads."""

    run: object
    train: object  # tasks.base.Split
    evals: object
    data_sha: str


def resolve_layer(layer: int, num_hidden_states: int) -> int:
    idx = layer + num_hidden_states if layer < 0 else layer
    if not 0 <= idx < num_hidden_states:
        raise BertevalError(
            f"layer {layer} does not exist: this model has hidden states 0..{num_hidden_states - 1} "
            f"(0 = embeddings, -1 = last layer)"
        )
    return -1 if idx == num_hidden_states - 1 else idx


def parse_layers(spec: str | None, num_hidden_states: int) -> list[int]:
    if spec in (None, ""):
        return [-1]
    try:
        raw = [int(s) for s in str(spec).split(",") if s.strip()]
    except ValueError as exc:
        raise BertevalError(f"--layers takes comma-separated integers such as -1,-2,3, not {spec!r}") from exc
    return list(dict.fromkeys(resolve_layer(r, num_hidden_states) for r in raw))


def pooled_cells(run, poolings: list[str], layers: list[int]) -> list[Cell]:
    """Every (pooling, layer, seed) the options ask for, layer-major as the probe encodes them. A pooling
    defined on the last layer only runs there; a grid left empty by that is an error, not a silent no-op."""
    cells = [Cell(p, layer, seed) for layer in layers for p in poolings for seed in run.spec.seeds
             if not (pooling.POOLINGS[p].last_layer_only and layer != -1)]
    dropped = [p for p in poolings if pooling.POOLINGS[p].last_layer_only and any(x != -1 for x in layers)]
    if not cells:
        raise BertevalError(f"{', '.join(dropped)} is defined on the last layer only, and --layers asks for "
                            f"{', '.join(map(str, layers))}: nothing to run. Add -1 to --layers, or drop "
                            f"--layers for the last layer.")
    if dropped:
        run.note(f"{', '.join(dropped)} is defined on the last layer only; it is run at layer -1 alone")
    return cells


def pooled_identity(run, cell: Cell, data_sha: str, n_train: int) -> dict:
    """The identity fields a pooled cell shares across regimes; each regime adds its own protocol."""
    from .. import records

    return {"schema": records.SCHEMA_VERSION, "model": run.identity.model_id, "revision": run.identity.revision,
            "task": run.task.name, "task_version": run.task.version, "data": data_sha, "pooling": cell.pooling,
            "regime": run.spec.regime, "layer": cell.layer, "seed": cell.seed, "n_train": n_train,
            "max_length": run.max_length, "dtype": run.spec.dtype}


def check_poolings(run, todo: list[Cell], caveat_suffix: str = "") -> None:
    """Refuse a pooling the loaded checkpoint cannot provide; note one that is not what its name promises."""
    for name in dict.fromkeys(c.pooling for c in todo):
        pooling.check_available(name, run.model.heads)
        if caveat := pooling.warning(name, run.model.heads):
            run.note(caveat + caveat_suffix)
