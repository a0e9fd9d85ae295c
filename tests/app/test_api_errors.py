"""A request the app refuses carries its reason, over raw HTTP and through gradio_client.

Gradio refuses some requests before any handler of ours runs (too few inputs, a value not among
a control's choices); with `show_error=False` such a refusal reached an API caller as
`{"error": null}`. The page is served here in-process with exactly the launch settings of
`python app.py` (`app.LAUNCH`), on a free loopback port; no model is loaded by these requests.
"""

from __future__ import annotations

import json
import socket
import sys

import pytest

from conftest import REPO

pytest.importorskip("gradio", reason="gradio is not installed: pip install -r requirements.txt")
sys.path.insert(0, str(REPO))
import app  # noqa: E402


@pytest.fixture(scope="module")
def served():
    """(the page, its URL), served as `python app.py` serves it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    page = app.build_demo()
    page.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **app.LAUNCH)
    yield page, f"http://127.0.0.1:{port}/"
    page.close()


@pytest.fixture(scope="module")
def url(served):
    return served[1]


def _raw(url: str, api: str, data) -> tuple[str, dict]:
    """(event, payload) of one call through Gradio's REST route: POST, then read the event stream."""
    import httpx

    with httpx.Client(base_url=url, timeout=60) as http:
        event_id = http.post(f"gradio_api/call/{api}", json={"data": data}).json()["event_id"]
        text = http.get(f"gradio_api/call/{api}/{event_id}").text
    event = text.split("event: ", 1)[1].split("\n", 1)[0]
    return event, json.loads(text.split("data: ", 1)[1].split("\n", 1)[0])


def test_too_few_inputs_over_http_says_so(url):
    event, payload = _raw(url, "classify", ["default"])
    assert event == "error" and payload["error"] is not None  # before: {"error": null}
    assert "didn't receive enough input values (needed: 5, got: 1)" in payload["error"]


def test_a_value_outside_the_choices_says_so_over_http_and_gradio_client(url):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    event, payload = _raw(url, "classify", ["default", "fine", "avg", "sst2", ""])
    assert event == "error" and "'avg'" in payload["error"] and "not in the list of choices" in payload["error"]
    client = Client(url, verbose=False, download_files=False, analytics_enabled=False)
    with pytest.raises(AppError, match="not in the list of choices"):
        client.predict("default", "fine", "avg", "sst2", "", api_name="/classify")


def test_a_refusal_by_the_app_itself_is_a_result_with_its_message(url):
    """Bad input our handlers refuse (an empty sentence) is not an error: the answer's last output, the
    tab's message box, holds the reason, shown in the page as it is in the API result."""
    event, payload = _raw(url, "classify", ["default", "   ", "mean", "sst2", ""])
    assert event == "complete" and "The sentence is empty" in payload[-1]["value"]


def test_sessions_kept_in_memory_are_bounded(served):
    """Every API call is a new Gradio session, and Gradio keeps each session's copy of the page config
    (10,000 by default: the server grew ~0.3 MB per request, see docs/reliability.md)."""
    page, url = served
    before = len(page.state_holder.session_data)
    for _ in range(3):
        _raw(url, "classify", ["default", "   ", "mean", "sst2", ""])
    assert len(page.state_holder.session_data) == before + 3  # one session per call
    assert page.state_holder.capacity == app.SESSIONS_KEPT <= 1000
