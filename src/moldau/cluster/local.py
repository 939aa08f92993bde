"""Single-node metadata: a JSON document in the first log directory, replaced atomically.

One broker alone needs no ZooKeeper. Topic definitions (name, id, partition count, config
overrides), dynamic broker configs and the producer-id high-water mark live in
``<log.dir>/moldau-metadata.json``. Every change rewrites the file through a temporary file, an
fsync and a rename, so a crash leaves either the old or the new document, never a torn one.
Metadata changes are rare (admin operations), so the cost of a full rewrite does not matter.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.client_quotas import QuotaEntity, entity_path, parse_entity_path
from ..security.acls import AclBinding
from .metadata import TopicMetadata

METADATA_FILE = "moldau-metadata.json"
# Producer ids are handed out in blocks persisted ahead of use, so a restart never reuses one.
PRODUCER_ID_BLOCK = 1000


def new_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class MetadataStoreError(Exception):
    """The metadata file exists but cannot be read: the broker must not start on a guess."""


class LocalMetadataStore:
    """Metadata of a single-node cluster, persisted in one JSON file."""

    def __init__(self, directory: Path, cluster_id: str | None = None, *,
                 on_io_error: Callable[[OSError], Exception] | None = None,
                 on_io_ok: Callable[[], None] | None = None) -> None:
        """Load (or create) the store in ``directory``.

        ``on_io_error`` turns an OSError of a write into the exception to raise instead (the
        broker's storage error, which also logs it once); without it the OSError propagates.
        ``on_io_ok`` is told of every successful write (to end a disk-full event).
        """
        self._path = directory / METADATA_FILE
        self._on_io_error = on_io_error
        self._on_io_ok = on_io_ok
        directory.mkdir(parents=True, exist_ok=True)
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._broker_configs: dict[str, str] = {}
        #: Salted SCRAM credentials by user and mechanism (never passwords).
        self._users: dict[str, dict[str, str]] = {}
        #: The authorizer's ACLs (Kafka's ZooKeeper JSON fields, one object per binding).
        self._acls: list[AclBinding] = []
        #: Client quotas by Kafka entity path (``users/alice/clients/app``).
        self._quotas: dict[str, dict[str, float]] = {}
        self._producer_id_limit = 0
        self._next_producer_id = 0
        self.cluster_id = cluster_id or new_cluster_id()
        if self._path.exists():
            self._load()
        else:
            self._save()

    def _load(self) -> None:
        try:
            self._parse(json.loads(self._path.read_text()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MetadataStoreError(
                f"{self._path}: not a moldau metadata document ({type(exc).__name__}: {exc})"
            ) from exc

    def _parse(self, doc: Any) -> None:
        self.cluster_id = doc.get("cluster_id", self.cluster_id)
        for raw in doc.get("topics", []):
            topic = TopicMetadata(
                name=raw["name"],
                topic_id=uuid.UUID(raw["topic_id"]),
                partitions=int(raw["partitions"]),
                configs=dict(raw.get("configs", {})),
            )
            self._topics[topic.name] = topic
            self._by_id[topic.topic_id] = topic
        self._broker_configs = dict(doc.get("broker_configs", {}))
        self._users = {str(u): dict(c) for u, c in doc.get("users", {}).items()}
        self._acls = [AclBinding.from_json(raw) for raw in doc.get("acls", [])]
        self._quotas = {str(p): {str(k): float(v) for k, v in c.items()}
                        for p, c in doc.get("client_quotas", {}).items()
                        if parse_entity_path(str(p)) is not None}
        # Everything below the persisted limit may have been handed out before the restart.
        self._producer_id_limit = int(doc.get("producer_id_limit", 0))
        self._next_producer_id = self._producer_id_limit

    def _save(
        self,
        topics: dict[str, TopicMetadata] | None = None,
        broker_configs: dict[str, str] | None = None,
        producer_id_limit: int | None = None,
        users: dict[str, dict[str, str]] | None = None,
        acls: list[AclBinding] | None = None,
        quotas: dict[str, dict[str, float]] | None = None,
    ) -> None:
        """Persist the document with the given parts replaced, before memory changes.

        Callers change their in-memory state only once this returned, so a failed write
        (a full disk) leaves the store exactly as it was: nothing is half-created.
        """
        topics = self._topics if topics is None else topics
        doc: dict[str, Any] = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": t.partitions,
                    "configs": t.configs,
                }
                for t in topics.values()
            ],
            "broker_configs": self._broker_configs if broker_configs is None else broker_configs,
            "producer_id_limit": (self._producer_id_limit if producer_id_limit is None
                                  else producer_id_limit),
            "users": self._users if users is None else users,
            "acls": [acl.to_json() for acl in (self._acls if acls is None else acls)],
            "client_quotas": self._quotas if quotas is None else quotas,
        }
        tmp = self._path.with_suffix(".tmp")
        try:
            with open(tmp, "w") as fh:
                json.dump(doc, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._path)
            dir_fd = os.open(self._path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            if self._on_io_error is None:
                raise
            raise self._on_io_error(exc) from None
        if self._on_io_ok is not None:
            self._on_io_ok()

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def create_topic(self, topic: TopicMetadata) -> None:
        self._save(topics={**self._topics, topic.name: topic})
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def delete_topic(self, name: str) -> None:
        if name not in self._topics:
            return
        self._save(topics={k: v for k, v in self._topics.items() if k != name})
        topic = self._topics.pop(name)
        self._by_id.pop(topic.topic_id, None)

    def set_partitions(self, name: str, partitions: int) -> None:
        self._replace_topic(name, dataclasses.replace(self._topics[name], partitions=partitions))

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._replace_topic(name, dataclasses.replace(self._topics[name], configs=dict(configs)))

    def _replace_topic(self, name: str, changed: TopicMetadata) -> None:
        """Persist ``changed``, then update the existing object in place (others hold it)."""
        self._save(topics={**self._topics, name: changed})
        topic = self._topics[name]
        topic.partitions, topic.configs = changed.partitions, changed.configs

    def broker_configs(self) -> dict[str, str]:
        return dict(self._broker_configs)

    def set_broker_configs(self, configs: dict[str, str]) -> None:
        self._save(broker_configs=dict(configs))
        self._broker_configs = dict(configs)

    def user_configs(self, user: str) -> dict[str, str]:
        return dict(self._users.get(user, {}))

    def set_user_configs(self, user: str, configs: dict[str, str]) -> None:
        users = {u: c for u, c in self._users.items() if u != user}
        if configs:
            users[user] = dict(configs)
        self._save(users=users)
        self._users = users

    def users(self) -> list[str]:
        return sorted(self._users)

    def acls(self) -> list[AclBinding]:
        return list(self._acls)

    def change_acls(self, added: list[AclBinding], removed: list[AclBinding]) -> None:
        """Add and remove ACLs in one write (Kafka keeps each binding once)."""
        gone = set(removed)
        acls = [acl for acl in self._acls if acl not in gone]
        present = set(acls)
        acls += [acl for acl in dict.fromkeys(added) if acl not in present]
        self._save(acls=acls)
        self._acls = acls

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        found = {}
        for path, values in self._quotas.items():
            parsed = parse_entity_path(path)
            if parsed is not None and values:
                found[parsed] = dict(values)
        return found

    def set_client_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        path = entity_path(entity)
        quotas = {p: v for p, v in self._quotas.items() if p != path}
        if values:
            quotas[path] = dict(values)
        self._save(quotas=quotas)
        self._quotas = quotas

    def next_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_limit:
            limit = self._next_producer_id + PRODUCER_ID_BLOCK
            self._save(producer_id_limit=limit)
            self._producer_id_limit = limit
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid
