"""`--regime finetune-small`: the small-BERT protocol, beside the 4,000-example fine-tune.

The 4,000-example protocol (`--regime finetune`: lr 1e-4, 2 epochs) was made for a 6-layer
distilled model and leaves small BERTs far below what they can read (the first twins' STS-B
fine-tunes at 12-17 Pearson where a frozen bi-encoder probe on them reads 57-61). The release
of Turc et al.'s 24 small BERTs (google-research/bert, README) fine-tuned each task on its whole
train set for 4 epochs with the best batch size from {8, 16, 32, 64, 128} and lr from {3e-4, 1e-4,
5e-5, 3e-5}. This regime follows that shape at a CPU's cost:
- the whole train set (SST-2's 67,349 sentences included), 4 epochs, the same head, loss, optimiser,
  schedule and length-grouped batches as `finetune` (`berteval.regimes.finetune`, `berteval.training`);
- a grid of lr {1e-4, 3e-4} at batch 32 (GRID): the upper half of the published lr list, where small
  models' best values lie (ELECTRA fine-tuned its Small model at 3e-4 and its Base at 1e-4, as READMEs
  quoting its fine-tuning table say; the paper's text was not at hand), and the 4,000-example protocol's
  lr as its lower end. Batch size stays at 32: on a CPU an epoch costs about the same at
  any batch size, so every value added to an axis adds a whole training per cell; two points
  already double the cost of the regime;
- each grid point trains on the seeded held-out split of train (`heads.probe.heldout_split`: 10%,
  at most 2,000 examples, held out) and is scored on that held-out part after every epoch; the
  point and epoch with the best held-out score are chosen (ties: the earlier point, the lower lr).
  Dev is read once, by the chosen model, after the choice;
- the grid is searched once per (model, task, pooling, layer), at seed 0 (SEARCH_SEED); every other
  seed trains only the point seed 0 chose, on its own held-out split, and keeps its own best epoch. The
  grid then costs one training per extra point, not one per point and seed: with 3 seeds and 2 points,
  4 trainings a pooling instead of 6. The spread across seeds is then the spread of training at one lr,
  not of the lr choice as well (said in each record: `chosen.searched_at_seed`). A seed run alone finds
  seed 0's choice in its record, or in the cache where seed 0's search left it, or makes that search
  itself (its grid points are kept, so seed 0's own cell then reuses them);
- the chosen grid model itself is scored, not retrained on the whole train set: a retrain would
  add a third training to each cell (+50% time) for 10% more data (at most 2,000 examples), with
  a step count the choice was not made at; the model scored on dev is the one whose held-out
  score chose it.
Each grid point trains through `berteval.training` with its own checkpoint folder, and writes
its outcome (held-out scores, the selected epoch's weights) when done, so a killed cell resumes
with the points it finished and the last checkpoint of the one it was in.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .. import pooling
from ..heads import probe
from ..tasks.base import PAIR, PAIR_REGRESSION, SENTENCE
from .base import Cell, CellResult, Contract, Prepared, Regime, classified, regressed, splits
from .finetune import PooledFinetune, _pooling_lr_scale, _setup

EPOCHS = 4.0
GRID = {"lr": (1e-4, 3e-4), "batch_size": (32,)}
SEARCH_SEED = 0  # the seed whose held-out split chooses the grid point for every seed of a pooling
SELECTION = ("seed 0 trains each grid point on train less its seeded held-out part, scored there after every "
             "epoch, and the best point is kept (ties: the earlier point); every seed trains that point and "
             "keeps its own best epoch on its own held-out part; dev is scored once, by the chosen model")
KEPT = "the chosen grid model (trained on train less the held-out part); no retraining"
OUTCOME = "outcome.json"  # a finished grid point's scores, beside its selected weights (best.pt)
WEIGHTS = "best.pt"  # written by berteval.training's selection: the point's best epoch
CHOICE_DIR = "finetune-small-choices"  # seed 0's chosen point per pooling, kept past its cell's folder


def grid(spec) -> list[dict]:
    """The (lr, batch size) points a cell trains, in order; --lr or --batch-size pins its axis to one value."""
    lrs = (spec.lr,) if spec.lr is not None else GRID["lr"]
    sizes = (spec.batch_size,) if spec.batch_size is not None else GRID["batch_size"]
    return [{"lr": float(lr), "batch_size": int(b)} for b in sizes for lr in lrs]


def epochs(spec) -> float:
    return spec.epochs if spec.epochs is not None else EPOCHS


def choose(outcomes: list[dict]) -> int:
    """The index of the grid point with the best held-out score (the first of equals). Reads nothing else:
    the choice cannot see dev."""
    scores = [o["heldout_score"] for o in outcomes]
    return scores.index(max(scores))


class SmallBertFinetune(PooledFinetune):
    """The pooled fine-tune of `finetune`, run on the whole train set for each grid point; `state` as there."""

    contract = Contract(options=("poolings", "limit_train", "epochs", "lr", "batch_size"), optional=("processes",))

    def splits(self, run):
        return splits(run)  # the whole train set (or --limit-train's first N, for a quick look)

    def protocol(self, run, cell: Cell, train) -> dict:
        own = {"pooling_lr_scale": _pooling_lr_scale(cell.pooling)} if pooling.POOLINGS[cell.pooling].trained else {}
        return {"protocol": "small-bert", "epochs": epochs(run.spec), "grid": grid(run.spec),
                "heldout": [probe.HELDOUT_MAX, probe.HELDOUT_FRACTION], "selection": SELECTION, "kept": KEPT, **own}

    def fit_predict(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        from .. import training
        from ..config import cache_dir
        from ..heads.classifier import predict

        run, train = prep.run, prep.train
        tr_idx, ho_idx = probe.heldout_split(len(train), cell.seed)
        root = cache_dir() / "checkpoints" / run_id
        points, searched = grid(run.spec), None
        if len(points) > 1 and cell.seed != SEARCH_SEED:  # train only the point seed 0's search chose
            points, searched = [self._searched_choice(prep, cell)], SEARCH_SEED
        outcomes = [_grid_point(prep, cell, point, tr_idx, ho_idx, root / _folder(point)) for point in points]
        best = choose(outcomes)  # on held-out train only; dev has not been read
        if len(points) > 1:
            _keep_choice(run_id, outcomes[best])
            searched = cell.seed
        t0 = time.perf_counter()
        model = _load_chosen(prep, cell, root / _folder(outcomes[best]) / WEIGHTS)
        proba = predict(model, run.model, prep.evals.texts, run.max_length, run.spec.dtype)
        wall = sum(o["train_wall_s"] for o in outcomes) + time.perf_counter() - t0
        done = (lambda **kw: regressed(prep, run_id, proba[:, 0], **kw)) if run.task.regression else (
            lambda **kw: classified(prep, run_id, proba.argmax(1), proba, **kw))
        chosen = outcomes[best]
        return done(
            n_train=len(tr_idx), wall_s=wall,
            config={"data_source": run.data.source, "train_examples_available": len(train),
                    "train_subset": "full train" if train is run.data.train else
                    f"first {len(train)} of {len(run.data.train)} train examples (--limit-train)",
                    "max_length": run.max_length,
                    "finetune": {**_describe(run, prep), "grid": [_public(o) for o in outcomes],
                                 "chosen": {"lr": chosen["lr"], "batch_size": chosen["batch_size"],
                                            "epoch": chosen["selected_epoch"],
                                            "heldout_score": chosen["heldout_score"],
                                            "searched_at_seed": searched},
                                 "n_heldout": len(ho_idx),
                                 "train_wall_s": round(sum(o["train_wall_s"] for o in outcomes), 1)}},
            cleanup=lambda: _clear(root))


    def _searched_choice(self, prep: Prepared, cell: Cell) -> dict:
        """The grid point seed 0 chose for this cell's pooling and layer: from seed 0's record, else from the
        choice its search kept in the cache, else from that search, made now (on seed 0's held-out split,
        its folders kept for seed 0's own cell)."""
        import dataclasses

        from .. import records
        from ..config import cache_dir

        run = prep.run
        rid0 = records.run_id(self.identity(run, dataclasses.replace(cell, seed=SEARCH_SEED)))
        found, _ = run.store.read(run.task.name)
        for rec in found:
            chosen = rec.config.get("finetune", {}).get("chosen") if rec.run_id == rid0 else None
            if chosen:
                return {"lr": float(chosen["lr"]), "batch_size": int(chosen["batch_size"])}
        kept = cache_dir() / "checkpoints" / CHOICE_DIR / f"{rid0}.json"
        if kept.is_file():
            return json.loads(kept.read_text())
        tr0, ho0 = probe.heldout_split(len(prep.train), SEARCH_SEED)
        root0 = cache_dir() / "checkpoints" / rid0
        seed0 = dataclasses.replace(cell, seed=SEARCH_SEED)
        outcomes = [_grid_point(prep, seed0, point, tr0, ho0, root0 / _folder(point)) for point in grid(run.spec)]
        return _keep_choice(rid0, outcomes[choose(outcomes)])



def _keep_choice(rid0: str, outcome: dict) -> dict:
    """Write seed 0's chosen point where the other seeds look for it (outside its cell's folder, which is
    cleared once its record is in), and return it."""
    from ..config import cache_dir
    from ..store import write_atomic

    point = {"lr": outcome["lr"], "batch_size": outcome["batch_size"]}
    folder = cache_dir() / "checkpoints" / CHOICE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{rid0}.json", json.dumps(point).encode("utf-8"))
    return point


def _folder(point: dict) -> str:
    return f"lr{point['lr']:g}-b{point['batch_size']}"


def _describe(run, prep: Prepared) -> dict:
    """The protocol in words and values, for the record (what the identity holds, readable)."""
    from ..training import TrainConfig

    cfg = TrainConfig()
    return {"protocol": "small-bert (Turc et al. 2019's release: whole train set, 4 epochs, a grid chosen on "
                        "held-out train)",
            "head": ("dropout + Linear(hidden, 1) on the pooled vector, squared-error loss" if run.task.regression
                     else "dropout + Linear(hidden, labels) on the pooled vector") + "; whole encoder trained",
            "epochs": epochs(run.spec), "selection": SELECTION, "kept": KEPT,
            "selected_on": "heldout_pearson" if run.task.regression else "heldout_accuracy",
            "warmup_ratio": cfg.warmup_ratio, "weight_decay": cfg.weight_decay, "batches": "length-grouped"}


def _grid_point(prep: Prepared, cell: Cell, point: dict, tr_idx, ho_idx, folder: Path) -> dict:
    """Train one grid point (or read its outcome, when a killed cell had finished it) and return its outcome:
    the held-out score of each epoch, the selected epoch and its score, the training's counters."""
    import numpy as np

    from .. import training

    done = folder / OUTCOME
    if done.is_file() and (folder / WEIGHTS).is_file():
        return {**json.loads(done.read_text()), "reused": True}
    run = prep.run
    model, ds, collate, select, _ = _setup(prep, cell, tr_idx, ho_idx)
    cfg = training.TrainConfig(epochs=epochs(run.spec), batch_size=point["batch_size"], lr=point["lr"],
                               seed=cell.seed, dtype=run.spec.dtype, checkpoint_dir=folder, checkpoint_every=200)
    res = training.train(model, ds, collate, lambda m, b: m(**b)[0], cfg, progress=run.spec.progress,
                         lengths=[len(x) for x in ds.enc["input_ids"]], on_epoch_end=select)
    losses = res.losses
    outcome = {**point, "heldout_per_epoch": [round(x, 4) for x in res.epoch_scores],
               "selected_epoch": res.best_epoch, "heldout_score": round(res.epoch_scores[res.best_epoch - 1], 4),
               "steps": res.steps, "examples_seen": res.examples_seen, "train_wall_s": round(res.wall_s, 1),
               "first_loss": round(losses[0], 4) if losses else None,
               "last_loss": round(float(np.mean(losses[-50:])), 4) if losses else None,
               "resumed_from_step": res.resumed_from_step}
    if not (folder / WEIGHTS).is_file():  # training's selection writes it at each new best epoch
        training._save_torch(getattr(model, "module", model).state_dict(), folder / WEIGHTS)
    _drop_state(folder, training)  # the optimiser state of a finished point is dead weight on disk
    from ..store import write_atomic

    write_atomic(done, json.dumps(outcome).encode("utf-8"))  # last: its presence means the point is whole
    del model
    training.release_memory()
    return {**outcome, "reused": False}


def _public(outcome: dict) -> dict:
    """A grid point as the record shows it (whether this process trained it is said by resumed_from_step)."""
    return {k: v for k, v in outcome.items() if k != "reused"}


def _load_chosen(prep: Prepared, cell: Cell, weights: Path):
    """A fresh classifier holding the chosen point's selected weights, on the run's device."""
    import copy

    import torch

    from .. import devices
    from ..heads.classifier import PooledClassifier

    run = prep.run
    model = PooledClassifier(copy.deepcopy(run.model.encoder), cell.pooling, prep.state["n_labels"],
                             regression=run.task.regression)
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    return model.to(devices.current())


def _drop_state(folder: Path, training) -> None:
    import shutil

    for name in (training.STATE, training.STAGED, training.PREVIOUS):
        shutil.rmtree(folder / name, ignore_errors=True)


def _clear(root: Path) -> None:
    import shutil

    shutil.rmtree(root, ignore_errors=True)  # the cell's record is written: its grid points are not needed


REGIME = Regime(
    "finetune-small", "fine-tuned (small-BERT protocol)",
    "the small-BERT protocol: encoder and a pooled head trained on the whole train set for 4 epochs, lr 1e-4 or "
    "3e-4 at batch 32 chosen on a held-out part of train (never dev)",
    {SENTENCE: SmallBertFinetune, PAIR: SmallBertFinetune, PAIR_REGRESSION: SmallBertFinetune},
)
