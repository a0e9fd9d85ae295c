"""Latency of the running app through its public API, as a client sees it.

Start the app first (`python app.py --port 7860`), then:

    python tests/tools/app_latency.py [--url http://127.0.0.1:7860/] [--n 50] [--concurrent 20]

For `/classify` and `/answer` (a 1,000-character context) on the default model, `--n` sequential requests each (one
warm-up request first, not counted), p50 / p95 / max in milliseconds, measured two ways:
- `gradio_client`: `Client.predict`, submit to result. gradio_client 2.7 reads the
  server's event stream in a thread and polls it every 50 ms, so this includes up to
  ~50 ms of client-side waiting per request; the `floor` line (an empty sentence, which
  the page refuses at once without running the model) shows that fixed cost;
- `http`: the same queue through Gradio's REST route (`POST /gradio_api/call/<api>`, then
  read the result's event stream) on one kept-alive connection: the server's own time.
Then `--concurrent` requests at once through gradio_client (classify and answer
alternating, one client each, as separate visitors), each of which must come back with
a result, not a message. Exit status 1 when any request failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
from gradio_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # berteval from this checkout
# the same inputs as the in-process figures (`python -m berteval bench --sections latency`); torch-free import
from berteval.bench.latency import CONTEXT_CHARS, QUESTION, SENTENCES, context  # noqa: E402


def inputs(endpoint: str, i: int) -> tuple:
    if endpoint == "/classify":
        return "default", SENTENCES[i % len(SENTENCES)], "mean", "sst2", ""
    if endpoint == "/answer":
        return "default", QUESTION, context(CONTEXT_CHARS)
    return "default", "", "mean", "sst2", ""  # floor: refused before any model runs


def message(result) -> str:
    """The tab's message box is the last output: empty when the request produced a result."""
    box = result[-1]
    if isinstance(box, dict):
        return (box.get("value") or "") if box.get("visible", True) else ""
    return box or ""


def via_client(client: Client, endpoint: str, i: int) -> tuple[float, str]:
    """(seconds, message or '') for one request through gradio_client."""
    t0 = time.perf_counter()
    result = client.predict(*inputs(endpoint, i), api_name=endpoint.replace("/floor", "/classify"))
    return time.perf_counter() - t0, message(result)


def call_http(http: httpx.Client, api: str, data: list) -> tuple[float, list | None, str]:
    """(seconds, outputs or None, message or '') for one request through Gradio's REST route."""
    t0 = time.perf_counter()
    event = http.post(f"gradio_api/call{api}", json={"data": data}).json()["event_id"]
    with http.stream("GET", f"gradio_api/call{api}/{event}") as stream:
        text = "".join(stream.iter_text())
    seconds = time.perf_counter() - t0
    if "event: complete" not in text:
        return seconds, None, f"no result: {text[-300:]}"
    out = json.loads(text.split("event: complete", 1)[1].split("data:", 1)[1].strip().split("\n", 1)[0])
    return seconds, out, message(out)


def via_http(http: httpx.Client, endpoint: str, i: int) -> tuple[float, str]:
    """(seconds, message or '') for one request through Gradio's REST route on a kept-alive connection."""
    seconds, _, msg = call_http(http, endpoint.replace("/floor", "/classify"), list(inputs(endpoint, i)))
    return seconds, msg


def percentiles(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):6.1f} ms, p95 {p95:6.1f} ms, max {ms[-1]:6.1f} ms (n={len(ms)})"


def series(call, conn, endpoint: str, n: int) -> tuple[list[float], set[str]]:
    call(conn, endpoint, 0)  # warm-up: first-request costs are not what a visitor waits for
    times, messages = [], set()
    for i in range(n):
        seconds, msg = call(conn, endpoint, i)
        times.append(seconds)
        messages.add(msg)
    return times, messages - {""}


def main(argv: list[str] | None = None) -> int:
    global CONTEXT_CHARS  # --context-chars sets what `inputs` sends
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:7860/")
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--context-chars", type=int, default=CONTEXT_CHARS, help="length of the /answer context")
    args = parser.parse_args(argv)
    CONTEXT_CHARS = args.context_chars
    new_client = lambda: Client(args.url, verbose=False, download_files=False, analytics_enabled=False)  # noqa: E731
    client, http = new_client(), httpx.Client(base_url=args.url, timeout=120)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    failures = 0
    for endpoint in ("/classify", "/answer", "/floor"):
        for how, call, conn in (("gradio_client", via_client, client), ("http", via_http, http)):
            times, messages = series(call, conn, endpoint, args.n)
            print(f"{endpoint:9} {how:13} {percentiles(times)}")
            if endpoint != "/floor":
                for msg in messages:
                    failures += 1
                    print(f"  answered with a message, not a result: {msg}")

    endpoints = ["/classify" if i % 2 == 0 else "/answer" for i in range(args.concurrent)]
    clients = [new_client() for _ in endpoints]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrent) as pool:
        futures = [pool.submit(via_client, c, ep, i) for i, (c, ep) in enumerate(zip(clients, endpoints))]
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result())
            except Exception as exc:  # noqa: BLE001: count it and say what it was
                outcomes.append((float("nan"), f"{type(exc).__name__}: {exc}"))
    wall = time.perf_counter() - t0
    ok = [s for s, m in outcomes if not m]
    slowest = f", slowest {max(ok) * 1000:.0f} ms" if ok else ""
    print(f"{args.concurrent} concurrent requests: {len(ok)} of {len(outcomes)} answered with a result "
          f"in {wall:.2f} s{slowest}")
    bad = [m for _, m in outcomes if m]
    for m in sorted(set(bad)):
        print(f"  failed: {m}")
    failures += len(bad)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
