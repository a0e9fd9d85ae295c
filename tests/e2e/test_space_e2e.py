"""The page behind a Space-like proxy: the app started with GRADIO_ROOT_PATH=/space behind a reverse proxy
that serves it under /space and adds the forwarding headers a hosting proxy adds
(`tests/tools/space_proxy.py`); a visitor opens the proxied URL in headless Chromium and asks a question.
Every asset, the API description and the queue's event stream must then resolve under the prefix."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO
from test_app_e2e import (RESULT_MS, _free_port, _run_example, _wait_until_served, browser,  # noqa: F401
                          pytestmark, serve_app)

PREFIX = "/space"

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the module is skipped by pytestmark then
    expect = None


@pytest.fixture(scope="module")
def space_url(tmp_path_factory):
    folder = tmp_path_factory.mktemp("space")
    for app_url in serve_app(folder / "app.log", {"GRADIO_ROOT_PATH": PREFIX}):
        log = folder / "proxy.log"
        port = _free_port()
        with open(log, "w") as out:
            proxy = subprocess.Popen([sys.executable, "tests/tools/space_proxy.py", "--upstream", app_url.rstrip("/"),
                                      "--prefix", PREFIX, "--port", str(port)], cwd=REPO, stdout=out,
                                     stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}{PREFIX}/"
        try:
            _wait_until_served(url, proxy, log)
            yield url
        finally:
            proxy.terminate()
            proxy.wait(timeout=15)


def test_the_page_answers_behind_the_proxy_under_its_root_path(browser, space_url):  # noqa: F811
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    requests = []
    pg.on("request", lambda r: requests.append(r.url))
    pg.set_default_timeout(RESULT_MS)
    expect.set_options(timeout=RESULT_MS)
    pg.goto(space_url)
    _run_example(pg, "Answer", "qa-examples", "In what country", "qa-question", "Answer")
    expect(pg.locator("#qa-highlight .highlighted")).to_have_count(1)
    expect(pg.locator("#qa-about")).to_contain_text("Head:")
    expect(pg.get_by_text("Served by one queue")).to_be_visible()  # queue and limits, stated on the page
    origin = space_url.split(PREFIX)[0]
    stray = [u for u in requests if u.startswith(origin) and not u.startswith(origin + PREFIX)]
    assert not stray, stray  # nothing fetched outside the root path: behind a real proxy it would 404
    assert any("/queue/" in u or "/call/" in u for u in requests)  # the answer went through the proxied queue
    pg.close()
