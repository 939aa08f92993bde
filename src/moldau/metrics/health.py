"""Liveness and readiness of a broker, for ``/health/live`` and ``/health/ready``.

Live means the event loop answers: the check runs on it, so an answer at all is the proof.
Ready means the broker can serve what clients ask: its logs are loaded and not all offline,
the group and transaction coordinators finished loading their internal topics, and, in a
cluster, the broker is connected to ZooKeeper and registered there (``/brokers/ids/<id>`` as
the watch last saw it: after a lost session it is not, until the broker registers again).
While the broker starts (its logs loading, its coordinators replaying, its registration
waiting), the endpoint already answers: every check fails (:func:`starting_checks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..broker.broker import Broker
    from ..config import BrokerConfig


def readiness(broker: Broker) -> dict[str, bool]:
    """Each readiness check by name, True when it passes."""
    checks = {
        "logs_loaded": broker.fatal_error is None,
        "group_coordinator_loaded": not broker.groups.loading,
        "transaction_coordinator_loaded": not broker.transactions.loading,
    }
    if broker.cluster is not None:
        store = broker.cluster.store
        # Connected, or the view of the registrations below may be stale.
        checks["zookeeper_connected"] = bool(store.client.connected)
        checks["registered_in_cluster"] = broker.node_id in store.brokers()
    return checks


def starting_checks(config: BrokerConfig) -> dict[str, bool]:
    """The checks of a broker still starting: the same names as :func:`readiness`, all
    failing (start-up loads the logs, then the coordinators, then registers)."""
    checks = dict.fromkeys(("logs_loaded", "group_coordinator_loaded",
                            "transaction_coordinator_loaded"), False)
    if config.zookeeper_connect:
        checks["zookeeper_connected"] = False
        checks["registered_in_cluster"] = False
    return checks
