"""``moldau rest`` start-up mistakes: one ``Error:`` line, exit status 1, no traceback."""

from __future__ import annotations

import socket

from tests.helpers import one_line_error, run_moldau


def test_bad_listen_address() -> None:
    result = run_moldau("rest", "--listen", "nowhere")
    assert result.returncode == 1
    one_line_error(result, "--listen must be HOST:PORT")


def test_port_already_taken() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run_moldau("rest", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 1
    one_line_error(result, f"cannot listen on 127.0.0.1:{port}", "Address already in use")
