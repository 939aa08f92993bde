"""A broker that cannot start says why in one line (exit status 1), never with a traceback."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import free_port, one_line_error, run_moldau
from tests.helpers.cli import Result

pytestmark = pytest.mark.timeout(90)


def start(data_dir: Path, *overrides: str, port: int | None = None,
          env: dict[str, str] | None = None) -> Result:
    """``moldau broker`` on ``data_dir``, expected to refuse (60 s bound if it does not)."""
    args = ["broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port or free_port()}",
            "--override", f"log.dirs={data_dir}"]
    for override in overrides:
        args += ["--override", override]
    return run_moldau(*args, env=env, timeout=60)


def test_another_node_id_on_existing_data(make_broker: Any) -> None:
    broker = make_broker()
    broker.stop()
    line = one_line_error(start(broker.data_dir, "node.id=3"), "belongs to node 0, not 3",
                          str(broker.data_dir))
    assert "meta.properties" in line


def test_log_level_in_any_case(make_broker: Any, tmp_path: Path) -> None:
    broker = make_broker(env={"MOLDAU_LOG_LEVEL": "debug"})
    assert broker.is_running()
    result = start(tmp_path / "data", env={"MOLDAU_LOG_LEVEL": "chatty"})
    one_line_error(result, "MOLDAU_LOG_LEVEL=chatty is not a log level", "DEBUG", "any case")
    assert not (tmp_path / "data").exists()


def test_port_in_use_names_the_listener(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = start(tmp_path / "data", port=port)
    one_line_error(result, f"cannot listen on PLAINTEXT://127.0.0.1:{port}",
                   "Address already in use")


def test_log_dir_that_is_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    one_line_error(start(afile), str(afile))
    one_line_error(start(afile / "below"), str(afile / "below"), "Not a directory")


def test_unreadable_metadata(make_broker: Any) -> None:
    broker = make_broker()
    broker.stop()
    metadata = broker.data_dir / "moldau-metadata.json"
    metadata.write_text('{"topics": [')
    one_line_error(start(broker.data_dir), str(metadata), "not a moldau metadata document")


def test_unknown_authorizer_class(tmp_path: Path) -> None:
    result = start(tmp_path / "data", "authorizer.class.name=com.example.MyAuthorizer")
    one_line_error(result, "authorizer.class.name", "com.example.MyAuthorizer",
                   "kafka.security.authorizer.AclAuthorizer")
