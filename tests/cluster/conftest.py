"""Fixtures of the ZooKeeper metadata tests (the server itself is tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .helpers import Stores


@pytest.fixture
def stores(zk_connect: str) -> Iterator[Stores]:
    opened = Stores(zk_connect)
    yield opened
    opened.close_all()
