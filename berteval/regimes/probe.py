"""`--regime probe`: the encoder frozen, a head trained on what it already computes.

For sentence and sentence-pair tasks: one encoding of the data yields every (pooling,
layer) vector (`berteval.features`, cached), then a logistic-regression probe per cell
(`berteval.heads.probe`), its C chosen on a seeded held-out slice of train. A sized cell
(learning curve) fits on the rows its seed draws from the same cached vectors. A pooling
with parameters (`attention`) has no fixed vector: its probe trains the pooling and a
linear head on token states held in memory (`berteval.heads.tokens`), or is refused when
they would not fit. For span QA the probe is a span head on cached hidden states, or a
span head that reads one pooled vector of the window (`berteval.regimes.span`).
"""

from __future__ import annotations

import time

from .. import pooling, precision
from ..errors import BertevalError
from ..heads import probe, ridge
from ..tasks.base import PAIR, PAIR_REGRESSION, SENTENCE, SPAN
from .base import Cell, CellRegime, CellResult, Contract, Prepared, Regime, classified, regressed
from .grid import check_poolings, check_sizes, draw_rows, parse_layers, pooled_cells, sized_config
from .span import SpanProbe

FOLD_SEED = 0  # the k-fold split of a dev-only task (QNLI): fixed, part of its records' identity
# The probe of a pooling with parameters (on token states): in the identity of such cells only.
TOKEN_HEAD = {"epochs": 4.0, "lr": 1e-3, "batch_size": 64}


