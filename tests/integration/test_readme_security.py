"""The README's "Securing a broker" commands, run in order from nothing: certificates, a
TLS + SCRAM broker with the authorizer on, a user, a topic, one ACL, and kcat reading the
topic as that user. Ports are swapped for free ones; the broker line runs in the background."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.helpers import moldau_executable
from tests.helpers.broker_process import free_port
from tests.integration.test_readme import README


def section_commands() -> list[str]:
    """The shell commands of the section (continuation lines joined), in order."""
    section = README.read_text().split("\n## Securing a broker\n", 1)[1].split("\n## ", 1)[0]
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        joined = block.replace("\\\n", " ")
        commands += [line.strip() for line in joined.splitlines()
                     if line.strip() and not line.strip().startswith("#")]
    return commands


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the README's broker exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the README's broker did not listen on {port}")


def test_securing_a_broker_from_nothing(tmp_path: Path, kcat: str) -> None:
    commands = section_commands()
    assert any(c.startswith("moldau acl add") for c in commands), commands
    plain, secure = free_port(), free_port()
    bin_dir = str(Path(moldau_executable()).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "MOLDAU_BOOTSTRAP_SERVER": f"127.0.0.1:{plain}"}
    if env.get("PYTHONPATH"):  # relative entries would not hold in the temporary directory
        env["PYTHONPATH"] = os.pathsep.join(str(Path(entry).resolve())
                                            for entry in env["PYTHONPATH"].split(os.pathsep))
    broker: subprocess.Popen[bytes] | None = None
    outputs: list[str] = []
    try:
        for command in commands:
            line = command.replace(":9092", f":{plain}").replace(":9094", f":{secure}")
            if command.startswith("moldau broker"):
                broker = subprocess.Popen(["bash", "-c", f"exec {line} 2>broker.log"],
                                          cwd=tmp_path, env=env, stdout=subprocess.DEVNULL)
                wait_for_port(secure, broker)
                continue
            result = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path,
                                    env=env, capture_output=True, text=True, timeout=60,
                                    stdin=subprocess.DEVNULL, check=False)
            assert result.returncode == 0, (
                f"README line failed (exit {result.returncode}): {command}\n"
                f"stdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-2000:]}")
            outputs.append(result.stdout)
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            broker.wait(timeout=30)
    assert broker is not None
    assert outputs[-1].split() == ["o1", "o2"], outputs[-1]
    assert "User:alice" in outputs[-2]
