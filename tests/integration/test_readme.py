"""The README's "Using it" commands, run in order against a fresh broker, each exit 0.

A newcomer copies these lines one by one; if one fails (a topic the broker already
auto-created, a group with nothing to reset), the README is wrong. The broker runs with
Kafka's defaults where the test fixtures usually shorten them (a 3 s initial rebalance
delay), as on a fresh machine.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import BrokerProcess, moldau_executable

README = Path(__file__).resolve().parents[2] / "README.md"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_DATA = "./data"  # `make run`'s data directory

# Lines of the section that this test does not run, by their first word, and why.
SKIPPED = {
    "make": "builds the virtualenv and starts a broker; the test runs from both already",
    "pip": "installs packages; the test environment has them",
}
# Marks of a line that is a pattern to fill in rather than a command to run.
PLACEHOLDER = re.compile(r"\[[^\]]*\]|<[A-Za-z_]+>|\.\.\.|\bHOST:PORT\b")


def using_it_commands() -> list[str]:
    """The shell lines of the README's "Using it" section, in order."""
    text = README.read_text()
    section = text.split("\n## Using it\n", 1)[1].split("\n## ", 1)[0]
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                lines.append(stripped)
    return lines


def test_the_section_has_commands_and_no_placeholders() -> None:
    commands = using_it_commands()
    assert sum("moldau " in c for c in commands) >= 20, commands
    assert any(c.startswith("kcat ") or "| kcat " in c for c in commands), commands
    for command in commands:
        code = command.split(" #", 1)[0]
        assert command.split()[0] in SKIPPED or not PLACEHOLDER.search(code), (
            f"the README line {command!r} cannot be run as written; make it a runnable "
            "example (or list why it is skipped in SKIPPED)"
        )


def test_readme_commands_run_in_order_on_a_fresh_broker(
        make_broker: Any, kcat: str, tmp_path: Path) -> None:
    broker: BrokerProcess = make_broker(
        "group.initial.rebalance.delay.ms=3000", "log.retention.check.interval.ms=300000"
    )
    bin_dir = str(Path(moldau_executable()).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["MOLDAU_BOOTSTRAP_SERVER"] = broker.bootstrap
    for name in ("COLUMNS", "MOLDAU_CLIENT_LOG"):
        env.pop(name, None)
    ran = 0
    for command in using_it_commands():
        if command.split()[0] in SKIPPED:
            continue
        line = command.replace(DEFAULT_BOOTSTRAP, broker.bootstrap).replace(
            DEFAULT_DATA, str(broker.data_dir))
        result = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=90,
                                stdin=subprocess.DEVNULL, check=False)
        assert result.returncode == 0, (
            f"README line failed (exit {result.returncode}): {command}\n"
            f"stdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-2000:]}"
        )
        ran += 1
    assert ran >= 20
