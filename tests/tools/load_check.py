"""A bounded load check of the app on loopback: bursts of concurrent requests larger than the queue.

    python tests/tools/load_check.py                      # starts `python app.py` on a free 127.0.0.1 port
    python tests/tools/load_check.py --url http://127.0.0.1:7860/ --pid <app pid>   # an app already running

Each round posts `--burst` requests at once (classify and answer alternating, each a separate
visitor) through Gradio's REST route (`POST /gradio_api/call/<api>`, then the event stream) and
waits for all of them. The app's queue runs 2 requests at a time and holds 64 waiting; what
does not fit is refused at once with HTTP 503 "Queue is full". Per round and overall: requests
answered with a result, refused with "queue full", failed any other way (the number that must be
0), p50 / p95 / max latency of the answered ones (post to result: queue wait included), and
the server's resident memory (VmRSS) before the first round and after each. Bounded: `--rounds`
x `--burst` requests, `--timeout` seconds per request; loopback only (the URL must be a
127.0.0.1 / localhost address). Exit 1 when any request failed or the server stopped answering.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(REPO))
from berteval.bench.latency import CONTEXT_CHARS, QUESTION, SENTENCES, context  # noqa: E402  the latency tool's inputs

CONTEXT = context(CONTEXT_CHARS)


MODELS = ["default"]  # --models: the encoders the requests cycle through


def request(i: int) -> tuple[str, list]:
    """The i-th request of a burst: (api, inputs). With one model, classify and answer alternate; with several,
    classify and next-sentence on each model in turn and answer on the default (the one with a QA head)."""
    if len(MODELS) == 1:
        if i % 2 == 0:
            return "classify", [MODELS[0], SENTENCES[i // 2 % len(SENTENCES)], "mean", "sst2", ""]
        return "answer", [MODELS[0], QUESTION, CONTEXT]
    model = MODELS[i // 3 % len(MODELS)]
    kind = i % 3
    if kind == 0:
        return "classify", [model, SENTENCES[i // 3 % len(SENTENCES)], "mean", "sst2", ""]
    if kind == 1:
        return "next_sentence", [model, SENTENCES[i % len(SENTENCES)], SENTENCES[(i + 1) % len(SENTENCES)]]
    return "answer", ["default", QUESTION, CONTEXT]


def rss_mb(pid: int) -> float:
    """Resident memory of a process (and nothing else), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass
class Outcome:
    api: str
    kind: str  # "answered", "queue full", "failed"
    seconds: float
    detail: str = ""


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(o.kind == kind for o in self.outcomes)

    def latency(self, api: str | None = None) -> str:
        ms = sorted(o.seconds * 1000 for o in self.outcomes if o.kind == "answered" and api in (None, o.api))
        if not ms:
            return "no answers"
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return f"p50 {statistics.median(ms):6.0f} ms, p95 {p95:6.0f} ms, max {ms[-1]:6.0f} ms (n={len(ms)})"


