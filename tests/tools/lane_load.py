"""A bounded loopback load test of the page's lanes (issue 42): long answers must not starve short ones.

    python tests/tools/lane_load.py                      # starts `python app.py` on a free 127.0.0.1 port
    python tests/tools/lane_load.py --url http://127.0.0.1:7860/   # an app already running (loopback only)

Phase 1: `--heavy` (8) of the heaviest Answer requests the page allows, posted at once: a 64-token question
(the most a window keeps) and a context of "!" sized to exactly serve.budget.MAX_WINDOWS full windows. One
second later, while they run, `--probes` (3) rounds of one normal Answer (the latency tool's 1,000-character
context, one window) and one Classify, each timed from POST to result on loopback. Phase 2: `--burst` (100)
Classify requests at once: how many were answered, refused with a message (the queue full, HTTP 503) or
failed. Exit 1 where a normal Answer took `--answer-limit` (2 s) or more, a Classify `--classify-limit` (1 s)
or more, or any request failed; a 503 counts as refused, not failed, only where its body says the queue is
full. Bounded: 8 + 2 x 3 + 100 requests, each with a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(REPO))
from load_check import start_app, wait_ready  # noqa: E402

from berteval.bench.latency import QUESTION, SENTENCES, context  # noqa: E402

HEAVY_QUESTION = " ".join(["why"] * 80)  # 80 tokens, cut to the 64 a window keeps


def heaviest_context() -> str:
    """The longest run of "!" that still fits budget.MAX_WINDOWS windows of the served QA tokenizer: every window
    full, the most work one request may cause."""
    from transformers import AutoTokenizer

    from berteval import models
    from berteval.qa import DEFAULTS
    from berteval.qa.windows import make_windows
    from berteval.serve import budget

    tok = AutoTokenizer.from_pretrained(str(models.default_model_path()))
    windows = lambda n: len(make_windows(tok, [HEAVY_QUESTION], ["!" * n], max_length=DEFAULTS.max_length,  # noqa: E731
                                         doc_stride=DEFAULTS.doc_stride))
    lo, hi = 1, 10_000
    while lo < hi:  # the largest n with windows(n) <= MAX_WINDOWS
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if windows(mid) <= budget.MAX_WINDOWS else (lo, mid - 1)
    return "!" * lo


async def call(http: httpx.AsyncClient, api: str, data: list, timeout: float) -> tuple[str, float, str]:
    """(outcome, seconds, detail): outcome "answered", "refused" (a message: the queue full, or the page's own
    refusal in its message box) or "failed"."""
    t0 = time.perf_counter()
    try:
        posted = await http.post(f"gradio_api/call/{api}", json={"data": data}, timeout=timeout)
        if posted.status_code == 503:
            return ("refused" if "Queue is full" in posted.text else "failed"), time.perf_counter() - t0, posted.text
        posted.raise_for_status()
        text = (await http.get(f"gradio_api/call/{api}/{posted.json()['event_id']}", timeout=timeout)).text
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return "failed", time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - t0
    if "event: complete" not in text:
        return "failed", seconds, text[-300:]
    box = text.rsplit('"value":', 1)[-1][:200] if '"visible":true' in text.replace(" ", "") else ""
    return ("refused" if box else "answered"), seconds, box


def client(n: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=URL[0], limits=httpx.Limits(max_connections=n + 8, max_keepalive_connections=0))


URL = [""]


async def phase_heavy(n_heavy: int, probes: int, timeout: float, heavy_context: str) -> tuple[list, list, list]:
    async with client(n_heavy + 2) as http:
        heavy = [asyncio.create_task(call(http, "answer", ["default", HEAVY_QUESTION, heavy_context], timeout))
                 for _ in range(n_heavy)]
        await asyncio.sleep(1.0)  # the long ones are admitted and computing
        answers, classes = [], []
        for i in range(probes):
            answers.append(await call(http, "answer", ["default", QUESTION, context(1000)], timeout))
            classes.append(await call(http, "classify", ["default", SENTENCES[i % len(SENTENCES)], "mean", "sst2", ""],
                                      timeout))
        return answers, classes, await asyncio.gather(*heavy)


async def phase_burst(n: int, timeout: float) -> list:
    async with client(n) as http:
        return await asyncio.gather(*(call(http, "classify", ["default", SENTENCES[i % len(SENTENCES)], "mean",
                                                              "sst2", ""], timeout) for i in range(n)))


def summary(name: str, results: list) -> str:
    kinds = {k: sum(r[0] == k for r in results) for k in ("answered", "refused", "failed")}
    secs = sorted(r[1] for r in results if r[0] == "answered")
    timing = f"; answered in {secs[0]:.2f}-{secs[-1]:.2f} s (median {secs[len(secs) // 2]:.2f} s)" if secs else ""
    return (f"{name}: {kinds['answered']} answered, {kinds['refused']} refused with a message, {kinds['failed']} "
            f"failed{timing}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=None, help="a running app (loopback only); default: start one")
    parser.add_argument("--heavy", type=int, default=8)
    parser.add_argument("--probes", type=int, default=3)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--answer-limit", type=float, default=2.0)
    parser.add_argument("--classify-limit", type=float, default=1.0)
    args = parser.parse_args(argv)
    proc = None
    if args.url is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        URL[0], proc = f"http://127.0.0.1:{port}/", start_app(port)
    else:
        URL[0] = args.url
        if urlparse(URL[0]).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"{URL[0]} is not a loopback address: this test only loads an app on this machine")
    try:
        wait_ready(URL[0], proc)
        heavy_context = heaviest_context()
        print(f"app {URL[0]}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores; "
              f"heaviest context: {len(heavy_context):,} characters")
        asyncio.run(phase_burst(2, args.timeout))  # warm: models loaded before anything is timed
        t0 = time.perf_counter()
        answers, classes, heavy = asyncio.run(phase_heavy(args.heavy, args.probes, args.timeout, heavy_context))
        print(f"phase 1 ({time.perf_counter() - t0:.1f} s): " + summary(f"{args.heavy} heaviest answers", heavy))
        print("  " + summary("normal answers meanwhile", answers))
        print("  " + summary("classify meanwhile", classes))
        t0 = time.perf_counter()
        burst = asyncio.run(phase_burst(args.burst, args.timeout))
        print(f"phase 2 ({time.perf_counter() - t0:.1f} s): " + summary(f"{args.burst} classify at once", burst))
        for r in {r[2] for r in [*heavy, *answers, *classes, *burst] if r[0] != "answered"}:
            print(f"  not answered: {r[:200]}")
        slow = [r for r in answers if r[0] != "answered" or r[1] >= args.answer_limit] + \
               [r for r in classes if r[0] != "answered" or r[1] >= args.classify_limit]
        failed = [r for r in [*heavy, *burst] if r[0] == "failed"]
        print("PASS" if not slow and not failed else f"FAIL: {len(slow)} probes over their limit, {len(failed)} failed")
        return 0 if not slow and not failed else 1
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
