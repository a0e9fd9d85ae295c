"""Where a page request's time goes, in the process: the bench's latency rows, then the page's own work.

`python -m berteval bench --sections latency` times the forward passes (fp32 and bf16 weights, 1 and 2 threads)
and the served calls; this adds what only the page does: building the start/end logits chart and the whole
`app.answer` handler (needs Gradio and Plotly), at the page's thread count.

    python tests/tools/serve_profile.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # berteval and app from this checkout

import torch  # noqa: E402

import app  # noqa: E402
from berteval import serve  # noqa: E402
from berteval.bench import latency  # noqa: E402
from berteval.qa import inference  # noqa: E402
from leaderboard.figures import qa_logits as logits  # noqa: E402


def main() -> None:
    rows, notes = latency.measure("default")
    print(latency.format_latency(rows, notes))
    torch.set_num_threads(app.TORCH_THREADS)
    ctx = latency.context()
    ans = inference.answer(serve.qa_model("default"), latency.QUESTION, ctx)
    best = ans.nbest[0]
    chart = latency.p50_ms(lambda: logits.start_end_logits(ans.tokens, ans.start_logits, ans.end_logits,
                                                            best.start_token, best.end_token))
    print(f"logits chart      p50 {chart:6.2f} ms")
    print(f"app.answer        p50 {latency.p50_ms(lambda: app.answer('default', latency.QUESTION, ctx)):6.2f} ms")


if __name__ == "__main__":
    main()