class PooledProbe(CellRegime):
    """What `prepare` keeps in `state`: "vectors" (split name -> {(pooling, layer): (N, width) float32}),
    "tokens" (split name -> {layer: [(T_i, H) float32]}, for poolings with parameters only) and
    "path_starts" ((pooling, layer) -> the optimum of the last fit at its smallest C: the next seed's fit of
    the same vectors starts there, same optimum in fewer steps; `probe.fit_probe`)."""

    # No "processes": under a multi-process launch each process encodes a share of the inputs and every one
    # fits the same head on the gathered vectors (berteval.features), so the cell is the one-process cell.
    contract = Contract(options=("poolings", "layers", "train_sizes", "limit_train"),
                        optional=("train_size", "bf16"))

    def cells(self, run) -> list[Cell]:
        names = pooling.parse(run.spec.poolings)
        cells = pooled_cells(run, names, parse_layers(run.spec.layers, run.identity.num_hidden_states))
        if run.task.regression or run.task.dev_folds:
            trained = sorted({c.pooling for c in cells if pooling.POOLINGS[c.pooling].trained})
            if trained:
                raise BertevalError(f"pooling {', '.join(trained)} has parameters of its own; the {run.task.name} "
                                    f"probe fits fixed vectors only (a ridge regression or k-fold logistic "
                                    f"regression): use cls, pooler, mean, max, ...")
        if run.task.dev_folds and any(c.train_size is not None for c in cells):
            raise BertevalError(f"{run.task.name} is scored by k-fold over its dev set: --train-sizes does not apply")
        return cells

    def splits(self, run):
        if not run.task.dev_folds:
            return super().splits(run)
        evals = run.eval_split()  # no train set: the folds train on the rest of dev
        return evals, evals, run.task.subset(run.data, evals, evals)

    def protocol(self, run, cell: Cell, train) -> dict:
        check_sizes([cell], len(train))
        if run.task.regression:
            head = {"ridge_alpha_grid": ridge.ALPHA_GRID, "selection": "held-out Pearson"}
        elif pooling.POOLINGS[cell.pooling].trained:
            head = {"token_head": TOKEN_HEAD}
        else:
            head = {"c_grid": probe.C_GRID}
        folds = {"folds": {"k": run.task.dev_folds, "seed": FOLD_SEED, "over": "dev pairs"}} if run.task.dev_folds else {}
        # The encoder is frozen: bf16 runs on its bf16 weights, named in the id (nothing added for fp32).
        return {**head, "heldout": [probe.HELDOUT_MAX, probe.HELDOUT_FRACTION], **folds}

    def prepare(self, run, todo: list[Cell]) -> Prepared:
        check_poolings(run, todo)
        train, evals, data_sha = self.splits(run)
        fixed = [c for c in todo if not pooling.POOLINGS[c.pooling].trained]
        trained = [c for c in todo if pooling.POOLINGS[c.pooling].trained]
        vectors = {s.name: self._vectors(run, s, fixed) for s in (train, evals)} if fixed else {}
        states = {s.name: self._states(run, s, trained) for s in (train, evals)} if trained else {}
        return Prepared(run, train, evals, data_sha, {"vectors": vectors, "tokens": states, "path_starts": {}})

    @staticmethod
    def _vectors(run, split, cells: list[Cell]) -> dict:
        """Every fixed (pooling, layer) from one cached pass; a sized cell reads a row subset of it."""
        from .. import features
        from ..tasks.base import split_checksum

        enc = features.encode(run.model, split.texts, data_sha256=split_checksum(split),
                              poolings=list(dict.fromkeys(c.pooling for c in cells)),
                              layers=list(dict.fromkeys(c.layer for c in cells)), max_length=run.max_length,
                              dtype=run.spec.dtype, progress=run.spec.progress, desc=f"encoding {split.name}")
        run.report.encode_wall_s += enc.wall_s
        run.report.encoded_examples += enc.encoded
        return enc.vectors

    @staticmethod
    def _states(run, split, cells: list[Cell]) -> dict:
        """Token states for the poolings with parameters: held in memory (refused if they do not fit), not cached."""
        from ..heads import tokens

        t0 = time.perf_counter()
        states = tokens.token_states(run.model, split.texts, list(dict.fromkeys(c.layer for c in cells)),
                                     run.max_length, run.spec.dtype, cells[0].pooling)
        run.report.encode_wall_s += time.perf_counter() - t0
        run.report.encoded_examples += len(split)
        return states

    def fit_predict(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        import numpy as np

        run, train = prep.run, prep.train
        if run.task.dev_folds:
            return self._fit_folds(prep, cell, run_id)
        rows = draw_rows(len(train), cell)
        y_train = np.asarray(train.labels)[rows]
        t0 = time.perf_counter()
        if run.task.regression:
            fitted, fit, head = self._fit_ridge(prep, cell, rows, y_train)
        elif pooling.POOLINGS[cell.pooling].trained:
            fitted, fit, head = self._fit_tokens(prep, cell, rows, y_train)
        else:
            fitted, fit, head = self._fit_linear(prep, cell, rows, y_train)
        wall = time.perf_counter() - t0
        config = {"data_source": run.data.source, "train_examples_available": len(train),
                  "limit_train": run.spec.limit_train, **sized_config(cell, rows, len(train)),
                  "max_length": run.max_length, "probe": fit, "encode_wall_s": round(run.report.encode_wall_s, 3),
                  **precision.identity(run.spec.dtype)}
        if run.task.regression:
            return regressed(prep, run_id, fitted.pred, n_train=fitted.n_train, config=config, head=head, wall_s=wall)
        return classified(prep, run_id, fitted.pred, fitted.proba, n_train=fitted.n_train, config=config, head=head,
                          wall_s=wall)

    @staticmethod
    def _fit_ridge(prep: Prepared, cell: Cell, rows, y_train) -> tuple:
        """Ridge regression on the cell's rows of the cached vectors (STS-B); its head is one affine map."""
        import numpy as np

        key, vectors = (cell.pooling, cell.layer), prep.state["vectors"]
        res = ridge.fit_ridge(vectors[prep.train.name][key][rows], y_train, vectors[prep.evals.name][key], cell.seed)
        fit = {"head": "standardise + ridge regression (scikit-learn Ridge), alpha chosen by held-out Pearson",
               "alpha_grid": list(ridge.ALPHA_GRID), "chosen_alpha": res.chosen_alpha,
               "heldout_pearson": {str(k): round(v, 5) for k, v in res.heldout_pearson.items()},
               "n_heldout": res.n_heldout}
        return res, fit, {"weight": res.head.weight.astype(np.float32), "bias": res.head.bias.astype(np.float32)}

    def _fit_folds(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        """k-fold over dev (a task with no train set): each fold's pairs answered by a probe fitted on the other
        folds (its C chosen on a held-out slice of those), every dev pair scored once, out of fold."""
        import numpy as np

        from ..seeds import numpy_rng

        run, evals = prep.run, prep.evals
        k = run.task.dev_folds
        x = prep.state["vectors"][evals.name][(cell.pooling, cell.layer)]
        y = np.asarray(evals.labels)
        fold_of = np.empty(len(y), dtype=np.int64)
        fold_of[numpy_rng(FOLD_SEED, "folds").permutation(len(y))] = np.arange(len(y)) % k
        pred = np.zeros(len(y), dtype=np.int64)
        proba = np.zeros((len(y), int(y.max()) + 1))
        per_fold, t0 = [], time.perf_counter()
        for f in range(k):
            test, fit_rows = fold_of == f, fold_of != f
            res = probe.fit_probe(x[fit_rows], y[fit_rows], x[test], cell.seed)
            pred[test], proba[test] = res.pred, res.proba
            per_fold.append({"fold": f + 1, "n_train": res.n_train, "n_eval": int(test.sum()), "chosen_c": res.chosen_c,
                             "accuracy": round(float((res.pred == y[test]).mean()), 4)})
        wall = time.perf_counter() - t0
        prep_view = Prepared(run, evals, _fold_split(evals, k), prep.data_sha, prep.state)
        return classified(
            prep_view, run_id, pred, proba, n_train=int(round(np.mean([f["n_train"] for f in per_fold]))),
            config={"data_source": run.data.source, "max_length": run.max_length,
                    "folds": per_fold, "fold_rule": f"{k} folds of the dev pairs by a seeded permutation (seed "
                                                     f"{FOLD_SEED}), every pair scored once by the probe of the "
                                                     f"other {k - 1}",
                    "probe": {"head": "standardise + L2 logistic regression per fold (exact Newton), C chosen on a "
                                      "held-out slice of the fold's training pairs", "c_grid": list(probe.C_GRID)},
                    "encode_wall_s": round(run.report.encode_wall_s, 3), **precision.identity(run.spec.dtype)},
            wall_s=wall)

    @staticmethod
    def _fit_linear(prep: Prepared, cell: Cell, rows, y_train) -> tuple:
        """Logistic regression on the cell's rows of the cached vectors; its head is one affine map (saved)."""
        import numpy as np

        key, vectors, starts = (cell.pooling, cell.layer), prep.state["vectors"], prep.state["path_starts"]
        res = probe.fit_probe(vectors[prep.train.name][key][rows], y_train, vectors[prep.evals.name][key],
                              cell.seed, start=starts.get(key))
        starts[key] = res.path_start
        fit = {"head": "standardise + L2 logistic regression (exact Newton, warm-started over the C grid)",
               "c_grid": list(probe.C_GRID), "chosen_c": res.chosen_c,
               "heldout_accuracy": {str(k): v for k, v in res.heldout_accuracy.items()}, "n_heldout": res.n_heldout}
        return res, fit, {"weight": res.head.weight.astype(np.float32), "bias": res.head.bias.astype(np.float32)}

    @staticmethod
    def _fit_tokens(prep: Prepared, cell: Cell, rows, y_train) -> tuple:
        """The pooling's parameters and a linear head on the cell's rows of the token states (not an affine map
        of a fixed vector, so no head file: the app never applies it)."""
        from ..heads import tokens

        held = prep.state["tokens"]
        states = held[prep.train.name][cell.layer]
        res = tokens.fit(cell.pooling, [states[i] for i in rows], y_train, held[prep.evals.name][cell.layer],
                         cell.seed, TOKEN_HEAD)
        fit = {"head": "standardised token states -> the pooling's own parameters -> Linear, AdamW, best epoch "
                       "on the held-out slice", **TOKEN_HEAD, "heldout_accuracy_per_epoch": res.heldout_accuracy,
               "selected_epoch": res.selected_epoch, "steps": res.steps, "train_wall_s": res.train_wall_s,
               "n_heldout": res.n_heldout}
        return res, fit, None


def _fold_split(evals, k: int):
    """The dev split, named as a k-fold estimate (shown apart, never ranked with official-dev rows)."""
    from ..tasks.base import Split
    from .kfold import KFOLD_PREFIX

    return Split(f"{KFOLD_PREFIX} over dev pairs (k={k}, seed {FOLD_SEED})", evals.texts, evals.labels, evals.ids,
                 evals.groups)


REGIME = Regime(
    "probe", "frozen probe",
    "frozen encoder; a head trained on its features (logistic regression per pooling and layer, or a span head "
    "for QA)",
    {SENTENCE: PooledProbe, PAIR: PooledProbe, PAIR_REGRESSION: PooledProbe, SPAN: SpanProbe},
)