async def one(http: httpx.AsyncClient, i: int, timeout: float) -> Outcome:
    api, data = request(i)
    t0, phase = time.perf_counter(), "POST"
    try:
        posted = await http.post(f"gradio_api/call/{api}", json={"data": data}, timeout=timeout)
        if posted.status_code == 503 and "Queue is full" in posted.text:
            return Outcome(api, "queue full", time.perf_counter() - t0)
        posted.raise_for_status()
        event, phase = posted.json()["event_id"], "result stream"
        text = (await http.get(f"gradio_api/call/{api}/{event}", timeout=timeout)).text
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return Outcome(api, "failed", time.perf_counter() - t0, f"{api} {phase}: {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - t0
    if "event: complete" not in text:
        return Outcome(api, "failed", seconds, f"no result: {text[-200:]}")
    outputs = json.loads(text.split("event: complete", 1)[1].split("data:", 1)[1].strip().split("\n", 1)[0])
    box = outputs[-1]  # the tab's message box: visible only when the request was refused with a message
    if isinstance(box, dict) and box.get("visible") and box.get("value"):
        return Outcome(api, "failed", seconds, f"answered with a message: {box['value'][:200]}")
    return Outcome(api, "answered", seconds)


async def burst(url: str, n: int, timeout: float, concurrency: int | None = None) -> list[Outcome]:
    # A new connection per request, as separate visitors make: a kept-alive one idle past the server's
    # keep-alive timeout (uvicorn: 5 s) can be closed just as it is reused, a client-side race that
    # showed here as 1-3 ReadErrors in 100, not a failure of the server.
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
    gate = asyncio.Semaphore(concurrency or n)  # at most this many requests in flight

    async def gated(http, i):
        async with gate:
            return await one(http, i, timeout)

    async with httpx.AsyncClient(base_url=url, limits=limits) as http:
        return await asyncio.gather(*(gated(http, i) for i in range(n)))


def start_app(port: int) -> subprocess.Popen:
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"load_check_app_{port}.log", "w")
    return subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)], cwd=REPO,
                            stdout=log, stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen | None, limit_s: float = 300) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"app.py exited with {proc.returncode} before answering")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"app.py did not answer on {url} within {limit_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=None, help="a running app (loopback only); default: start one")
    parser.add_argument("--pid", type=int, default=None, help="the running app's pid, for its memory")
    parser.add_argument("--burst", type=int, default=100, help="requests posted at once per round (default 100)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per request")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="requests in flight at once within a round (default: the whole burst at once)")
    parser.add_argument("--models", default="default",
                        help="comma-separated encoders to cycle through, e.g. "
                             "default,default+nsp-pooler,default+mlm-nsp,default+random")
    args = parser.parse_args(argv)
    MODELS[:] = [m.strip() for m in args.models.split(",") if m.strip()]

    proc = None
    if args.url is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url, proc = f"http://127.0.0.1:{port}/", start_app(port)
        pid = proc.pid
    else:
        url, pid = args.url, args.pid
        if urlparse(url).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"{url} is not a loopback address: this check only loads an app on this machine")
    try:
        wait_ready(url, proc)
        rss = lambda: f"{rss_mb(pid):.0f} MB" if pid else "unknown (pass --pid)"  # noqa: E731
        print(f"app {url}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        # One request of each kind first, so the models are loaded before the memory figure is taken.
        warm = asyncio.run(burst(url, 2, args.timeout))
        print(f"warm-up: {', '.join(o.kind for o in warm)}; server RSS before: {rss()}")
        total = Tally()
        rss_after = []
        for r in range(1, args.rounds + 1):
            t0 = time.perf_counter()
            round_ = Tally(asyncio.run(burst(url, args.burst, args.timeout, args.concurrency)))
            if pid:
                rss_after.append(rss_mb(pid))
            total.outcomes += round_.outcomes
            print(f"round {r}: {args.burst} at once in {time.perf_counter() - t0:.1f} s: "
                  f"{round_.count('answered')} answered, {round_.count('queue full')} refused (queue full), "
                  f"{round_.count('failed')} failed; answered {round_.latency()}; server RSS after: {rss()}")
            for detail in sorted({o.detail for o in round_.outcomes if o.kind == "failed"}):
                print(f"  failed: {detail}")
        after = asyncio.run(burst(url, 2, args.timeout))
        alive = all(o.kind == "answered" for o in after)
        print(f"total: {len(total.outcomes)} requests: {total.count('answered')} answered, "
              f"{total.count('queue full')} refused (queue full), {total.count('failed')} failed")
        for api in ("classify", "next_sentence", "answer"):
            print(f"  {api:13} {total.latency(api)}")
        if len(rss_after) >= 3:
            print(f"server RSS after round {len(rss_after)} / after round 2: {rss_after[-1] / rss_after[1]:.3f} "
                  f"({rss_after[-1]:.0f} / {rss_after[1]:.0f} MB)")
        print(f"after the rounds the server {'still answers' if alive else 'DOES NOT ANSWER'}; "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0 if alive and not total.count("failed") else 1
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
