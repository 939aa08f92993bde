"""The README's "REST Proxy" curl block, run as one script against a fresh broker and proxy.

The proxy is started as the README's ``moldau rest`` line says, on free ports; the block must
exit 0 (every curl has ``-f``: an HTTP error fails it) and print what the README promises:
the three records read back and no lag after the commit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import moldau_executable
from tests.helpers.rest_proxy import RestProxyProcess

README = Path(__file__).resolve().parents[3] / "README.md"


def rest_blocks() -> list[str]:
    section = README.read_text().split("\n## REST Proxy\n", 1)[1].split("\n## ", 1)[0]
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return blocks


def test_the_section_starts_the_proxy_then_uses_it_with_curl() -> None:
    start, script = rest_blocks()
    assert start.strip() == "moldau rest -b 127.0.0.1:9092 --listen 127.0.0.1:8082"
    for path in ("/v3/clusters", "/topics/", "/records", "/consumers/", "/lag-summary"):
        assert path in script, path


def test_readme_rest_block_runs(make_broker: Any, tmp_path: Path) -> None:
    broker = make_broker()
    proxy = RestProxyProcess(tmp_path, broker.bootstrap).start()
    try:
        _, script = rest_blocks()
        script = script.replace("127.0.0.1:8082", f"127.0.0.1:{proxy.port}").replace(
            "127.0.0.1:9092", broker.bootstrap)
        bin_dir = str(Path(moldau_executable()).parent)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=90,
                                stdin=subprocess.DEVNULL, check=False)
        assert result.returncode == 0, (
            f"README block failed (exit {result.returncode})\nstdout:\n{result.stdout}\n"
            f"stderr:\n{result.stderr}\nproxy log:\n{proxy.log_text()[-3000:]}")
        records = next(json.loads(line) for line in _json_lines(result.stdout)
                       if line.startswith("[{"))
        assert sorted(r["value"]["item"] for r in records) == ["book", "ink", "pen"]
        summary = json.loads(next(line for line in _json_lines(result.stdout)
                                  if "KafkaConsumerGroupLagSummary" in line))
        assert summary["total_lag"] == 0
    finally:
        proxy.stop()


def _json_lines(output: str) -> list[str]:
    """curl prints the bodies without newlines between them; split them at '}{' and ']{'."""
    return re.sub(r"([}\]])(?=[{\[])", r"\1\n", output).splitlines()
