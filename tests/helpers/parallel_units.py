"""How `make test` splits the suite between its pytest-xdist workers.

The suite mostly waits (for brokers to start, leaders to move, timeouts to fire), so two
workers on a 2-core machine nearly halve its wall time. The unit of work is a whole test
file, never single tests: most files share an expensive module fixture (a broker, a
three-broker cluster), and splitting a file would build it once per worker. All Spark tests
form one unit, so only one worker starts a SparkSession (a JVM and ~10 s).

Everything a test starts is already private to its worker: brokers, ZooKeeper and HTTP
services bind ports the OS picks, data lives in each test's tmp_path, and network-namespace
labs are named after the worker's pid.
"""

from __future__ import annotations

from typing import Any

import pytest

# Folders whose files take longest start first (the rest keep collection order).
_START_ORDER = ("spark", "cluster", "faults", "fuzz", "integration")

_SHARED_UNITS = {"tests/spark/": "tests/spark"}


def start_rank(folder: str) -> int:
    """Sort key of a test folder: long-running folders first."""
    return _START_ORDER.index(folder) if folder in _START_ORDER else len(_START_ORDER)


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its file, or the shared unit of its folder."""
    path = nodeid.split("::", 1)[0]
    for prefix, unit in _SHARED_UNITS.items():
        if path.startswith(prefix):
            return unit
    return path


def scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scope scheduling with :func:`unit_of` as the scope.

    Imported here, not at the top, so that a plain `pytest` run needs no xdist.
    """
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    # Units go out in the (already sorted) collection order, not xdist's largest-first.
    config.option.loadscopereorder = False
    return FileUnits(config, log)
