"""What a regime is and what it reads: the run, its cells, the contract, the identity, one cell's result.

A run (`RunSpec`: model, task, regime and options) is a grid of cells. The loop in `berteval.runs`
drives a regime through four steps, so it can skip finished work before paying for anything:
- `cells(run)`: the grid this run asks for (pooling x layer x seed [x train size]); nothing is loaded.
- `identity(run, cell)`: everything that defines the cell's result; its hash is the run id. It is
  built here, once for every regime (`CellRegime.identity`): the fields every cell has, the parts of
  the cell the regime's records name (`Contract.cell`), the regime's own protocol (`protocol`), and the
  optional fields it declares (`Contract.optional`). It may read the data (for its checksum) and the
  model's config, not its weights.
- `prepare(run, todo)`: once per run, for the unfinished cells only: load the model, encode, tokenise.
- `fit_predict(prepared, cell, run_id)`: train (or not) and predict one cell.
Each implementation declares a `Contract`: the options it takes besides every run's own (the loop
refuses any other, `berteval.regimes.check_options`) and the optional fields of its identity.
Torch-free at import time: models and heavy libraries are imported when a run reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .. import metrics, precision, records
from ..errors import BertevalError
from ..models.base import DEFAULT
from ..store import Store, process_count
from ..tasks.base import Split, TaskData, TaskSpec, limit_split

if TYPE_CHECKING:
    import numpy as np

    from ..models import Identity, LoadedModel


@dataclass
class RunSpec:
    task: TaskSpec
    model: str = DEFAULT
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
    folds: int | None = None  # span QA: k-fold cross-validation by dev article (berteval.regimes.kfold)
    train_set: str | None = None  # SQuAD: "subset" (the 17 official train articles) or "full" (all 87,599 questions)
    plan: bool = False  # only say which cells are present and which would run; load no model, write nothing

    def __post_init__(self):
        # 1 and 1.0 epochs are one run: the identity holds a float whether the value came from the CLI or code
        for name in ("epochs", "lr"):
            if (value := getattr(self, name)) is not None:
                setattr(self, name, float(value))


# The options a regime may take besides every run's own (--model, --revision, --seeds, --max-length, --dtype,
# --limit-eval, --data-dir, --out, progress, --plan): RunSpec field -> (its flag, whether a run sets it).
OPTIONS: dict[str, tuple[str, Callable[[RunSpec], bool]]] = {
    "poolings": ("--pooling", lambda s: bool(s.poolings)),
    "layers": ("--layers", lambda s: s.layers not in (None, "", "-1")),  # -1, the last layer, is every regime's
    "train_sizes": ("--train-sizes", lambda s: bool(s.train_sizes)),
    "limit_train": ("--limit-train", lambda s: s.limit_train is not None),
    "epochs": ("--epochs", lambda s: s.epochs is not None),
    "lr": ("--lr", lambda s: s.lr is not None),
    "batch_size": ("--batch-size", lambda s: s.batch_size is not None),
    "doc_stride": ("--doc-stride", lambda s: s.doc_stride is not None),
    "n_best": ("--n-best", lambda s: s.n_best is not None),
    "max_answer_length": ("--max-answer-length", lambda s: s.max_answer_length is not None),
    "activation_checkpointing": ("--no-activation-checkpointing", lambda s: not s.activation_checkpointing),
    "folds": ("--folds", lambda s: bool(s.folds)),
    "train_set": ("--train-set", lambda s: s.train_set not in (None, "subset")),
}
COMMON_FLAGS = "--model, --revision, --seeds, --max-length, --dtype, --limit-eval, --data-dir, --out, --plan"
# Identity fields that only some cells carry, so every run id written before a field existed stays. (The
# device is not a run option yet: when it becomes one, it joins here, named only where it changes a result.)
OPTIONAL = {
    "train_size": "a sized cell (a learning-curve point): its size and the draw rule (TRAIN_DRAW)",
    "bf16": "frozen inference on bf16 weights: {'bf16': 'weights'} (berteval.precision.identity)",
    "processes": "a run of N > 1 processes (accelerate launch): N batches a step, another cell",
    "folds": "a k-fold cell: the protocol, k and its fold (added by berteval.regimes.kfold around the regime)",
    "device": "a bf16 or trained cell run off the CPU: {'device': 'cuda'} (fp32 frozen cells agree across devices "
              "to float rounding and keep the CPU's run id; docs/performance.md, 'Records across devices')",
}
# How a sized cell's examples are drawn; in the identity of sized cells only. Change the rule, change this.
TRAIN_DRAW = "first N of the seed's permutation (seeds stream 'sizes'): nested across sizes"
TRAIN_OPTIONS = ("epochs", "lr", "batch_size")  # what a trained head's hyperparameters read


@dataclass(frozen=True)
class Contract:
    """What one regime implementation declares, and the run loop checks."""

    options: tuple[str, ...] = ()  # keys of OPTIONS it takes
    cell: tuple[str, ...] = ("pooling", "layer", "n_train")  # what of a cell its identity names
    optional: tuple[str, ...] = ("processes",)  # keys of OPTIONAL its cells may carry

    def __post_init__(self):
        unknown = [*(o for o in self.options if o not in OPTIONS), *(o for o in self.optional if o not in OPTIONAL),
                   *(c for c in self.cell if c not in ("pooling", "layer", "n_train"))]
        if unknown:
            raise ValueError(f"unknown contract entries: {', '.join(unknown)}")

    def flags(self) -> list[str]:
        return [OPTIONS[o][0] for o in self.options]


@dataclass
class RunReport:
    written: list[records.RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # run ids already present
    planned: list[tuple["Cell", str, bool]] = field(default_factory=list)  # --plan: (cell, run id, present)
    notes: list[str] = field(default_factory=list)
    encode_wall_s: float = 0.0  # the encoder passes a regime makes once for every cell (features, hidden states)
    encoded_examples: int = 0
    encoded_unit: str = "examples"  # what was counted: "examples" (sentences, pairs), "training windows" (SQuAD)


class Run:
    """One run's shared context: the spec, the store, and what is read once (identity, data, model)."""

    def __init__(self, spec: RunSpec):
        self.spec = spec
        self.task = spec.task
        self.store = Store(spec.out)
        self.report = RunReport()

    @cached_property
    def identity(self) -> Identity:
        """Model id and revision without loading weights: enough for run ids."""
        from .. import models

        return models.identify(self.spec.model, self.spec.revision)

    @cached_property
    def data(self) -> TaskData:
        if self.spec.train_set not in (None, "subset"):
            return self.task.load(self.spec.data_dir, train_set=self.spec.train_set)
        return self.task.load(self.spec.data_dir)

    @cached_property
    def model(self) -> LoadedModel:
        from .. import models

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


