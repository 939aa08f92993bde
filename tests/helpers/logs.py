"""Log lines a test caught with ``caplog``, from one logger only.

caplog's handler sits on the root logger, so it also catches what other libraries log from
threads that earlier tests in the same process left running (kafka-python's metadata retries
did, once, in CI). A test that counts lines counts only its own logger's.
"""

from __future__ import annotations

import pytest


def lines_of(caplog: pytest.LogCaptureFixture, logger: str, level: int | None = None
             ) -> list[str]:
    """The messages ``logger`` logged (at ``level`` exactly, if given), in order."""
    return [r.getMessage() for r in caplog.records
            if r.name == logger and (level is None or r.levelno == level)]
