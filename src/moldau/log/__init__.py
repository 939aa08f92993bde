"""moldau.log: Kafka's on-disk log (segments, indexes, recovery, retention) as a file library.

It knows nothing of sockets, clients or clusters; the broker drives it. Entry points:
:class:`LogManager` (all partitions of a broker) and :class:`PartitionLog` (one partition).
"""

from .config import LogConfig
from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from .file_slice import FileSlice
from .manager import LogManager
from .partition_log import AppendResult, PartitionLog

__all__ = [
    "AppendResult",
    "CorruptRecordError",
    "FileSlice",
    "InvalidRecordError",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordListTooLargeError",
    "RecordTooLargeError",
]
