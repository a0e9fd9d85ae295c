"""Would the page answer the same on bf16 weights? fp32 against bf16 for the served heads.

The Answer tab's QA model on every 25th SQuAD dev question (the top answer's text) and the
Classify tab's committed SST-2 heads on all 872 dev sentences (verdict and P(positive)), each
computed as the page computes it, once in fp32 and once on the model's bf16 copy
(`berteval.precision`). The page stays in fp32 while this finds differences.

    python tests/tools/serve_bf16_parity.py --data-dir ../shared/data [--n 400]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # berteval from this checkout

from berteval import serve  # noqa: E402
from berteval.config import data_dir  # noqa: E402
from berteval.qa import inference  # noqa: E402
from berteval.serve import task_heads  # noqa: E402
from berteval.tasks import get  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--n", type=int, default=400, help="SQuAD dev questions (every 25th)")
    args = ap.parse_args()
    d = data_dir(args.data_dir)
    squad = get("squad").load(d).eval
    qa = serve.qa_model("default")
    same, changed, t0 = 0, [], time.perf_counter()
    for i in range(args.n):
        q, c = squad.texts[i * 25 % len(squad.texts)]
        a, b = (inference.answer(qa, q, c, dtype=dt).nbest[0].text for dt in ("fp32", "bf16"))
        same += a == b
        if a != b:
            changed.append((q, a, b))
    print(f"QA: {same} of {args.n} top answers identical, fp32 vs bf16 weights ({time.perf_counter() - t0:.0f} s)")
    for q, a, b in changed:
        print(f"    {q} | {a} | {b}")
    clf = serve.classifier("default")
    heads, texts = clf.heads, get("sst2").load(d).eval.texts

    fp32, bf16 = ([task_heads.p_positive(clf.model, heads, t, dt) for t in texts] for dt in ("fp32", "bf16"))
    for name in heads:
        a, b = np.array([p[name] for p in fp32]), np.array([p[name] for p in bf16])
        print(f"classify {name}: {int(((a >= .5) != (b >= .5)).sum())} of {len(a)} verdicts differ, "
              f"max |dP| {np.abs(a - b).max():.4f}")


if __name__ == "__main__":
    main()
