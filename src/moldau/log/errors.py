"""Errors raised by the storage layer.

They carry a human-readable message and nothing protocol-specific: the broker maps each class
to the Kafka error code a Kafka broker would send (CORRUPT_MESSAGE, INVALID_RECORD,
MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, OFFSET_OUT_OF_RANGE). Keeping the mapping out of
this package keeps ``log`` free of any wire-protocol knowledge.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class of every error the storage layer raises on purpose."""


class CorruptRecordError(LogError):
    """The bytes are not a well-framed record batch: bad CRC, truncation, bad length, garbage."""


class InvalidRecordError(LogError):
    """A well-framed batch whose content breaks a rule (wrong magic, inconsistent counts)."""


class RecordTooLargeError(LogError):
    """One batch is larger than ``max.message.bytes`` allows."""


class RecordListTooLargeError(RecordTooLargeError):
    """The whole append is larger than a segment can ever hold (``segment.bytes``).

    A subclass of :class:`RecordTooLargeError` so a caller that only knows the parent still
    rejects the request; Kafka answers RECORD_LIST_TOO_LARGE for it.
    """


class OffsetOutOfRangeError(LogError):
    """The requested offset lies outside ``[log_start_offset, log_end_offset]`` (or the HW)."""
