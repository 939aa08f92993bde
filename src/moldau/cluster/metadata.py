"""What every metadata store (one node: a local file; clusters: ZooKeeper) must offer.

The broker asks the store which topics exist, how many partitions each has, their configs
overrides and their topic ids; it tells the store about creations, deletions and changes. The
store is the source of truth; partition logs on disk follow it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

from ..config.client_quotas import QuotaEntity
from ..security.acls import AclBinding


@dataclass(slots=True)
class TopicMetadata:
    """One topic as the metadata store knows it."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class MetadataStore(Protocol):
    cluster_id: str

    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def create_topic(self, topic: TopicMetadata) -> None: ...

    def delete_topic(self, name: str) -> None: ...

    def set_partitions(self, name: str, partitions: int) -> None: ...

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None: ...

    def broker_configs(self) -> dict[str, str]: ...

    def set_broker_configs(self, configs: dict[str, str]) -> None: ...

    def next_producer_id(self) -> int: ...

    def user_configs(self, user: str) -> dict[str, str]:
        """A user's SCRAM credentials by mechanism (Kafka's /config/users/<user> format)."""
        ...

    def set_user_configs(self, user: str, configs: dict[str, str]) -> None: ...

    def users(self) -> list[str]:
        """Every user with SCRAM credentials."""
        ...

    def acls(self) -> list[AclBinding]:
        """Every ACL of the authorizer."""
        ...

    def change_acls(self, added: list[AclBinding], removed: list[AclBinding]) -> None:
        """Persist ACL creations and deletions (the authorizer applies them once stored)."""
        ...

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every client quota entity with its quota values (see ``config.client_quotas``)."""
        ...

    def set_client_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        """Replace an entity's quota values (empty: it has none left)."""
        ...
