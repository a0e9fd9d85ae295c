"""`berteval run`: the one cell loop every task and regime goes through.

A run is (model, task, regime) x cells (pooling, layer, seed). The loop checks the run's
options against the regime's contract, asks the regime for its cells and each cell's
identity (built once, in `berteval.regimes.base`, where `RunSpec` and `Run` live too), drops
the cells whose run id is already in the results store *before* any model is loaded (a
rerun of a finished sweep loads no model and encodes nothing; a killed one resumes with
the missing cells), then calls the regime's `prepare` once (load the model, encode the
data) and its `fit_predict` per cell, and hands each result to the store: predictions,
head, record with the provenance every record shares, paired tests. One record per cell,
appended the moment the cell is done.
"""

from __future__ import annotations

import datetime as dt
import shlex
import sys
import time

from . import devices, precision, provenance, records, regimes
from . import store as store_mod
from .errors import BertevalError
from .regimes.base import Cell, CellResult, Run, RunReport, RunSpec

__all__ = ["Run", "RunReport", "RunSpec", "new_record", "parse_seeds", "run"]


def parse_seeds(spec: str) -> list[int]:
    try:
        seeds = [int(s) for s in str(spec).split(",") if s.strip()]
    except ValueError as exc:
        raise BertevalError(f"--seeds takes comma-separated integers such as 0,1,2, not {spec!r}") from exc
    if not seeds:
        raise BertevalError("--seeds is empty; give at least one seed, e.g. --seeds 0")
    return list(dict.fromkeys(seeds))


def run(spec: RunSpec) -> RunReport:
    provenance.git_commit()  # pin the commit now: the code that runs, whatever changes before it ends
    regime = regimes.get(spec.regime, spec.task)
    regimes.check_options(spec, regime)  # an option the regime does not declare: refused before anything loads
    if spec.folds:  # cross-validation wraps the regime: its cells become folds (berteval.regimes.kfold)
        regime = regimes.KFold(regime, spec.folds)
    ctx = Run(spec)
    done = ctx.store.finished_ids(spec.task.name)
    todo: list[tuple[Cell, str]] = []
    for cell in regime.cells(ctx):
        rid = records.run_id(regime.identity(ctx, cell))  # built once, for every regime (regimes.base)
        (ctx.report.skipped.append(rid) if rid in done else todo.append((cell, rid)))
        ctx.report.planned.append((cell, rid, rid in done))
    if not todo or spec.plan:
        return ctx.report
    if store_mod.is_writer():
        ctx.store.check_writable(spec.task.name)
        from . import config

        config.cache_dir()  # a cache path that is not a folder is refused now, not after the work
    prepared = regime.prepare(ctx, [c for c, _ in todo])
    for cell, rid in todo:
        t0 = time.perf_counter()
        result = regime.fit_predict(prepared, cell, rid)
        _store(ctx, cell, rid, result, result.wall_s if result.wall_s is not None else time.perf_counter() - t0,
               regime.bf16_path)
        if result.cleanup is not None:
            result.cleanup()  # e.g. a training checkpoint, no longer needed once the record is in
    return ctx.report


def _store(ctx: Run, cell: Cell, rid: str, result: CellResult, wall_s: float, how: str = precision.FROZEN) -> None:
    task, store = ctx.task.name, ctx.store
    predictions_file = store.write_predictions(task, rid, result.predictions) if result.predictions is not None else None
    config = dict(result.config)
    if devices.current().type != "cpu":  # off the CPU the record says what precision ran (CPU records unchanged)
        config["precision"] = precision.describe(ctx.spec.dtype, how)
    if result.head is not None:
        config["head_file"] = store.save_head(task, rid, result.head)
    rec = new_record(ctx, cell, rid, result, config, wall_s, predictions_file)
    rec.paired_tests = store.paired_tests(rec, result.correct, result.predicted, result.gold)
    if store.append(rec):
        ctx.report.written.append(rec)
    elif store_mod.is_writer():  # another process into the same folder wrote this run id meanwhile
        ctx.report.skipped.append(rid)


def new_record(ctx: Run, cell: Cell, rid: str, result: CellResult, config: dict, wall_s: float,
               predictions_file: str | None) -> records.RunRecord:
    """A record with the provenance every cell shares (versions, commit, device, command)."""
    command = " ".join(shlex.quote(a) for a in sys.argv) if sys.argv and sys.argv[0] else ""
    model = ctx.model
    return records.RunRecord(
        schema_version=records.SCHEMA_VERSION,
        run_id=rid,
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        model=model.model_id,
        model_revision=model.revision,
        task=ctx.task.name,
        task_version=ctx.task.version,
        data_sha256=result.data_sha256,
        split=result.split,
        pooling=cell.pooling,
        regime=ctx.spec.regime,
        layer=cell.layer,
        seed=cell.seed,
        metrics=result.metrics,
        main_metric=ctx.task.main_metric,
        n_train=result.n_train,
        n_eval=result.n_eval,
        config={"command": command, "model_source": model.source,
                "pooler_provenance": model.heads.pooler_provenance, **config,
                "peak_rss_mb": provenance.peak_rss_mb(), "processes": store_mod.process_count()},
        versions=provenance.versions(),
        git_commit=provenance.git_commit(),
        device=devices.describe(devices.current()),
        dtype=ctx.spec.dtype,
        wall_s=round(wall_s, 3),
        predictions_file=predictions_file,
    )
