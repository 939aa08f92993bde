"""Errors raised by the storage layer.

They carry a human-readable message and nothing protocol-specific: the broker maps each class
to the Kafka error code a Kafka broker would send (CORRUPT_MESSAGE, INVALID_RECORD,
INVALID_TIMESTAMP, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, OFFSET_OUT_OF_RANGE). Keeping the
mapping out of this package keeps ``log`` free of any wire-protocol knowledge.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class of every error the storage layer raises on purpose."""


class CorruptRecordError(LogError):
    """The bytes are not a well-framed record batch: bad CRC, truncation, bad length, garbage."""


class InvalidRecordError(LogError):
    """A well-framed batch whose content breaks a rule (wrong magic, inconsistent counts).

    ``record_errors`` names the offending records when the rule is about single records
    (a keyless record on a compacted topic): (index within the batch, message) each, which
    the broker returns as the produce response's ``record_errors`` (KIP-467) so a client
    fails only those records. Empty when the whole batch is at fault.
    """

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(InvalidRecordError):
    """Some records' timestamps are too far from the broker's clock
    (``message.timestamp.before.max.ms`` / ``after.max.ms``, KIP-937): INVALID_TIMESTAMP."""


def record_errors_error(record_errors: tuple[tuple[int, str], ...],
                        timestamps: bool = False) -> InvalidRecordError:
    """The error for a batch refused for some of its records, with the message Kafka's
    broker gives: if any record's timestamp is at fault, INVALID_TIMESTAMP; otherwise
    INVALID_RECORD counting the records and showing the first three."""
    if timestamps:
        return InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", record_errors)
    shown = ", ".join(
        f"RecordError(batchIndex={index}, message='{message}')"
        for index, message in record_errors[:3]
    )
    return InvalidRecordError(
        f"One or more records have been rejected due to {len(record_errors)} record errors "
        f"in total, and only showing the first three errors at most: [{shown}]",
        record_errors,
    )


class RecordTooLargeError(LogError):
    """One batch is larger than ``max.message.bytes`` allows."""


class RecordListTooLargeError(RecordTooLargeError):
    """The whole append is larger than a segment can ever hold (``segment.bytes``).

    A subclass of :class:`RecordTooLargeError` so a caller that only knows the parent still
    rejects the request; Kafka answers RECORD_LIST_TOO_LARGE for it.
    """


class OffsetOutOfRangeError(LogError):
    """The requested offset lies outside ``[log_start_offset, log_end_offset]`` (or the HW)."""


class StorageError(LogError):
    """An I/O error on a log dir, Kafka's KafkaStorageException (KAFKA_STORAGE_ERROR).

    The operation that raised it left nothing half-done behind (a failed append is cut back).
    """


class DiskFullError(StorageError):
    """No space left (ENOSPC, or EDQUOT): the same write succeeds once space is freed."""


class LogDirOfflineError(StorageError):
    """The log dir failed (EIO, read-only, gone) and stays offline until the broker restarts."""


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's batch does not follow its last sequence number (or a new
    producer epoch does not start at 0): OUT_OF_ORDER_SEQUENCE_NUMBER."""


class InvalidProducerEpochError(LogError):
    """An idempotent producer's batch carries an epoch older than the partition has seen
    (a fenced instance of the producer): INVALID_PRODUCER_EPOCH."""


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator older than the one that last wrote a marker
    for this producer here (Kafka's TRANSACTION_COORDINATOR_FENCED)."""


class InvalidTxnStateError(LogError):
    """A producer with a transaction open on the partition sent a non-transactional batch
    (Kafka's INVALID_TXN_STATE)."""
