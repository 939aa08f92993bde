"""What a verify run sent, what the cluster acknowledged, and what consumers read back.

A history is plain data: the workload fills it in, the checker reads it. Every value the
producers send is unique and names its origin (run id, producer, sequence number), so any
record read back can be traced to the send that produced it, or shown to come from nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

#: (producer number, sequence number within that producer): the identity of one sent value.
ValueId = tuple[int, int]

_MAGIC = b"mv1"


def encode_value(run_id: str, producer: int, seq: int, size: int = 0) -> bytes:
    """The value for one send: ``mv1:<run>:<producer>:<seq>:`` padded with dots to ``size``."""
    head = b"%s:%s:%d:%d:" % (_MAGIC, run_id.encode(), producer, seq)
    return head + b"." * max(0, size - len(head))


def decode_value(value: bytes | None) -> tuple[str, int, int] | None:
    """``(run_id, producer, seq)`` of a value written by :func:`encode_value`, else None."""
    if value is None:
        return None
    parts = value.split(b":", 4)
    if len(parts) != 5 or parts[0] != _MAGIC or not parts[2].isdigit() or not parts[3].isdigit():
        return None
    try:
        run_id = parts[1].decode("ascii")
    except UnicodeDecodeError:
        return None
    return run_id, int(parts[2]), int(parts[3])


class Ack(NamedTuple):
    """A delivery report without error: the cluster says ``value`` is at partition/offset.

    ``offset`` is None when the client confirmed the delivery without an offset. librdkafka
    does that for an idempotent producer's "implicit acks": a request whose outcome was
    uncertain (timed out, connection lost) is taken as written once a later request of the
    same partition succeeds, since a broker that checks sequence numbers refuses a batch
    after a gap. The value must then be read somewhere; where is not known.
    """

    value: ValueId
    partition: int
    offset: int | None
    #: From the send to the delivery report; negative for the warm-up send (not measured).
    latency_s: float


class Failure(NamedTuple):
    """A send that was not acknowledged: it may or may not be in the log (indeterminate)."""

    value: ValueId
    error: str


class Read(NamedTuple):
    """One record as one consumer read it (raw value: foreign values are kept as they are)."""

    consumer: int
    partition: int
    offset: int
    value: bytes | None


class Txn(NamedTuple):
    """One transaction of a transactional run: the values ``(producer, first_seq..last_seq)``.

    A transactional producer sends its values in order and each transaction holds a run of
    them, so a range names them all. ``outcome`` is what the producer learnt: COMMITTED
    (``commit_transaction`` returned), ABORTED (``abort_transaction`` returned, whether the
    abort was chosen or followed a failed commit) or IN_DOUBT (neither could be confirmed:
    the transaction may have been committed or aborted; reading its values is no anomaly).
    """

    producer: int
    number: int
    first_seq: int
    last_seq: int
    outcome: str
    #: Why it ended so when not as planned (the error of the failed commit or abort), else "".
    detail: str = ""
    #: True when the workload chose to abort it (the fraction ``--abort-fraction``).
    chose_abort: bool = False

    @property
    def size(self) -> int:
        return self.last_seq - self.first_seq + 1


COMMITTED = "committed"
ABORTED = "aborted"
IN_DOUBT = "in-doubt"


class NemesisEvent(NamedTuple):
    """A fault the nemesis injected (or healed), ``at_s`` seconds after the workload began."""

    at_s: float
    description: str


@dataclass
class History:
    """Everything one run observed. Lists are filled by worker threads and merged after."""

    run_id: str
    topic: str
    partitions: int
    #: Where consumers start: each partition's end offset before the first send.
    start_offsets: dict[int, int] = field(default_factory=dict)
    #: Values handed to the producer client (whether or not they were acknowledged).
    sent: set[ValueId] = field(default_factory=set)
    acks: list[Ack] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    #: Consumer errors other than reaching the end of a partition (counted, not anomalies).
    read_errors: list[str] = field(default_factory=list)
    nemesis_events: list[NemesisEvent] = field(default_factory=list)
    produce_seconds: float = 0.0
    read_seconds: float = 0.0
    #: True when every consumer reached the end of every partition at or past its acked end.
    read_complete: bool = True
    #: A transactional run (``--transactional``): every sent value belongs to one of
    #: ``transactions``, and the checker judges reads by their transaction's outcome.
    transactional: bool = False
    transactions: list[Txn] = field(default_factory=list)
