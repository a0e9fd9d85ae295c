"""Refit every committed frozen-probe record of a model with today's solver and compare with what
was committed: chosen C, held-out accuracy per C, and every eval prediction.

The probe's solver changed from scikit-learn's lbfgs (stopping at a gradient tolerance of
1e-4) to an exact Newton path (`berteval.heads.newton_logistic`); the run ids did not, because the
objective, the data, the held-out protocol and the C grid did not. This tool is the
evidence that the records still mean what they say: a committed cell reproduces if the
same C wins and the predictions are the same.

    python tests/tools/probe_solver_parity.py --data-dir ../shared/data [--task sst2] [--model default]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from berteval import features, models  # noqa: E402
from berteval.config import data_dir  # noqa: E402
from berteval.heads import probe as linear  # noqa: E402
from berteval.store import Store  # noqa: E402
from berteval.tasks import get  # noqa: E402
from berteval.tasks.base import split_checksum  # noqa: E402


def lbfgs_probe(x_train, y_train, x_eval, seed):
    """The probe as it was fitted before the Newton solver: scikit-learn lbfgs, tol 1e-4, per C."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(y_train)
    tr, ho = linear.heldout_split(len(y), seed)
    scaler = StandardScaler().fit(x_train[tr])
    fits = {c: LogisticRegression(C=c, max_iter=2000, tol=1e-4).fit(scaler.transform(x_train[tr]), y[tr])
            for c in linear.C_GRID}
    scores = {c: float((f.predict(scaler.transform(x_train[ho])) == y[ho]).mean()) for c, f in fits.items()}
    best = max(linear.C_GRID, key=lambda c: (scores[c], -c))
    return best, fits[best].predict(scaler.transform(x_eval))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--task", action="append", help="sst2 and/or nsp (default both)")
    ap.add_argument("--model", default="default")
    args = ap.parse_args(argv)
    store, model = Store(), models.load(args.model)
    same_all = True
    for name in args.task or ["sst2", "nsp"]:
        task = get(name)
        data = task.load(data_dir(args.data_dir))
        recs = [r for r in store.read(name)[0] if r.regime == "probe" and r.model == model.model_id
                and r.model_revision == model.revision and r.n_train + r.config["probe"]["n_heldout"] == len(data.train)]
        cells = sorted({(r.pooling, r.layer) for r in recs})
        vec = {s.name: features.encode(model, s.texts, data_sha256=split_checksum(s), poolings=sorted({p for p, _ in cells}),
                                       layers=sorted({layer for _, layer in cells}), max_length=128, progress=False).vectors
               for s in (data.train, data.eval)}
        for r in recs:
            t0 = time.perf_counter()
            res = linear.fit_probe(vec["train"][(r.pooling, r.layer)], data.train.labels,
                                   vec["validation"][(r.pooling, r.layer)], r.seed)
            wall = time.perf_counter() - t0
            committed = json.loads((store.root / r.predictions_file).read_text())
            diff = int((res.pred != np.asarray(committed["pred"])).sum())
            t1 = time.perf_counter()
            old_c, old_pred = lbfgs_probe(vec["train"][(r.pooling, r.layer)], data.train.labels,
                                          vec["validation"][(r.pooling, r.layer)], r.seed)
            old_wall = time.perf_counter() - t1
            print(f"    lbfgs here: C {old_c}, {int((old_pred != np.asarray(committed['pred'])).sum())} predictions "
                  f"differ from committed, {int((old_pred != res.pred).sum())} from Newton; fit {old_wall:.1f}s")
            same_c = res.chosen_c == r.config["probe"]["chosen_c"]
            same_all &= diff == 0 and same_c
            print(f"{name} {r.pooling}@{r.layer} seed {r.seed}: C {res.chosen_c} (committed {r.config['probe']['chosen_c']}), "
                  f"{diff} of {len(res.pred)} predictions differ, accuracy {float((res.pred == data.eval.labels).mean()):.4f} "
                  f"(committed {r.main_value:.4f}), fit {wall:.1f}s (committed {r.wall_s:.1f}s)")
    print("every committed cell reproduces" if same_all else "SOME CELLS DIFFER")
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
