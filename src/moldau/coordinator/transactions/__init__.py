"""The transaction coordinator (KIP-98): pure rules and the ``__transaction_state`` codec.

:mod:`.coordinator` decides, :mod:`.records` encodes, :mod:`.state` holds the states; the
I/O lives in ``broker/transaction_service.py``.
"""

from .coordinator import Decision, Marker, TransactionCoordinator, TxnConfig
from .state import TopicPartition, TransactionMetadata, TxnSnapshot, TxnState

__all__ = ["Decision", "Marker", "TopicPartition", "TransactionCoordinator",
           "TransactionMetadata", "TxnConfig", "TxnSnapshot", "TxnState"]
