"""ACLs in ZooKeeper as Kafka 3.9 keeps them, and the watch that applies changes everywhere.

- literal ACLs: ``/kafka-acl/<ResourceType>/<name>``; prefixed ACLs:
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``; each znode holds
  ``{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}``;
- after every change, a sequential notification: ``/kafka-acl-changes/acl_changes_<n>`` with
  ``Topic:orders`` for a literal resource, ``/kafka-acl-extended-changes/acl_changes_<n>``
  with ``{"version":1,"resourceType":"Topic","name":"orders","patternType":"Prefixed"}``.

Every broker watches both notification paths (a kazoo children watch, so a change reaches
it in one ZooKeeper round trip) and re-reads only the resources named by notifications it
has not seen. Writes are versioned read-modify-writes, retried when another broker wrote the
same znode in between.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..security.acls import (
    RESOURCE_TYPE_BY_NAME,
    RESOURCE_TYPE_NAMES,
    AclBinding,
    PatternType,
    ResourceType,
)
from .zk_session import watch_callback

log = logging.getLogger(__name__)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
PATHS = (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES)

Resource = tuple[ResourceType, str, PatternType]
#: Told of one resource's new ACLs (all of them; empty when the znode is gone).
OnResourceChange = Callable[[ResourceType, str, PatternType, list[AclBinding]], None]


def resource_path(resource_type: ResourceType, name: str, pattern: PatternType) -> str:
    root = PREFIXED_ROOT if pattern is PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{RESOURCE_TYPE_NAMES[resource_type]}/{name}"


def encode_acls(acls: list[AclBinding]) -> bytes:
    return json.dumps({"version": 1, "acls": [acl.entry_json() for acl in acls]},
                      separators=(",", ":")).encode()


def decode_acls(resource: Resource, data: bytes) -> list[AclBinding]:
    doc = json.loads(data) if data else {}
    return [AclBinding.from_entry_json(*resource, entry) for entry in doc.get("acls", [])]


def encode_change(resource: Resource) -> tuple[str, bytes]:
    """The notification path and data for a changed resource."""
    resource_type, name, pattern = resource
    type_name = RESOURCE_TYPE_NAMES[resource_type]
    if pattern is PatternType.LITERAL:
        return LITERAL_CHANGES, f"{type_name}:{name}".encode()
    return EXTENDED_CHANGES, json.dumps({"version": 1, "resourceType": type_name,
                                         "name": name, "patternType": "Prefixed"},
                                        separators=(",", ":")).encode()


def decode_change(root: str, data: bytes) -> Resource:
    if root == LITERAL_CHANGES:
        type_name, _, name = data.decode().partition(":")
        return RESOURCE_TYPE_BY_NAME[type_name], name, PatternType.LITERAL
    doc = json.loads(data)
    return (RESOURCE_TYPE_BY_NAME[doc["resourceType"]], doc["name"],
            PatternType[doc["patternType"].upper()])


class ZkAclStore:
    """Reads, writes and watches the ACL znodes of one cluster."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self._seen: dict[str, set[str]] = {LITERAL_CHANGES: set(), EXTENDED_CHANGES: set()}
        self._lock = threading.Lock()

    def ensure_paths(self) -> None:
        for path in PATHS:
            self.client.ensure_path(path)

    def read(self, resource: Resource) -> list[AclBinding]:
        try:
            data, _ = self.client.get(resource_path(*resource))
        except NoNodeError:
            return []
        return decode_acls(resource, data)

    def load_all(self) -> list[AclBinding]:
        found: list[AclBinding] = []
        for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL),
                              (PREFIXED_ROOT, PatternType.PREFIXED)):
            for type_name in self._children(root):
                resource_type = RESOURCE_TYPE_BY_NAME.get(type_name)
                if resource_type is None:
                    continue
                for name in self._children(f"{root}/{type_name}"):
                    found += self.read((resource_type, name, pattern))
        return found

    def _children(self, path: str) -> list[str]:
        try:
            return list(self.client.get_children(path))
        except NoNodeError:
            return []

    def change(self, added: list[AclBinding], removed: list[AclBinding]) -> None:
        """Apply creations and deletions, resource by resource, then notify every broker."""
        by_resource: dict[Resource, tuple[list[AclBinding], list[AclBinding]]] = \
            defaultdict(lambda: ([], []))
        for acl in added:
            by_resource[(acl.resource_type, acl.resource_name, acl.pattern_type)][0].append(acl)
        for acl in removed:
            by_resource[(acl.resource_type, acl.resource_name, acl.pattern_type)][1].append(acl)
        for resource, (plus, minus) in by_resource.items():
            self._update(resource, plus, set(minus))
            root, data = encode_change(resource)
            self.client.create(f"{root}/{CHANGE_PREFIX}", data, sequence=True)

    def _update(self, resource: Resource, plus: list[AclBinding],
                minus: set[AclBinding]) -> None:
        path = resource_path(*resource)
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                acls = list(dict.fromkeys(plus))
                if not acls:
                    return
                try:
                    self.client.create(path, encode_acls(acls), makepath=True)
                    return
                except NodeExistsError:
                    continue
            current = decode_acls(resource, data)
            acls = [acl for acl in current if acl not in minus]
            acls += [acl for acl in dict.fromkeys(plus) if acl not in acls]
            try:
                if acls:
                    self.client.set(path, encode_acls(acls), version=stat.version)
                else:
                    self.client.delete(path, version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue

    def watch(self, on_change: OnResourceChange) -> None:
        """Call ``on_change`` for every resource a notification names from now on."""
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._seen[root] = set(self._children(root))
            self.client.ChildrenWatch(root, self._watcher(root, on_change))

    def _watcher(self, root: str, on_change: OnResourceChange) -> Callable[[list[str]], bool]:
        @watch_callback(f"ACL change notifications {root}")
        def changed(children: list[str]) -> bool:
            with self._lock:
                new = sorted(set(children) - self._seen[root])
                self._seen[root] = set(children)
            for child in new:
                try:
                    data, _ = self.client.get(f"{root}/{child}")
                except NoNodeError:
                    continue
                try:
                    resource = decode_change(root, data)
                except (ValueError, KeyError):
                    log.warning("ignoring unreadable ACL change notification %s/%s", root, child)
                    continue
                on_change(*resource, self.read(resource))
            return True
        return changed
