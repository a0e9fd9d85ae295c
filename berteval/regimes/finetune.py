"""`--regime finetune`: the encoder and a head trained together.

For sentence and sentence-pair tasks the head reads one pooled vector
(`berteval.heads.classifier`): a frozen probe answers "what do the vectors already
hold", this answers "what should my classifier read" when every weight may move.
Training runs through `berteval.training` (accelerate: the same command scales under
`accelerate launch`; checkpoints make a killed run resume). The model state after each
epoch is scored on the seeded held-out slice of train and the best epoch is kept
(selection); dev is scored once, at the end. For span QA the fine-tune is LoRA plus a
span head (`berteval.regimes.span`).

Learning curves (`--train-sizes`): each sized cell draws its examples from the whole train
set (or `--limit-train`'s subset) and trains for the same number of optimiser steps as the
default 4,000-example protocol (2 epochs over its 3,600 training examples: 226 steps at
batch 32), so a point on the curve differs from its neighbours in data, not in how long it
was trained: 128 examples get about 56 epochs, each scored on the cell's own held-out
slice for selection (Zhang et al. 2021 show that few-sample fine-tuning needs the steps).
"""

from __future__ import annotations

import math

from .. import pooling, precision
from ..heads import probe
from ..tasks.base import PAIR, PAIR_REGRESSION, SENTENCE, SPAN
from .base import (TRAIN_OPTIONS, Cell, CellRegime, CellResult, Contract, Prepared, Regime, classified,
                   hyperparameters as _hyperparameters, regressed, splits)
from .grid import check_poolings, check_sizes, draw_rows, pooled_cells, sized_config
from .span import SpanFinetune

DEFAULTS = {"epochs": 2.0, "lr": 1e-4, "batch_size": 32}
# Offline, on 2 CPU cores, the whole of SST-2 train x 9 runs does not fit a session; a fixed,
# seeded subset does, and every record says its size.
DEFAULT_TRAIN_SUBSET = 4_000
DEFAULT_POOLINGS = ("cls", "pooler", "mean")  # the seed question's three vectors, when --pooling is not given


def hyperparameters(spec) -> dict:
    return _hyperparameters(spec, DEFAULTS)


def _steps_per_epoch(n_examples: int, batch_size: int) -> int:
    n_fit = n_examples - len(probe.heldout_split(n_examples, 0)[1])  # the held-out slice does not train
    return math.ceil(n_fit / batch_size)


def step_budget(spec) -> int:
    """Optimiser steps of a sized cell: those of the default protocol (its epochs over the default subset)."""
    hp = hyperparameters(spec)
    return int(round(hp["epochs"] * _steps_per_epoch(DEFAULT_TRAIN_SUBSET, hp["batch_size"])))


class PooledFinetune(CellRegime):
    """A head on the last layer's pooled vector, trained with the encoder; `state` holds "enc" (the tokenised
    training subset) and "n_labels"."""

    contract = Contract(options=("poolings", "train_sizes", "limit_train", *TRAIN_OPTIONS),
                        optional=("train_size", "processes"))
    bf16_path = precision.MIXED  # trained: autocast over fp32 weights (nothing in the id)
    trained = "whole encoder trained"  # the record's words for which weights moved

    def hyperparameters(self, run) -> dict:
        return hyperparameters(run.spec)

    def tunable(self, model, cell: Cell):
        """The module to train around `model` (here `model` itself: every weight moves)."""
        return model

    def finish(self, prep: Prepared, cell: Cell, run_id: str, trained) -> tuple:
        """(the model that predicts dev, the record's config entries for what was kept): nothing is kept here,
        the encoder's weights are too large to commit."""
        return trained, {}

    def cells(self, run) -> list[Cell]:
        from ..errors import BertevalError

        if run.task.dev_folds:
            raise BertevalError(f"{run.task.name} has no train set here and is scored by k-fold over its dev set: "
                                f"run it with --regime probe")
        names = pooling.parse(run.spec.poolings) if run.spec.poolings else list(DEFAULT_POOLINGS)
        separate = [n for n in names if pooling.POOLINGS[n].separate]
        if separate:
            raise BertevalError(f"pooling {', '.join(separate)} encodes the two texts apart (a bi-encoder); the "
                                f"fine-tune trains the encoder on BERT's pair input. Probe it: --regime probe")
        return pooled_cells(run, names, [-1])

    def splits(self, run):
        # Sizes are drawn from the whole train set; without them, the fixed default subset keeps runs affordable.
        return splits(run, None if run.spec.train_sizes else DEFAULT_TRAIN_SUBSET)

    def protocol(self, run, cell: Cell, train) -> dict:
        check_sizes([cell], len(train))
        steps = {"steps": step_budget(run.spec)} if cell.train_size is not None else {}
        # A pooling with parameters names how fast they train (attention's query: QUERY_LR_SCALE x the lr);
        # the records before this rule (a query that never moved) had no such entry.
        own = {"pooling_lr_scale": _pooling_lr_scale(cell.pooling)} if pooling.POOLINGS[cell.pooling].trained else {}
        return {**self.hyperparameters(run), "heldout": [probe.HELDOUT_MAX, probe.HELDOUT_FRACTION], **steps, **own}

    def prepare(self, run, todo: list[Cell]) -> Prepared:
        from .. import features

        check_poolings(run, todo, " (fine-tuning trains it)")
        train, evals, data_sha = self.splits(run)
        enc = features.tokenise(run.model, train.texts, run.max_length)
        n_labels = 1 if run.task.regression else max(max(train.labels), max(evals.labels)) + 1
        return Prepared(run, train, evals, data_sha, {"enc": enc, "n_labels": n_labels})

    def fit_predict(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        import time

        import numpy as np

        from .. import training
        from ..config import cache_dir

        run, train, evals = prep.run, prep.train, prep.evals
        hp = self.hyperparameters(run)
        rows = draw_rows(len(train), cell)
        tr, ho = probe.heldout_split(len(rows), cell.seed)
        tr_idx, ho_idx = rows[tr], rows[ho]
        if cell.train_size is not None:  # a learning-curve point trains as many steps as the default protocol
            hp["epochs"] = step_budget(run.spec) / _steps_per_epoch(len(rows), hp["batch_size"])
        model, ds, collate, select, heldout_scores = _setup(prep, cell, tr_idx, ho_idx)
        model = self.tunable(model, cell)
        cfg = training.TrainConfig(epochs=hp["epochs"], batch_size=hp["batch_size"], lr=hp["lr"], seed=cell.seed,
                                   dtype=run.spec.dtype, checkpoint_dir=cache_dir() / "checkpoints" / run_id,
                                   checkpoint_every=200)
        t0 = time.perf_counter()
        res = training.train(model, ds, collate, lambda m, b: m(**b)[0], cfg, progress=run.spec.progress,
                             lengths=[len(x) for x in ds.enc["input_ids"]], on_epoch_end=select)
        model, kept = self.finish(prep, cell, run_id, getattr(model, "module", model))
        from ..heads.classifier import predict

        proba = predict(model, run.model, evals.texts, run.max_length, run.spec.dtype)
        wall = time.perf_counter() - t0
        losses = res.losses
        done = (lambda **kw: regressed(prep, run_id, proba[:, 0], **kw)) if run.task.regression else (
            lambda **kw: classified(prep, run_id, proba.argmax(1), proba, **kw))
        selection = "heldout_pearson_per_epoch" if run.task.regression else "heldout_accuracy_per_epoch"
        return done(
            n_train=len(tr_idx),
            config={"data_source": run.data.source, "train_examples_available": len(train),
                    "train_subset": f"fixed seeded subset of {len(train)} of {len(run.data.train)} train examples"
                    if train is not run.data.train else "full train", **sized_config(cell, rows, len(train)),
                    "max_length": run.max_length,
                    "finetune": {"head": ("dropout + Linear(hidden, 1) on the pooled vector, squared-error loss"
                                          if run.task.regression else
                                          "dropout + Linear(hidden, labels) on the pooled vector") +
                                         f"; {self.trained}",
                                 **hp, "warmup_ratio": cfg.warmup_ratio, "weight_decay": cfg.weight_decay,
                                 "batches": "length-grouped", "steps": res.steps,
                                 "examples_seen": res.examples_seen, "epochs_run": res.epochs_run,
                                 "train_wall_s": round(res.wall_s, 1), selection:
                                 [round(x, 4) for x in res.epoch_scores], "selected_epoch": res.best_epoch,
                                 "n_heldout": len(ho_idx), "first_loss": round(losses[0], 4) if losses else None,
                                 "last_loss": round(float(np.mean(losses[-50:])), 4) if losses else None,
                                 "resumed_from_step": res.resumed_from_step,
                                 **({"segments": res.segments} if len(res.segments) > 1 else {})}, **kept},
            wall_s=wall, cleanup=lambda: training.clear_checkpoint(cfg))


def _pooling_lr_scale(name: str) -> float:
    from ..pooling.attention import QUERY_LR_SCALE

    return QUERY_LR_SCALE if name == "attention" else 1.0


def _setup(prep: Prepared, cell: Cell, tr_idx, ho_idx):
    """The model to train, its data, and the per-epoch selection on the held-out slice of train."""
    import copy

    import numpy as np
    import torch

    from ..heads.classifier import Examples, PooledClassifier, collate_fn, predict

    run, train = prep.run, prep.train
    tr_enc = {k: [v[i] for i in tr_idx] for k, v in prep.state["enc"].items() if k != "offset_mapping"}
    ds = Examples(tr_enc, [train.labels[i] for i in tr_idx])
    heldout_texts = [train.texts[i] for i in ho_idx]
    heldout_y = np.asarray([train.labels[i] for i in ho_idx])
    torch.manual_seed(cell.seed)  # the head's initialisation; batches use their own generators
    model = PooledClassifier(copy.deepcopy(run.model.encoder), cell.pooling, prep.state["n_labels"],
                             regression=run.task.regression)
    for param in model.parameters():
        param.requires_grad = True
    if model.pool is not None and cell.pooling == "attention":
        model.pool.query.lr_scale = _pooling_lr_scale(cell.pooling)  # see pooling.attention.QUERY_LR_SCALE
    scores: list[float] = []

    def select(m, epoch: int) -> float:
        out = predict(m, run.model, heldout_texts, run.max_length, run.spec.dtype)
        if run.task.regression:
            from ..metrics import pearson

            score = pearson(out[:, 0], heldout_y)
        else:
            score = float((out.argmax(1) == heldout_y).mean())
        scores.append(score)
        return score

    return model, ds, collate_fn(run.model.tokenizer, ds), select, scores


REGIME = Regime(
    "finetune", "fine-tuned",
    "encoder and head trained together (a pooled classifier, or LoRA + a span head for QA)",
    {SENTENCE: PooledFinetune, PAIR: PooledFinetune, PAIR_REGRESSION: PooledFinetune, SPAN: SpanFinetune},
)
