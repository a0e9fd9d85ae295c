"""`berteval run`: the one cell loop every task and regime goes through.

A run is (model, task, regime) x cells (pooling, layer, seed). The loop asks the regime
for its cells and each cell's identity, drops the cells whose run id is already in the
results store *before* any model is loaded (a rerun of a finished sweep loads no model
and encodes nothing; a killed one resumes with the missing cells), then calls the
regime's `prepare` once (load the model, encode the data) and its `fit_predict` per
cell, and hands each result to the store: predictions, head, record with the
provenance every record shares, paired tests. One record per cell, appended the
moment the cell is done.
"""

from __future__ import annotations

import datetime as dt
import shlex
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from . import metrics, models, provenance, records, regimes
from .errors import BertevalError
from .regimes.base import Cell, CellResult
from . import store as store_mod
from .store import Store
from .tasks.base import Split, TaskData, TaskSpec


@dataclass
class RunSpec:
    task: TaskSpec
    model: str = models.DEFAULT
    revision: str | None = None
    poolings: list[str] | None = None  # None = the regime's default grid
    layers: str | None = None  # e.g. "-1,-2,3"
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    regime: str = "probe"
    data_dir: Path | None = None
    out: Path | None = None  # results root; None = config.results_root()
    max_length: int | None = None  # tokens per input; None = the task's default (SST-2 128, SQuAD 384)
    dtype: str = "fp32"
    limit_train: int | None = None
    train_sizes: list[int | None] | None = None  # learning curve: examples each seed draws (None = all); None = no axis
    limit_eval: int | None = None  # the first N eval examples, for a quick look (never a leaderboard row)
    progress: bool = True
    # span QA (None = berteval.qa.DEFAULTS)
    doc_stride: int | None = None
    n_best: int | None = None
    max_answer_length: int | None = None
    # trained heads (None = the regime's default)
    epochs: float | None = None
    lr: float | None = None
    batch_size: int | None = None
    activation_checkpointing: bool = True  # span-QA fine-tunes recompute activations (same weights; less memory)
    folds: int | None = None  # span QA: k-fold cross-validation by dev article (berteval.qa.kfold)
    plan: bool = False  # only say which cells are present and which would run; load no model, write nothing

    def __post_init__(self):
        # 1 and 1.0 epochs are one run: the identity holds a float whether the value came from the CLI or code
        for name in ("epochs", "lr"):
            if (value := getattr(self, name)) is not None:
                setattr(self, name, float(value))


@dataclass
class RunReport:
    written: list[records.RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # run ids already present
    planned: list[tuple[Cell, str, bool]] = field(default_factory=list)  # --plan: (cell, run id, present)
    notes: list[str] = field(default_factory=list)
    encode_wall_s: float = 0.0
    encoded_examples: int = 0


class Run:
    """One run's shared context: the spec, the store, and what is read once (identity, data, model)."""

    def __init__(self, spec: RunSpec):
        self.spec = spec
        self.task = spec.task
        self.store = Store(spec.out)
        self.report = RunReport()

    @cached_property
    def identity(self) -> models.Identity:
        """Model id and revision without loading weights: enough for run ids."""
        return models.identify(self.spec.model, self.spec.revision)

    @cached_property
    def data(self) -> TaskData:
        return self.task.load(self.spec.data_dir)

    @cached_property
    def model(self) -> models.LoadedModel:
        return models.load(self.spec.model, self.spec.revision)

    @property
    def max_length(self) -> int:
        return self.spec.max_length or self.task.max_length

    def eval_split(self) -> Split:
        evals = self.data.eval
        if self.spec.limit_eval is not None and self.spec.limit_eval < len(evals):
            evals = evals.subset(range(self.spec.limit_eval))  # the first N: a quick look
        return evals

    def score(self, **inputs) -> dict[str, float]:
        """The task's metrics on one set of predictions (pred/label, or predictions/golds for span QA)."""
        return metrics.compute(self.task.metrics, **inputs)

    def note(self, text: str) -> None:
        if text not in self.report.notes:
            self.report.notes.append(text)


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
    if spec.folds:  # cross-validation wraps the regime: its cells become folds (berteval.qa.kfold)
        from .qa.kfold import KFold

        regime = KFold(regime, spec.folds)
    ctx = Run(spec)
    done = ctx.store.finished_ids(spec.task.name)
    todo: list[tuple[Cell, str]] = []
    for cell in regime.cells(ctx):
        identity = regime.identity(ctx, cell)
        if store_mod.process_count() > 1:  # N processes train on N batches a step: another cell (alone keeps its id)
            identity = {**identity, "processes": store_mod.process_count()}
        rid = records.run_id(identity)
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
        _store(ctx, cell, rid, result, result.wall_s if result.wall_s is not None else time.perf_counter() - t0)
        if result.cleanup is not None:
            result.cleanup()  # e.g. a training checkpoint, no longer needed once the record is in
    return ctx.report


def _store(ctx: Run, cell: Cell, rid: str, result: CellResult, wall_s: float) -> None:
    task, store = ctx.task.name, ctx.store
    predictions_file = store.write_predictions(task, rid, result.predictions) if result.predictions is not None else None
    config = dict(result.config)
    if result.head is not None:
        config["head_file"] = store.save_head(task, rid, result.head)
    rec = new_record(ctx, cell, rid, result, config, wall_s, predictions_file)
    rec.paired_tests = store.paired_tests(rec, result.correct)
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
        device=provenance.device(),
        dtype=ctx.spec.dtype,
        wall_s=round(wall_s, 3),
        predictions_file=predictions_file,
    )
