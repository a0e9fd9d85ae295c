"""Cold start of the app, as a Space's first visitor meets it: launch to page, then the first answers.

    python tests/tools/cold_start.py [--port 7861] [--proxy] [--online] [--json out.json]

Starts `python app.py` (offline: HF_HUB_OFFLINE=1, unless --online) and measures, from the moment
the process is started:
- `page_s`: until the page answers HTTP 200 (imports, the models and heads warmed by `app.main`,
  Gradio's start);
- the first request of each kind right after (`first_answer_s`, `first_classify_s`), then the same
  answer again (`warm_answer_s`), and an answer over a context at the page's limit (10,000 characters,
  read in overlapping windows: `limit_context_s`).
With --proxy, everything goes through `tests/tools/space_proxy.py` under /space, the app started
with GRADIO_ROOT_PATH=/space, as behind a Space's proxy. Exit status 1 if any request failed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent.parent
sys.path[:0] = [str(TOOLS), str(REPO)]
from app_latency import call_http  # noqa: E402
from berteval.bench.latency import QUESTION, SENTENCES, context  # noqa: E402  the latency tools' inputs

CONTEXT = context()  # the 1,000-character context app_latency.py sends

PREFIX = "/space"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, t0: float, proc: subprocess.Popen, limit_s: float = 600) -> float:
    """Seconds from t0 until `url` answers 200."""
    while time.perf_counter() - t0 < limit_s:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited with {proc.returncode} before serving")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {limit_s} s")


def limit_context(limit: int) -> str:
    """A context of exactly `limit` characters: the example paragraph, repeated."""
    return context(limit)


def start(args) -> tuple[list[subprocess.Popen], str, float]:
    port = args.port or free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    if not args.online:
        env["HF_HUB_OFFLINE"] = "1"
    if args.proxy:
        env["GRADIO_ROOT_PATH"] = PREFIX
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    url = f"http://127.0.0.1:{port}/"
    if args.proxy:
        outer = free_port()
        procs.append(subprocess.Popen([sys.executable, str(TOOLS / "space_proxy.py"), "--upstream", url[:-1],
                                       "--prefix", PREFIX, "--port", str(outer)]))
        url = f"http://127.0.0.1:{outer}{PREFIX}/"
    return procs, url, t0


def measure(url: str, t0: float, app: subprocess.Popen) -> dict:
    out = {"page_s": round(wait_for(url, t0, app), 2)}
    from berteval.serve import LIMITS  # after the page is up: importing torch here would slow the app's start
    http = httpx.Client(base_url=url, timeout=600)
    calls = {"first_answer_s": ("/answer", ["default", QUESTION, CONTEXT]),
             "first_classify_s": ("/classify", ["default", SENTENCES[0], "mean", "sst2", ""]),
             "warm_answer_s": ("/answer", ["default", QUESTION, CONTEXT]),
             "limit_context_s": ("/answer", ["default", QUESTION, limit_context(LIMITS["context"])])}
    out["failures"] = []
    for name, (api, data) in calls.items():
        seconds, result, msg = call_http(http, api, data)
        out[name] = round(seconds, 2)
        if msg:
            out["failures"].append(f"{name}: {msg}")
        elif api == "/answer":
            out[name.replace("_s", "_about")] = str(result[3])[:160]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=None, help="the app's port (default: a free one)")
    parser.add_argument("--proxy", action="store_true", help=f"behind tests/tools/space_proxy.py, under {PREFIX}")
    parser.add_argument("--online", action="store_true", help="leave HF_HUB_OFFLINE unset")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    procs, url, t0 = start(args)
    try:
        out = measure(url, t0, procs[0])
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
    out.update(url=url, load_average_before=[round(x, 2) for x in load_before], cores=os.cpu_count())
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 1 if out["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
