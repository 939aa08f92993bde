"""``moldau acl add|remove|list``: the authorizer's ACLs, with ``kafka-acls.sh``'s flags,
through confluent-kafka's AdminClient (CreateAcls / DeleteAcls / DescribeAcls).

As in kafka-acls: ``--allow-principal``/``--deny-principal`` with ``--allow-host``/
``--deny-host`` (default ``*``), ``--operation`` (repeatable, Kafka's names in any case),
resources ``--topic``, ``--group``, ``--transactional-id`` (repeatable) and ``--cluster``,
``--resource-pattern-type`` (literal or prefixed to add; also match or any to list and
remove), and the ``--producer`` / ``--consumer`` conveniences. ``remove`` without
principals or operations removes every ACL of the named resources, as kafka-acls does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import click
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from .admin_client import secured_admin_options
from .connection import Connection
from .errors import CliError

CLUSTER_NAME = "kafka-cluster"
_OPERATIONS = {op.name.replace("_", "").lower(): op for op in AclOperation
               if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}
#: What each resource type supports (Kafka's AclEntry.supportedOperations), ALL aside.
_SUPPORTED = {
    ResourceType.TOPIC: {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS},
    ResourceType.GROUP: {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE},
    ResourceType.BROKER: {AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                          AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                          AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                          AclOperation.DESCRIBE},
    ResourceType.TRANSACTIONAL_ID: {AclOperation.DESCRIBE, AclOperation.WRITE},
}
_TYPE_NAMES = {ResourceType.TOPIC: "TOPIC", ResourceType.GROUP: "GROUP",
               ResourceType.BROKER: "CLUSTER", ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID"}
_PATTERNS = {p.name.lower(): p for p in (ResourcePatternType.LITERAL,
                                         ResourcePatternType.PREFIXED,
                                         ResourcePatternType.MATCH, ResourcePatternType.ANY)}

Resource = tuple[ResourceType, str]


def _operation(name: str) -> AclOperation:
    found = _OPERATIONS.get(name.replace("_", "").replace("-", "").lower())
    if found is None:
        raise CliError(f"invalid --operation {name!r}; one of: Read, Write, Create, Delete, "
                       "Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
                       "IdempotentWrite, All")
    return found


def _resources(topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
               transactional_ids: tuple[str, ...]) -> list[Resource]:
    found = ([(ResourceType.TOPIC, t) for t in topics]
             + [(ResourceType.GROUP, g) for g in groups]
             + [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_ids])
    if cluster:
        found.append((ResourceType.BROKER, CLUSTER_NAME))
    return found


def _resource_options(command: Any) -> Any:
    for option in reversed((
        click.option("--topic", "topics", multiple=True, help="A topic (repeatable)."),
        click.option("--group", "groups", multiple=True, help="A consumer group (repeatable)."),
        click.option("--cluster", is_flag=True, help="The cluster resource."),
        click.option("--transactional-id", "transactional_ids", multiple=True,
                     help="A transactional id (repeatable)."),
        click.option("--resource-pattern-type", "pattern", default="literal",
                     show_default=True, type=click.Choice(list(_PATTERNS),
                                                          case_sensitive=False),
                     help="How resource names match: literal or prefixed (match and any "
                          "also for list and remove)."),
    )):
        command = option(command)
    return secured_admin_options(command)


def _principal_options(command: Any) -> Any:
    for option in reversed((
        click.option("--allow-principal", "allow_principals", multiple=True,
                     help="Principal to allow, e.g. User:alice (repeatable)."),
        click.option("--deny-principal", "deny_principals", multiple=True,
                     help="Principal to deny (repeatable)."),
        click.option("--allow-host", "allow_hosts", multiple=True,
                     help="Host the allowed principals may come from (default *)."),
        click.option("--deny-host", "deny_hosts", multiple=True,
                     help="Host the denied principals are denied from (default *)."),
        click.option("--operation", "operations", multiple=True,
                     help="Operation (repeatable): Read, Write, Create, Delete, Alter, "
                          "Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
                          "IdempotentWrite, All."),
        click.option("--producer", is_flag=True,
                     help="Producer ACLs: Write, Describe and Create on the topics (Write "
                          "and Describe on --transactional-id; with --idempotent, "
                          "IdempotentWrite on the cluster)."),
        click.option("--consumer", is_flag=True,
                     help="Consumer ACLs: Read and Describe on the topics, Read on --group."),
        click.option("--idempotent", is_flag=True,
                     help="With --producer: allow idempotent producing."),
    )):
        command = option(command)
    return command


@dataclass(frozen=True)
class _Entries:
    """Who and what: (principal, host, permission) triples and the operations."""

    who: list[tuple[str, str, AclPermissionType]]
    operations: list[AclOperation]


def _entries(allow_principals: tuple[str, ...], deny_principals: tuple[str, ...],
             allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
             operations: tuple[str, ...]) -> _Entries:
    for principal in allow_principals + deny_principals:
        kind, sep, name = principal.partition(":")
        if not sep or not kind or not name:
            raise CliError(f"invalid principal {principal!r}: expected Type:name, e.g. "
                           "User:alice")
    who = [(p, h, AclPermissionType.ALLOW) for p in allow_principals
           for h in allow_hosts or ("*",)]
    who += [(p, h, AclPermissionType.DENY) for p in deny_principals
            for h in deny_hosts or ("*",)]
    return _Entries(who, [_operation(o) for o in operations])


def _bindings_to_add(resources: list[Resource], pattern: ResourcePatternType,
                     entries: _Entries, producer: bool, consumer: bool, idempotent: bool
                     ) -> list[AclBinding]:
    per_resource: list[tuple[Resource, AclOperation]] = []
    if producer or consumer:
        topics = [r for r in resources if r[0] is ResourceType.TOPIC]
        if not topics:
            raise CliError("--producer and --consumer need at least one --topic")
        if consumer and not any(r[0] is ResourceType.GROUP for r in resources):
            raise CliError("--consumer needs --group")
        for resource in resources:
            rtype = resource[0]
            if producer and rtype is ResourceType.TOPIC:
                per_resource += [(resource, op) for op in (
                    AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)]
            if producer and rtype is ResourceType.TRANSACTIONAL_ID:
                per_resource += [(resource, op) for op in (
                    AclOperation.WRITE, AclOperation.DESCRIBE)]
            if consumer and rtype is ResourceType.TOPIC:
                per_resource += [(resource, op) for op in (
                    AclOperation.READ, AclOperation.DESCRIBE)]
            if consumer and rtype is ResourceType.GROUP:
                per_resource.append((resource, AclOperation.READ))
        if producer and idempotent:
            per_resource.append(((ResourceType.BROKER, CLUSTER_NAME),
                                 AclOperation.IDEMPOTENT_WRITE))
    else:
        if not entries.operations:
            raise CliError("--operation is required (or use --producer / --consumer)")
        for resource in resources:
            for op in entries.operations:
                if op is not AclOperation.ALL and op not in _SUPPORTED[resource[0]]:
                    supported = ", ".join(sorted(o.name for o in _SUPPORTED[resource[0]]))
                    raise CliError(f"ResourceType {_TYPE_NAMES[resource[0]]} only supports "
                                   f"operations {supported}, ALL")
                per_resource.append((resource, op))
    # The cluster is one resource: its ACLs are always literal.
    return [AclBinding(rtype, name, ResourcePatternType.LITERAL
                       if rtype is ResourceType.BROKER else pattern,
                       principal, host, op, permission)
            for (rtype, name), op in dict.fromkeys(per_resource)
            for principal, host, permission in entries.who]


def _name(value: Any) -> str:
    """An enum's name (confluent-kafka's stubs also allow str and int in bindings)."""
    return str(getattr(value, "name", value))


def _filter(*fields: Any) -> AclBindingFilter:
    """A filter; None fields match anything (the stubs say str)."""
    return AclBindingFilter(*fields)


def _describe(binding: AclBinding) -> str:
    return (f"(principal={binding.principal}, host={binding.host}, "
            f"operation={_name(binding.operation)}, "
            f"permissionType={_name(binding.permission_type)})")


def _print_by_resource(bindings: Iterable[AclBinding], heading: str) -> None:
    by_resource: dict[tuple[str, str, str], list[AclBinding]] = {}
    for binding in bindings:
        rtype = _name(binding.restype)
        key = ("CLUSTER" if rtype == "BROKER" else rtype, binding.name,
               _name(binding.resource_pattern_type))
        by_resource.setdefault(key, []).append(binding)
    for (rtype, name, pattern), found in sorted(by_resource.items()):
        click.echo(f"{heading} `ResourcePattern(resourceType={rtype}, name={name}, "
                   f"patternType={pattern})`:")
        for binding in sorted(found, key=_describe):
            click.echo(f" \t{_describe(binding)}")
        click.echo("")


@click.group("acl")
def acl_group() -> None:
    """Manage ACLs of a broker with an authorizer (like kafka-acls.sh)."""


@acl_group.command("add")
@_principal_options
@_resource_options
def add(conn: Connection, topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
        transactional_ids: tuple[str, ...], pattern: str, allow_principals: tuple[str, ...],
        deny_principals: tuple[str, ...], allow_hosts: tuple[str, ...],
        deny_hosts: tuple[str, ...], operations: tuple[str, ...], producer: bool,
        consumer: bool, idempotent: bool) -> None:
    """Add ACLs: principals x hosts x operations on each resource."""
    pattern_type = _PATTERNS[pattern.lower()]
    if pattern_type in (ResourcePatternType.MATCH, ResourcePatternType.ANY):
        raise CliError(f"A '{pattern.lower()}' resource pattern type is not valid for add")
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts,
                       operations)
    if not entries.who:
        raise CliError("You must specify one of: --allow-principal, --deny-principal when "
                       "trying to add ACLs.")
    resources = _resources(topics, groups, cluster, transactional_ids)
    if not resources:
        raise CliError("You must provide at least one resource: --topic <topic> or --cluster "
                       "or --group <group> or --transactional-id <id>")
    bindings = _bindings_to_add(resources, pattern_type, entries, producer, consumer,
                                idempotent)
    admin = conn.admin()
    futures = admin.create_acls(bindings, request_timeout=conn.timeout)
    for binding, future in futures.items():
        conn.result(future, f"cannot add ACL {_describe(binding)} on {binding.name}")
    _print_by_resource(bindings, "Adding ACLs for resource")


def _filters(resources: list[Resource], pattern: ResourcePatternType, entries: _Entries
             ) -> list[AclBindingFilter]:
    who: list[tuple[str | None, str | None, AclPermissionType]] = \
        [(p, h, perm) for p, h, perm in entries.who] or [(None, None, AclPermissionType.ANY)]
    ops = entries.operations or [AclOperation.ANY]
    return [_filter(rtype, name, pattern, principal, host, op, permission)
            for rtype, name in resources for principal, host, permission in who
            for op in ops]


@acl_group.command("remove")
@_principal_options
@_resource_options
def remove(conn: Connection, topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
           transactional_ids: tuple[str, ...], pattern: str,
           allow_principals: tuple[str, ...], deny_principals: tuple[str, ...],
           allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
           operations: tuple[str, ...], producer: bool, consumer: bool, idempotent: bool) -> None:
    """Remove the matching ACLs of the resources (all of them without principals and
    operations)."""
    resources = _resources(topics, groups, cluster, transactional_ids)
    if not resources:
        raise CliError("You must provide at least one resource: --topic <topic> or --cluster "
                       "or --group <group> or --transactional-id <id>")
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts,
                       operations)
    if producer or consumer:
        added = _bindings_to_add(resources, ResourcePatternType.LITERAL, entries, producer,
                                 consumer, idempotent)
        wanted = dict.fromkeys(AclOperation(b.operation) for b in added)
        entries = _Entries(entries.who, list(wanted))
    admin = conn.admin()
    filters = _filters(resources, _PATTERNS[pattern.lower()], entries)
    futures = admin.delete_acls(filters, request_timeout=conn.timeout)
    removed: list[AclBinding] = []
    for future in futures.values():
        removed += conn.result(future, "cannot remove ACLs")
    if not removed:
        click.echo("No matching ACLs.")
    _print_by_resource(removed, "Removed ACLs for resource")


@acl_group.command("list")
@click.option("--principal", "principals", multiple=True,
              help="Only the ACLs of this principal (repeatable).")
@_resource_options
def list_acls(conn: Connection, topics: tuple[str, ...], groups: tuple[str, ...],
              cluster: bool, transactional_ids: tuple[str, ...], pattern: str,
              principals: tuple[str, ...]) -> None:
    """List ACLs: all of them, or those of the resources given."""
    resources: list[tuple[ResourceType, str | None]] = list(
        _resources(topics, groups, cluster, transactional_ids))
    pattern_type = _PATTERNS[pattern.lower()]
    if not resources:
        resources = [(ResourceType.ANY, None)]
        pattern_type = ResourcePatternType.ANY
    admin = conn.admin()
    found: list[AclBinding] = []
    for principal in principals or (None,):
        for rtype, name in resources:
            acl_filter = _filter(rtype, name, pattern_type, principal, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
            future = admin.describe_acls(acl_filter, request_timeout=conn.timeout)
            found += conn.result(future, "cannot list ACLs")
    _print_by_resource(found, "Current ACLs for resource")
