"""`--regime probe`: the encoder frozen, a head trained on what it already computes.

For sentence and sentence-pair tasks: one encoding of the data yields every (pooling,
layer) vector (`berteval.features`, cached), then a logistic-regression probe per cell
(`berteval.heads.linear`), its C chosen on a seeded held-out slice of train. For span QA
the probe is a span head on cached hidden states (`berteval.qa.regimes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import pooling
from ..heads import linear
from ..qa.regimes import SpanProbe
from ..tasks.base import PAIR, SENTENCE, SPAN, Split, limit_split
from .base import Cell, CellRegime, CellResult, Regime
from .grid import PooledData, check_poolings, parse_layers, pooled_cells, pooled_identity


@dataclass
class _Prepared(PooledData):
    vectors: dict  # split name -> {(pooling, layer): (N, width) float32}


class PooledProbe(CellRegime):
    def cells(self, run) -> list[Cell]:
        names = pooling.parse(run.spec.poolings)
        return pooled_cells(run, names, parse_layers(run.spec.layers, run.identity.num_hidden_states))

    def _splits(self, run) -> tuple[Split, Split, str]:
        train = limit_split(run.data.train, run.spec.limit_train)
        evals = run.eval_split()
        return train, evals, run.task.subset(run.data, train, evals)

    def identity(self, run, cell: Cell) -> dict:
        train, _, data_sha = self._splits(run)
        return {**pooled_identity(run, cell, data_sha, len(train)), "c_grid": linear.C_GRID,
                "heldout": [linear.HELDOUT_MAX, linear.HELDOUT_FRACTION]}

    def prepare(self, run, todo: list[Cell]) -> _Prepared:
        from .. import features
        from ..tasks.base import split_checksum

        model = run.model
        check_poolings(run, todo)
        train, evals, data_sha = self._splits(run)
        need_p = list(dict.fromkeys(c.pooling for c in todo))
        need_l = list(dict.fromkeys(c.layer for c in todo))
        vectors = {}
        for split in (train, evals):
            enc = features.encode(model, split.texts, data_sha256=split_checksum(split), poolings=need_p,
                                  layers=need_l, max_length=run.max_length, dtype=run.spec.dtype,
                                  progress=run.spec.progress, desc=f"encoding {split.name}")
            vectors[split.name] = enc.vectors
            run.report.encode_wall_s += enc.wall_s
            run.report.encoded_examples += enc.encoded
        return _Prepared(run, train, evals, data_sha, vectors)

    def fit_predict(self, prep: _Prepared, cell: Cell, run_id: str) -> CellResult:
        import time

        import numpy as np

        run, train, evals = prep.run, prep.train, prep.evals
        key = (cell.pooling, cell.layer)
        t0 = time.perf_counter()
        res = linear.fit_probe(prep.vectors[train.name][key], train.labels, prep.vectors[evals.name][key], cell.seed)
        wall = time.perf_counter() - t0
        y_eval = np.asarray(evals.labels)
        proba = res.proba[:, 1] if res.proba.shape[1] == 2 else res.proba
        return CellResult(
            metrics=run.score(pred=res.pred, label=y_eval), data_sha256=prep.data_sha, split=evals.name,
            n_train=res.n_train, n_eval=len(evals),
            config={"data_source": run.data.source, "train_examples_available": len(train),
                    "limit_train": run.spec.limit_train, "max_length": run.max_length,
                    "probe": {"head": "standardise + L2 logistic regression (exact Newton, warm-started over the C grid)",
                              "c_grid": list(linear.C_GRID), "chosen_c": res.chosen_c,
                              "heldout_accuracy": {str(k): v for k, v in res.heldout_accuracy.items()},
                              "n_heldout": res.n_heldout},
                    "encode_wall_s": round(run.report.encode_wall_s, 3)},
            predictions={"run_id": run_id, "split": evals.name, "data_sha256": prep.data_sha,
                         "label": y_eval.tolist(), "pred": res.pred.tolist(), "proba": np.round(proba, 5).tolist()},
            correct=res.pred == y_eval,
            head={"weight": res.head.weight.astype(np.float32), "bias": res.head.bias.astype(np.float32)},
            wall_s=wall,
        )


REGIME = Regime(
    "probe",
    "frozen encoder; a head trained on its features (logistic regression per pooling and layer, or a span head "
    "for QA)",
    {SENTENCE: PooledProbe, PAIR: PooledProbe, SPAN: SpanProbe},
)
