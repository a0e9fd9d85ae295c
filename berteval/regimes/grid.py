"""The pooled grid shared by the probe and the fine-tune: poolings x layers x training sizes x seeds.

Layer ids are canonical: -1 for the last layer, otherwise the absolute hidden-state
index (0 = embeddings), so `-2` on a 6-layer model and `5` name the same cell.

Training sizes (`--train-sizes 32,128,full`) make learning curves: a sized cell trains on
`size` examples that its seed draws from the run's train set, as the first `size` of one
seeded permutation, so one seed's subsets are nested (its 32 examples are among its 128)
and a curve moves by adding data, not by redrawing it. The encoder still sees the whole
train set once (the cached vectors are indexed by row), so every size costs one pass.
"""

from __future__ import annotations

from .. import pooling
from ..errors import BertevalError
from ..seeds import numpy_rng
from .base import TRAIN_DRAW, Cell

FULL = "full"  # the --train-sizes word for the whole train set (a cell without a size)


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


def parse_train_sizes(spec: str | None) -> list[int | None] | None:
    """'32,128,full' -> [32, 128, None] (None = the whole train set); None or '' -> None (no size axis)."""
    if spec in (None, ""):
        return None
    sizes: list[int | None] = []
    for part in (s.strip() for s in str(spec).split(",") if s.strip()):
        if part == FULL:
            sizes.append(None)
            continue
        if not part.isdigit() or int(part) < 2:
            raise BertevalError(f"--train-sizes takes comma-separated example counts (2 or more) and '{FULL}', "
                                f"such as 32,128,{FULL}; not {part!r}")
        sizes.append(int(part))
    return list(dict.fromkeys(sizes)) or None


def check_sizes(cells: list[Cell], available: int) -> None:
    """Refuse a size the train set cannot provide; the whole train set is spelled 'full'."""
    too_big = sorted({c.train_size for c in cells if c.train_size is not None and c.train_size >= available})
    if too_big:
        raise BertevalError(f"--train-sizes {', '.join(map(str, too_big))}: the train set here has {available:,} "
                            f"examples; ask for fewer, or '{FULL}' for all of them")


def draw_rows(available: int, cell: Cell):
    """The train rows a cell fits on: every row, or the seed's nested draw of `train_size` rows (sorted)."""
    import numpy as np

    if cell.train_size is None:
        return np.arange(available)
    return np.sort(numpy_rng(cell.seed, "sizes").permutation(available)[: cell.train_size])


def pooled_cells(run, poolings: list[str], layers: list[int]) -> list[Cell]:
    """Every (pooling, layer, size, seed) the options ask for, layer-major as the probe encodes them. A pooling
    defined on the last layer only runs there; a grid left empty by that is an error, not a silent no-op."""
    sizes = run.spec.train_sizes or [None]
    cells = [Cell(p, layer, seed, size) for layer in layers for p in poolings for size in sizes
             for seed in run.spec.seeds if not (pooling.POOLINGS[p].last_layer_only and layer != -1)]
    dropped = [p for p in poolings if pooling.POOLINGS[p].last_layer_only and any(x != -1 for x in layers)]
    if not cells:
        raise BertevalError(f"{', '.join(dropped)} is defined on the last layer only, and --layers asks for "
                            f"{', '.join(map(str, layers))}: nothing to run. Add -1 to --layers, or drop "
                            f"--layers for the last layer.")
    if dropped:
        run.note(f"{', '.join(dropped)} is defined on the last layer only; it is run at layer -1 alone")
    return cells


def sized_config(cell: Cell, rows, available: int) -> dict:
    """What a record says about the examples it trained on (none for an unsized cell)."""
    if cell.train_size is None:
        return {}
    return {"train_size": cell.train_size, "train_draw": TRAIN_DRAW, "train_drawn_from": available,
            "train_rows_sha256": _rows_sha(rows)}


def _rows_sha(rows) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(np.asarray(rows, dtype=np.int64).tobytes()).hexdigest()


def check_poolings(run, todo: list[Cell], caveat_suffix: str = "") -> None:
    """Refuse a pooling the loaded checkpoint cannot provide; note one that is not what its name promises."""
    for name in dict.fromkeys(c.pooling for c in todo):
        pooling.check_available(name, run.model.heads)
        if caveat := pooling.warning(name, run.model.heads):
            run.note(caveat + caveat_suffix)
