"""Ending a Kafka transaction from a process that did not open it (the Spark driver).

A transaction is ended by EndTxn naming its transactional id, producer id and epoch; the
coordinator checks those three and nothing about the connection. Spark's executor tasks
write in a transaction and hand the three back in their commit message; the driver sends
EndTxn (commit or abort) itself, since librdkafka cannot resume another process's
transaction. FindCoordinator (transaction key) names the broker to ask. Requests go through
``moldau.cli.raw_requests`` (kio's codec on a short-lived socket).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kio.schema.end_txn.v4.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import i8, i16

from ..cli.raw_requests import request as raw_request

TRANSACTION_KEY = i8(1)
REQUEST_TIMEOUT_S = 30.0
# Errors after which asking again (after a metadata refresh) can succeed.
_RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
              ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions}


class TransactionEndError(RuntimeError):
    """The coordinator refused to end a transaction (fenced, unknown, wrong state)."""


def _address(server: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) of one ``bootstrap.servers`` entry."""
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]"), int(port)


def _coordinator(bootstraps: Sequence[tuple[str, int]], transactional_id: str
                 ) -> tuple[str, int]:
    req = FindCoordinatorRequest(key_type=TRANSACTION_KEY, coordinator_keys=(transactional_id,))
    last: Exception | None = None
    for address in bootstraps:
        try:
            response = raw_request(address, req, REQUEST_TIMEOUT_S)
        except OSError as exc:
            last = exc
            continue
        (coordinator,) = response.coordinators
        if coordinator.error_code is not ErrorCode.none:
            raise _Retry(coordinator.error_code)
        return str(coordinator.host), int(coordinator.port)
    raise OSError(f"no bootstrap broker answered FindCoordinator: {last}")


class _Retry(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def end_transaction(bootstrap_servers: str, transactional_id: str, producer_id: int,
                    producer_epoch: int, commit: bool, deadline_s: float = 60.0) -> None:
    """Commit (or abort) the open transaction of ``transactional_id`` at that producer id and
    epoch. Returns once the coordinator has decided (markers are written asynchronously, as
    for any EndTxn). Raises :class:`TransactionEndError` when refused: a fenced epoch (a newer
    producer of the id exists) means the transaction was already aborted."""
    bootstraps = [_address(b) for b in bootstrap_servers.split(",") if b.strip()]
    req = EndTxnRequest(transactional_id=TransactionalId(transactional_id),
                        producer_id=ProducerId(producer_id),
                        producer_epoch=i16(producer_epoch), committed=commit)
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            coordinator = _coordinator(bootstraps, transactional_id)
            code = raw_request(coordinator, req, REQUEST_TIMEOUT_S).error_code
            if code in _RETRIABLE:
                raise _Retry(code)
        except (OSError, _Retry) as exc:
            if time.monotonic() > deadline:
                raise TransactionEndError(f"cannot end transaction {transactional_id!r}: "
                                          f"{exc}") from exc
            time.sleep(0.2)
            continue
        if code is ErrorCode.none:
            return
        raise TransactionEndError(
            f"{'commit' if commit else 'abort'} of transaction {transactional_id!r} "
            f"(producer {producer_id}, epoch {producer_epoch}) refused: {code.name}")