def splits(run, default_limit: int | None = None) -> tuple[Split, Split, str]:
    """The train split a cell trains on (`--limit-train`, else `default_limit`, else all of it), the eval split,
    and the checksum of the two as used. `run` may be a view of a run (a k-fold fold's data)."""
    train = limit_split(run.data.train, run.spec.limit_train if run.spec.limit_train is not None else default_limit)
    evals = run.eval_split()
    return train, evals, run.task.subset(run.data, train, evals)


def hyperparameters(spec: RunSpec, defaults: dict) -> dict:
    """A trained head's epochs, lr and batch size: the regime's defaults, each overridden by the run's option."""
    given = {"epochs": spec.epochs, "lr": spec.lr, "batch_size": spec.batch_size}
    return {**defaults, **{k: v for k, v in given.items() if v is not None}}


@dataclass(frozen=True)
class Cell:
    pooling: str  # a key of berteval.pooling.POOLINGS, or what the head reads ("span", "nsp-head")
    layer: int = -1  # canonical hidden-state index, -1 = last
    seed: int = 0
    # Training examples drawn by the seed from the run's train set (a learning-curve point); None = all of
    # it. Only a sized cell adds the size and the draw rule to its identity, so every other run id stays.
    train_size: int | None = None


@dataclass
class Prepared:
    """What a regime prepares once per run: the run, the splits its cells read and their checksum, and what
    else it computes once (vectors, windows, a model) under `state`."""

    run: Any
    train: Split | None = None
    evals: Split | None = None
    data_sha: str = ""
    state: dict = field(default_factory=dict)


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
    predicted: "np.ndarray | None" = None  # per-example scores, for paired tests (regression) ...
    gold: "np.ndarray | None" = None  # ... and the gold scores they are compared with
    head: dict | None = None  # arrays of a linear head, saved as heads/<task>/<run_id>.npz
    wall_s: float | None = None  # the cell's own cost; None = the loop times fit_predict
    cleanup: Callable[[], None] | None = None  # run once the record is stored (e.g. drop a checkpoint)


