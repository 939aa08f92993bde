"""Run the installed ``moldau`` console script as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: What :func:`run_moldau` returns: exit status and text output.
Result = subprocess.CompletedProcess[str]


def moldau_executable() -> str:
    """The ``moldau`` script next to this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).with_name("moldau")
    if beside.exists():
        return str(beside)
    found = shutil.which("moldau")
    if found is None:
        raise RuntimeError("the moldau console script is not installed: pip install -e .")
    return found


def run_moldau(
    *args: str,
    bootstrap: str | None = None,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> Result:
    """Run ``moldau ARGS`` and capture its output as text (never raises on exit status).

    ``bootstrap`` goes in ``MOLDAU_BOOTSTRAP_SERVER`` so tests also cover the env var;
    an explicit ``-b`` in ``args`` still wins. ``COLUMNS`` is only set when ``env`` sets it.
    """
    full_env = dict(os.environ)
    # A COLUMNS exported by the shell running pytest would change table layouts.
    full_env.pop("COLUMNS", None)
    full_env.update(env or {})
    full_env.pop("MOLDAU_CLIENT_LOG", None)
    if bootstrap is not None:
        full_env["MOLDAU_BOOTSTRAP_SERVER"] = bootstrap
    data = input.encode() if isinstance(input, str) else input
    result = subprocess.run(
        [moldau_executable(), *args],
        input=data if data is not None else b"",
        capture_output=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode(errors="replace"),
        result.stderr.decode(errors="replace"),
    )


def ok(result: Result) -> Result:
    """Assert the command succeeded, showing its output when it did not."""
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def one_line_error(result: Result, *fragments: str) -> str:
    """Assert the command failed with exactly one ``Error: ...`` line and no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
