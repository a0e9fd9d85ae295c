"""`python app.py` on a port it cannot have: one line naming the port and `--port`, before any model loads."""

import socket

import pytest


def test_a_busy_port_is_named_with_what_to_pass_before_any_model_loads(monkeypatch):
    import app  # gradio: imported by the test, not at collection

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        monkeypatch.setattr(app.serve, "warm", lambda *a, **k: pytest.fail("the models loaded before the port check"))
        with pytest.raises(SystemExit) as stopped:
            app.main(["--host", "127.0.0.1", "--port", str(port)])
    message = str(stopped.value)
    assert f"port {port} on 127.0.0.1 is busy" in message and "--port" in message
    assert "\n" not in message and "GRADIO_SERVER_PORT" not in message


def test_a_free_port_is_no_problem():
    import app

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    assert app.port_problem("127.0.0.1", port) is None
