"""How long the Leaderboard tab takes in a real browser, against an app already served (issue 42's two targets).

    python app.py --port 7860 &            # wait until it serves and its start-up warm-up is done
    python tests/tools/leaderboard_browser_times.py http://127.0.0.1:7860/ --runs 3

Headless Chromium (/usr/bin/chromium) at 1366 x 900, each run in a fresh page: a shared link (`/?tab=leaderboard`)
timed from navigation to the first row of its table, then a task-filter change for each task, from the option's
click to the task's first view and to its first table row. Prints the medians and the machine's load average
before and after, since on a shared machine the browser's own rendering is most of the time. Point it at an
older checkout's server to compare. Targets: a shared link's table under 2 s, a filter change under 1 s.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TASKS = ["sst2", "mrpc", "stsb", "rte", "squad"]


def _shared_link(browser, url: str, expect) -> float:
    pg = browser.new_page(viewport={"width": 1366, "height": 900})
    try:
        start = time.monotonic()
        pg.goto(url + "?tab=leaderboard")
        expect(pg.locator("#board-table").get_by_role("gridcell").first).to_be_visible()
        return time.monotonic() - start
    finally:
        pg.close()


def _filter_changes(browser, url: str, expect) -> list[tuple[str, float, float]]:
    pg = browser.new_page(viewport={"width": 1366, "height": 900})
    out = []
    try:
        pg.goto(url + "?tab=leaderboard&task=nsp")
        expect(pg.locator("#board-table").get_by_role("gridcell", name="nsp", exact=True).first).to_be_visible()
        pg.wait_for_timeout(2000)  # settled, as a visitor's page is before the next click
        for task in TASKS:
            pg.locator("#board-task input").click()
            start = time.monotonic()
            pg.get_by_role("option", name=task, exact=True).click()
            title = {"squad": "SQuAD", "stsb": "STS-B", "sst2": "SST-2"}.get(task, task.upper())
            expect(pg.locator("#board-first h4").first).to_contain_text(title)
            first = time.monotonic() - start
            expect(pg.locator("#board-table").get_by_role("gridcell", name=task, exact=True).first).to_be_visible()
            out.append((task, first, time.monotonic() - start))
            pg.wait_for_timeout(1000)
    finally:
        pg.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url", help="the served app, e.g. http://127.0.0.1:7860/")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)
    url = args.url if args.url.endswith("/") else args.url + "/"
    load_before = os.getloadavg()[0]
    shared, changes = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for _ in range(args.runs):
            shared.append(_shared_link(browser, url, expect))
            changes.extend(_filter_changes(browser, url, expect))
        browser.close()
    for task, first, table in changes:
        print(f"task={task}: first view {first:.2f} s, table {table:.2f} s")
    print(f"shared link /?tab=leaderboard, table shown: {', '.join(f'{s:.2f}' for s in shared)} s "
          f"(median {statistics.median(shared):.2f} s, target < 2 s)")
    print(f"task-filter change, table shown: median {statistics.median(t for _, _, t in changes):.2f} s over "
          f"{len(changes)} changes (first view {statistics.median(f for _, f, _ in changes):.2f} s; target < 1 s)")
    print(f"load average (1 min): {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