def classified(prep: Prepared, run_id: str, pred, proba, *, positive: int = 1, **fields) -> CellResult:
    """A classification cell's result: the task's metrics on the eval split, the per-example predictions
    (label, pred, and the probability of class `positive` when there are two classes) and their
    correctness for the paired tests. `fields`: the rest of the CellResult (n_train, config, head, ...)."""
    import numpy as np

    evals, label = prep.evals, np.asarray(prep.evals.labels)
    shown = proba[:, positive] if proba.ndim == 2 and proba.shape[1] == 2 else proba
    return CellResult(
        metrics=prep.run.score(pred=pred, label=label), data_sha256=prep.data_sha, split=evals.name,
        n_eval=len(evals), correct=pred == label, **fields,
        predictions={"run_id": run_id, "split": evals.name, "data_sha256": prep.data_sha, "label": label.tolist(),
                     "pred": pred.tolist(), "proba": np.round(shown, 5).tolist()})


def regressed(prep: Prepared, run_id: str, pred, **fields) -> CellResult:
    """A regression cell's result (STS-B): the task's metrics (correlations) on the eval split, the per-example
    scores (`kind: regression`, so the paired tests take the bootstrap) and what the paired test compares."""
    import numpy as np

    evals, gold = prep.evals, np.asarray(prep.evals.labels, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    return CellResult(
        metrics=prep.run.score(pred=pred, label=gold), data_sha256=prep.data_sha, split=evals.name,
        n_eval=len(evals), predicted=pred, gold=gold, **fields,
        predictions={"run_id": run_id, "split": evals.name, "data_sha256": prep.data_sha, "kind": "regression",
                     "label": gold.tolist(), "pred": np.round(pred, 5).tolist()})


def _device_type() -> str:
    from .. import devices

    return devices.current().type


class CellRegime:
    """One regime's implementation for the kinds of task it serves."""

    contract = Contract()
    # How --dtype bf16 runs this regime's model (`berteval.precision`): frozen -> on its bf16 copy, named in
    # the run id (the `bf16` optional field); trained -> autocast over fp32 weights, in training and in the
    # evaluation after it, the id as it always was.
    bf16_path = precision.FROZEN

    def cells(self, run: Run) -> list[Cell]:
        raise NotImplementedError

    def splits(self, run: Run) -> tuple[Split, Split, str]:
        """(train, eval, checksum) a cell of this regime reads; the identity names their checksum."""
        return splits(run)

    def protocol(self, run: Run, cell: Cell, train: Split) -> dict:
        """The identity entries of this regime's own (its head, hyperparameters, held-out slice)."""
        return {}

    def identity(self, run: Run, cell: Cell) -> dict:
        """Everything that defines the cell's result (its hash is the run id), built here for every regime."""
        precision.check(run.spec.dtype)
        train, _, data_sha = self.splits(run)
        ident = {"schema": records.SCHEMA_VERSION, "model": run.identity.model_id, "revision": run.identity.revision,
                 "task": run.task.name, "task_version": run.task.version, "data": data_sha, "regime": run.spec.regime,
                 "seed": cell.seed, "max_length": run.max_length, "dtype": run.spec.dtype}
        named = {"pooling": cell.pooling, "layer": cell.layer, "n_train": len(train)}
        ident.update({name: named[name] for name in self.contract.cell})
        ident.update(self.protocol(run, cell, train))
        optional = self.contract.optional
        if "train_size" in optional and cell.train_size is not None:
            ident.update(train_size=cell.train_size, train_draw=TRAIN_DRAW)
        if "bf16" in optional:
            ident.update(precision.identity(run.spec.dtype, self.bf16_path))
        if "processes" in optional and process_count() > 1:
            ident["processes"] = process_count()
        device = _device_type()
        if device != "cpu" and (run.spec.dtype == "bf16" or self.bf16_path == precision.MIXED):
            ident["device"] = device  # another device's kernels: bf16 rounding and training order differ
            # A GPU without bf16 runs --dtype bf16 as fp16 autocast (trained) or fp32 (frozen): another cell.
            ident.update(precision.fallback(run.spec.dtype, self.bf16_path))
        return ident

    def prepare(self, run: Run, todo: list[Cell]) -> Any:
        raise NotImplementedError

    def fit_predict(self, prepared: Any, cell: Cell, run_id: str) -> CellResult:
        raise NotImplementedError


@dataclass(frozen=True)
class Regime:
    """A regime's name, how the leaderboard names it, what it does, and its implementation per kind of task."""

    name: str
    label: str  # e.g. "frozen probe": figures, findings and tables; registry order is their order
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
