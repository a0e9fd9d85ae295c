"""Where a page request's time goes, in the process: the forward passes and the logits chart.

Times (p50 of 30 after two warm-ups) the Classify tab's encoder pass over one sentence and the
Answer tab's QA pass over the window of a 1,000-character context (as `app_latency.py` asks),
each in fp32 and on bf16 weights, with one torch thread (as the page serves) and with two; then
`serve.answer` whole, building the start/end logits chart, and the `app.answer` handler.

    python tests/tools/serve_profile.py
    python tests/tools/serve_profile.py --model FOLDER --threads 1,2,4   # the forward passes alone, any model
                                                                      # (no page, no committed heads: Gradio not needed)
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # berteval and app from this checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from app_latency import QUESTION, SENTENCES, context  # noqa: E402
from berteval import models, precision  # noqa: E402
from berteval.qa import inference  # noqa: E402


def p50(fn, n: int = 30) -> str:
    fn(), fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return f"p50 {statistics.median(times):6.2f} ms"


def forwards(encoder, qa_model, tokenizer, ctx: str, threads: list[int]) -> None:
    sentence = dict(tokenizer([SENTENCES[1]], return_tensors="pt"))
    windows = inference.make_windows(tokenizer, [QUESTION], [ctx], max_length=384, doc_stride=128)
    window = tokenizer.pad([windows.features[0]], return_tensors="pt")
    print(f"window of {window['input_ids'].shape[1]} tokens")
    for n in threads:
        torch.set_num_threads(n)
        with torch.inference_mode():
            for label, module, batch in (("classify forward", encoder, sentence), ("QA forward      ", qa_model, window)):
                print(f"{n} thread(s) {label} fp32 {p50(lambda: module(**batch))}, "
                      f"bf16 weights {p50(lambda: precision.bf16_copy(module)(**batch))}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="time only the forward passes of this model folder (its QA head may be random)")
    ap.add_argument("--threads", default="1,2", help="torch thread counts for the forward passes (default %(default)s)")
    args = ap.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    ctx = context(1000)
    if args.model:
        loaded = models.load(args.model)
        forwards(loaded.encoder, inference.head_model(loaded), loaded.tokenizer, ctx, threads)
        return
    import app
    from berteval import serve
    from leaderboard import logits

    clf, qa = serve.classifier("default"), serve.qa_model("default")
    forwards(clf.model.encoder, qa.model, qa.tokenizer, ctx, threads)
    torch.set_num_threads(app.TORCH_THREADS)
    ans = inference.answer(qa, QUESTION, ctx)
    best = ans.nbest[0]
    print(f"serve.answer      {p50(lambda: serve.answer('default', QUESTION, ctx))}")
    print(f"logits chart      {p50(lambda: logits.start_end_logits(ans.tokens, ans.start_logits, ans.end_logits, best.start_token, best.end_token))}")
    print(f"app.answer        {p50(lambda: app.answer('default', QUESTION, ctx))}")


if __name__ == "__main__":
    main()
