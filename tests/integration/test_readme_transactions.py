"""The README's "Transactions" examples, run in order against a fresh broker.

Shell lines run with bash, Python blocks with this interpreter, each must exit 0; then what
they printed must be what the README says: three invoices, read_committed sees the three
committed orders and not the aborted one, read_uncommitted sees all four.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import BrokerProcess, moldau_executable

README = Path(__file__).resolve().parents[2] / "README.md"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def transaction_blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of the section's ```sh and ```python blocks, in order."""
    text = README.read_text()
    section = text.split("\n## Transactions (exactly once)\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(sh|python)\n(.*?)```", section, flags=re.S)


def test_the_section_has_a_producer_a_consumer_and_commands() -> None:
    blocks = transaction_blocks()
    code = "\n".join(c for _, c in blocks)
    assert [lang for lang, _ in blocks].count("python") == 2
    for needle in ("transactional.id", "init_transactions", "commit_transaction",
                   "abort_transaction", "read_committed", "send_offsets_to_transaction"):
        assert needle in code, needle


def test_readme_transaction_examples_run(make_broker: Any, kcat: str, tmp_path: Path) -> None:
    broker: BrokerProcess = make_broker()
    bin_dir = str(Path(moldau_executable()).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["MOLDAU_BOOTSTRAP_SERVER"] = broker.bootstrap  # the CLI's default address is 9092's
    env.pop("MOLDAU_CLIENT_LOG", None)
    outputs: dict[str, str] = {}
    for lang, code in transaction_blocks():
        code = code.replace(DEFAULT_BOOTSTRAP, broker.bootstrap)
        if lang == "python":
            commands = [[sys.executable, "-c", code]]
        else:
            commands = [["bash", "-o", "pipefail", "-c", line] for line in code.splitlines()
                        if line.strip() and not line.strip().startswith("#")]
        for argv in commands:
            result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                                    timeout=90, stdin=subprocess.DEVNULL, check=False)
            assert result.returncode == 0, (
                f"README example failed (exit {result.returncode}):\n{argv[-1]}\n"
                f"stdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-2000:]}")
            outputs[argv[-1]] = result.stdout
    said = list(outputs.values())
    assert "3 invoices\n" in said
    kcat_reads = [out for cmd, out in outputs.items() if cmd.startswith("kcat ")]
    assert [sorted(out.splitlines()) for out in kcat_reads] == [
        [f"order-{i} invoice for order-{i}" for i in range(3)],
        [*(f"order-{i} paid" for i in range(3)), "order-3 never seen"]]
    listed = next(out for cmd, out in outputs.items() if cmd.startswith("moldau transaction list"))
    assert "billing-1" in listed and "orders-writer" in listed, listed
