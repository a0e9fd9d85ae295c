"""What an ablation costs: the SST-2 probe over one pooling against four, each from a cold feature cache.

A researcher widening `--pooling mean` to `cls,pooler,mean,max` should pay for the encoder pass, not for the
probe fits: the pass yields every pooling at once, and the fits (`berteval.heads.newton_logistic`) should cost little
beside it. This runs both commands through `berteval.runs` (the CLI's own path), each with a fresh feature
cache and a throwaway results folder, and reports wall time, encoding and fitting for each and their ratio.
The machine's drift between two runs is of the same order as the fits, so the fits' own seconds are reported
too: what the extra cells add is (fits of the wide run) - (fits of the narrow one).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

NARROW, WIDE = ["mean"], ["cls", "pooler", "mean", "max"]


@dataclass
class AblationRun:
    poolings: list[str]
    cells: int
    wall_s: float
    encode_s: float
    fits_s: float  # the cells' own wall seconds (probe fits and predictions), summed


def _one(model: str, data_dir: Path, poolings: list[str], seeds: list[int], limit_train: int | None) -> AblationRun:
    from .. import runs
    from ..config import CACHE_ENV
    from ..tasks import get

    with tempfile.TemporaryDirectory(prefix="berteval-ablation-") as tmp, \
            mock.patch.dict(os.environ, {CACHE_ENV: str(Path(tmp) / "cache")}):  # cold: nothing encoded before
        t0 = time.perf_counter()
        rep = runs.run(runs.RunSpec(task=get("sst2"), model=model, poolings=poolings, seeds=seeds, data_dir=data_dir,
                                    out=Path(tmp) / "out", limit_train=limit_train, progress=False))
        wall = time.perf_counter() - t0
    # unrounded: on the tests' tiny model a fast machine encodes in under 5 ms, and the report rounds anyway
    return AblationRun(poolings, len(rep.written), wall, rep.encode_wall_s, sum(r.wall_s for r in rep.written))


def measure(model: str, data_dir: Path, seeds=(0, 1, 2), limit_train: int | None = None,
            log=print) -> list[AblationRun]:
    rows = []
    for poolings in (NARROW, WIDE):
        log(f"ablation: --pooling {','.join(poolings)} x seeds {','.join(map(str, seeds))}, cold cache ...")
        rows.append(_one(model, data_dir, poolings, list(seeds), limit_train))
    return rows


def format_ablation(rows: list[AblationRun], limit_train: int | None = None) -> str:
    narrow, wide = rows
    lines = [f"{'SST-2 probe, cold cache':<32} {'cells':>5} {'wall s':>8} {'encode s':>9} {'fits s':>7}"]
    lines += [f"{'--pooling ' + ','.join(r.poolings):<32} {r.cells:>5} {r.wall_s:>8.1f} {r.encode_s:>9.1f} "
              f"{r.fits_s:>7.1f}" for r in rows]
    extra = wide.fits_s - narrow.fits_s
    lines.append(f"the {len(WIDE)}-pooling run costs {wide.wall_s / narrow.wall_s:.2f}x the {narrow.poolings[0]} run; "
                 f"its {wide.cells - narrow.cells} extra cells add {extra:.1f} s of fits "
                 f"({100 * extra / narrow.wall_s:.0f}% of the {narrow.poolings[0]} run)"
                 + (f"; training sentences limited to {limit_train:,}" if limit_train else ""))
    return "\n".join(lines)
