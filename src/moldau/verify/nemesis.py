"""The seam where faults are injected into a verify run.

The workload calls a :class:`Nemesis` at three points and records what it says it did (with
the time, in the history, so the report shows which faults the run went through):

- ``strike`` every ``interval_s`` seconds while the producers run (from a thread of its own);
- ``heal`` once when the producers have stopped: every fault still active must be undone,
  because the read phase needs the cluster whole;
- ``before_read`` once between the produce and the read phase, with every acknowledgement
  in ``ctx.history``.

The default does nothing. ``delete-records`` works against any cluster and exists to show the
checker can fail: it really deletes acknowledged records (DeleteRecords, through the admin
client) before they are read, and the run must report them lost. ``kill`` kill -9s and
restarts a broker process that ``moldau verify --local-broker`` started itself (a cluster
started by the tool is the only one whose processes it may kill). The faults of a cluster the
tool started itself (``--local-cluster``) are in ``cluster_nemesis.py``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from .history import History, NemesisEvent


@dataclass
class NemesisContext:
    """What a nemesis may use: the topic, client settings to reach the cluster, the history."""

    topic: str
    client_config: dict[str, Any]
    history: History
    timeout_s: float
    #: ``time.monotonic()`` when the timed produce phase began (event times count from it).
    began: float = 0.0

    def note(self, description: str) -> None:
        """Record one step of a fault now (a hook's return value is recorded the same way)."""
        self.history.nemesis_events.append(
            NemesisEvent(time.monotonic() - self.began, description))


class Nemesis:
    """No faults at all (the default); subclasses override the hooks they need."""

    name = "none"
    #: Seconds between strikes while producers run; None: ``strike`` is never called.
    interval_s: float | None = None

    def strike(self, ctx: NemesisContext) -> str | None:
        """Inject a fault (and possibly heal the previous one); say what was done."""
        return None

    def heal(self, ctx: NemesisContext) -> str | None:
        """Undo every fault still active: the read phase follows."""
        return None

    def before_read(self, ctx: NemesisContext) -> str | None:
        """Between the phases: every acknowledgement is known, nothing has been read yet."""
        return None


class DeleteRecordsNemesis(Nemesis):
    """Deletes the older half of the acknowledged records of every partition (DeleteRecords).

    The cluster does what it is asked, so this is no bug of the cluster: it is how a user
    (and our tests) see that the checker reports loss when records are really gone.
    """

    name = "delete-records"

    def before_read(self, ctx: NemesisContext) -> str | None:
        offsets: dict[int, list[int]] = defaultdict(list)
        for ack in ctx.history.acks:
            if ack.offset is not None:  # an implicit ack names no offset
                offsets[ack.partition].append(ack.offset)
        cuts = []
        for partition, acked in sorted(offsets.items()):
            acked.sort()
            cuts.append(TopicPartition(ctx.topic, partition, acked[len(acked) // 2]))
        if not cuts:
            return None
        admin = AdminClient(ctx.client_config)
        futures = admin.delete_records(
            cuts, request_timeout=ctx.timeout_s, operation_timeout=ctx.timeout_s)
        for future in futures.values():
            future.result(timeout=ctx.timeout_s + 5)
        shown = ", ".join(f"partition {tp.partition} below {tp.offset}" for tp in cuts)
        return f"deleted records: {shown}"


class Restartable(Protocol):
    """A broker process the tool owns: what :class:`KillNemesis` needs of it."""

    def kill(self) -> None: ...
    def start(self) -> None: ...
    def is_running(self) -> bool: ...


class KillNemesis(Nemesis):
    """kill -9 a broker the tool started, then start it again on the next strike (or heal)."""

    name = "kill"

    def __init__(self, broker: Restartable, interval_s: float = 3.0) -> None:
        self.broker = broker
        self.interval_s = interval_s

    def strike(self, ctx: NemesisContext) -> str | None:
        if self.broker.is_running():
            self.broker.kill()
            return "kill -9 the broker"
        self.broker.start()
        return "restarted the broker"

    def heal(self, ctx: NemesisContext) -> str | None:
        if self.broker.is_running():
            return None
        self.broker.start()
        return "restarted the broker"
