"""``moldau config``: describe and change topic or broker configs.

Changes go through IncrementalAlterConfigs, so setting one key never resets the others
(the legacy AlterConfigs replaces the whole set, a classic way to lose settings).
By default ``describe`` shows only entries that differ from the built-in defaults, like
``kafka-configs --describe``; ``--all`` shows everything with its source.
"""

from __future__ import annotations

from collections.abc import Iterable

import click
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from .assignments import parse_assignments
from .connection import Connection, connection_options
from .errors import CliError
from .output import print_line, print_table, stdout_console, table

_SOURCE_NAMES = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG.value: "topic",
    ConfigSource.DYNAMIC_BROKER_CONFIG.value: "dynamic broker",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value: "dynamic broker default",
    ConfigSource.STATIC_BROKER_CONFIG.value: "static broker",
    ConfigSource.DEFAULT_CONFIG.value: "default",
    ConfigSource.UNKNOWN_CONFIG.value: "unknown",
}


def resource_label(resource: ConfigResource) -> str:
    kind = "topic" if resource.restype == ResourceType.TOPIC else "broker"
    return f"{kind} {resource.name!r}"


def _source_value(entry: ConfigEntry) -> int:
    source = entry.source
    return int(source.value if isinstance(source, ConfigSource) else source)


def is_default(entry: ConfigEntry) -> bool:
    """True when the value comes from the built-in default rather than any setting."""
    return bool(entry.is_default) or _source_value(entry) == ConfigSource.DEFAULT_CONFIG.value


def fetch_configs(
    conn: Connection, admin: AdminClient, resource: ConfigResource, *, include_defaults: bool
) -> list[ConfigEntry]:
    """The resource's config entries, sorted by name, optionally without defaults."""
    futures = admin.describe_configs([resource], request_timeout=conn.timeout)
    context = f"cannot describe configs of {resource_label(resource)}"
    entries = conn.result(futures[resource], context)
    chosen = [e for e in entries.values() if include_defaults or not is_default(e)]
    return sorted(chosen, key=lambda e: e.name)


def print_configs(entries: Iterable[ConfigEntry], title: str) -> None:
    """Name, value and source; sensitive values are never printed."""
    rows = list(entries)
    console = stdout_console()
    if not rows:
        print_line(console, f"{title}: none")
        return
    configs = table("Name", "Value", "Source", title=title)
    for entry in rows:
        value = "" if entry.value is None else entry.value
        if entry.is_sensitive:
            value = "(sensitive)"
        configs.add_row(entry.name, value, _SOURCE_NAMES.get(_source_value(entry), "unknown"))
    print_table(console, configs)


def alter_configs(
    conn: Connection,
    admin: AdminClient,
    resource: ConfigResource,
    to_set: dict[str, str],
    to_delete: Iterable[str],
) -> None:
    """Apply SET and DELETE operations in one IncrementalAlterConfigs request."""
    ops = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in to_set.items()
    ]
    ops += [
        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
        for name in to_delete
    ]
    target = ConfigResource(resource.restype, resource.name, incremental_configs=ops)
    futures = admin.incremental_alter_configs([target], request_timeout=conn.timeout)
    for future in futures.values():
        conn.result(future, f"cannot alter configs of {resource_label(resource)}")


def _resource(topic: str | None, broker: int | None) -> ConfigResource:
    if (topic is None) == (broker is None):
        raise CliError("give exactly one of --topic NAME or --broker ID")
    if topic is not None:
        return ConfigResource(ResourceType.TOPIC, topic)
    return ConfigResource(ResourceType.BROKER, str(broker))


@click.group("config")
def config_group() -> None:
    """Describe or change topic and broker configs."""


@config_group.command("describe")
@click.option("--topic", help="Topic whose configs to show.")
@click.option("--broker", type=int, metavar="ID", help="Broker id whose configs to show.")
@click.option("--all", "show_all", is_flag=True, help="Include entries left at their default.")
@connection_options
def describe(conn: Connection, topic: str | None, broker: int | None, show_all: bool) -> None:
    """Show configs (by default only those not at their built-in default)."""
    resource = _resource(topic, broker)
    entries = fetch_configs(conn, conn.admin(), resource, include_defaults=show_all)
    kind = "all configs" if show_all else "non-default configs"
    print_configs(entries, f"{kind} of {resource_label(resource)}")


@config_group.command("alter")
@click.option("--topic", help="Topic to change.")
@click.option("--broker", type=int, metavar="ID", help="Broker id to change (dynamic config).")
@click.option("--set", "to_set", multiple=True, metavar="KEY=VALUE", help="Set a config.")
@click.option("--delete", "to_delete", multiple=True, metavar="KEY", help="Revert to default.")
@connection_options
def alter(
    conn: Connection,
    topic: str | None,
    broker: int | None,
    to_set: tuple[str, ...],
    to_delete: tuple[str, ...],
) -> None:
    """Set or delete configs without touching the others."""
    resource = _resource(topic, broker)
    values = parse_assignments(to_set, "--set")
    if not values and not to_delete:
        raise CliError("nothing to change: give --set KEY=VALUE or --delete KEY")
    alter_configs(conn, conn.admin(), resource, values, to_delete)
    changes = [f"{k}={v}" for k, v in values.items()] + [f"-{k}" for k in to_delete]
    click.echo(f"Altered configs of {resource_label(resource)}: {', '.join(changes)}")
