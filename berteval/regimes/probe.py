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
from ..heads import probe
from ..tasks.base import PAIR, SENTENCE, SPAN
from .base import Cell, CellRegime, CellResult, Contract, Prepared, Regime, classified
from .grid import check_poolings, check_sizes, draw_rows, parse_layers, pooled_cells, sized_config
from .span import SpanProbe

# The probe of a pooling with parameters (on token states): in the identity of such cells only.
TOKEN_HEAD = {"epochs": 4.0, "lr": 1e-3, "batch_size": 64}


class PooledProbe(CellRegime):
    """What `prepare` keeps in `state`: "vectors" (split name -> {(pooling, layer): (N, width) float32}),
    "tokens" (split name -> {layer: [(T_i, H) float32]}, for poolings with parameters only) and
    "path_starts" ((pooling, layer) -> the optimum of the last fit at its smallest C: the next seed's fit of
    the same vectors starts there, same optimum in fewer steps; `probe.fit_probe`)."""

    contract = Contract(options=("poolings", "layers", "train_sizes", "limit_train"),
                        optional=("train_size", "bf16", "processes"))

    def cells(self, run) -> list[Cell]:
        names = pooling.parse(run.spec.poolings)
        return pooled_cells(run, names, parse_layers(run.spec.layers, run.identity.num_hidden_states))

    def protocol(self, run, cell: Cell, train) -> dict:
        check_sizes([cell], len(train))
        head = {"token_head": TOKEN_HEAD} if pooling.POOLINGS[cell.pooling].trained else {"c_grid": probe.C_GRID}
        # The encoder is frozen: bf16 runs on its bf16 weights, named in the id (nothing added for fp32).
        return {**head, "heldout": [probe.HELDOUT_MAX, probe.HELDOUT_FRACTION]}

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
        rows = draw_rows(len(train), cell)
        y_train = np.asarray(train.labels)[rows]
        t0 = time.perf_counter()
        if pooling.POOLINGS[cell.pooling].trained:
            fitted, fit, head = self._fit_tokens(prep, cell, rows, y_train)
        else:
            fitted, fit, head = self._fit_linear(prep, cell, rows, y_train)
        wall = time.perf_counter() - t0
        return classified(
            prep, run_id, fitted.pred, fitted.proba, n_train=fitted.n_train,
            config={"data_source": run.data.source, "train_examples_available": len(train),
                    "limit_train": run.spec.limit_train, **sized_config(cell, rows, len(train)),
                    "max_length": run.max_length, "probe": fit, "encode_wall_s": round(run.report.encode_wall_s, 3),
                    **precision.identity(run.spec.dtype)},
            head=head, wall_s=wall)

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


REGIME = Regime(
    "probe", "frozen probe",
    "frozen encoder; a head trained on its features (logistic regression per pooling and layer, or a span head "
    "for QA)",
    {SENTENCE: PooledProbe, PAIR: PooledProbe, SPAN: SpanProbe},
)
