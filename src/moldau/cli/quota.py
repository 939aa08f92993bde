"""``moldau quota set|describe``: client quotas, like ``kafka-configs --entity-type
users/clients --alter/--describe``.

An entity is a user (``--user NAME``, or ``--user-default`` for every user without a quota
of its own), a client id (``--client-id ID`` / ``--client-id-default``), or both. Neither
confluent-kafka nor kafka-python has calls for AlterClientQuotas and DescribeClientQuotas,
so the requests go to the first bootstrap broker through :mod:`.raw_requests` (any broker
answers: in a cluster the change reaches the others through ZooKeeper). ``--command-config``
and ``-X`` take the same client settings as ``moldau acl`` and ``moldau user``: TLS, and SASL
PLAIN or SCRAM (:mod:`.client_security`).
"""

from __future__ import annotations

from typing import Any

import click
from kio.schema.alter_client_quotas import v1 as alter
from kio.schema.describe_client_quotas import v1 as describe
from kio.schema.errors import ErrorCode
from kio.static.primitive import f64, i8

from . import raw_requests
from .admin_client import secured_admin_options
from .connection import Connection
from .errors import CliError

_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
         "controller_mutation_rate")
_EXACT, _DEFAULT = 0, 1


def _entity_options(command: Any) -> Any:
    for option in reversed((
        click.option("--user", help="The user (principal name) the quota is for."),
        click.option("--user-default", is_flag=True,
                     help="The default of every user without a quota of its own."),
        click.option("--client-id", help="The client id the quota is for."),
        click.option("--client-id-default", is_flag=True,
                     help="The default of every client id without a quota of its own."),
    )):
        command = option(command)
    return command


def _parts(user: str | None, user_default: bool, client_id: str | None,
           client_id_default: bool) -> list[tuple[str, str | None]]:
    """The entity's (type, name or None for the default) parts, checked."""
    if user is not None and user_default:
        raise CliError("give --user or --user-default, not both")
    if client_id is not None and client_id_default:
        raise CliError("give --client-id or --client-id-default, not both")
    parts: list[tuple[str, str | None]] = []
    if user is not None or user_default:
        parts.append(("user", None if user_default else user))
    if client_id is not None or client_id_default:
        parts.append(("client-id", None if client_id_default else client_id))
    return parts


def _entity_text(parts: Any) -> str:
    return ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in parts)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _parse_add(items: tuple[str, ...]) -> dict[str, float]:
    """``KEY=VALUE[,KEY=VALUE]`` (repeatable), as kafka-configs' --add-config."""
    values: dict[str, float] = {}
    for item in items:
        for assignment in filter(None, (a.strip() for a in item.split(","))):
            key, sep, text = assignment.partition("=")
            if not sep or not key.strip():
                raise CliError(f"invalid --add-config {assignment!r}: expected KEY=VALUE")
            key = key.strip()
            if key not in _KEYS:
                raise CliError(f"unknown quota {key!r}: expected one of {', '.join(_KEYS)}")
            try:
                values[key] = float(text)
            except ValueError:
                raise CliError(f"invalid value of {key}: {text.strip()!r} is not a number"
                               ) from None
    return values


def _request(conn: Connection, obj: Any) -> Any:
    _ = conn.security  # bad TLS/SASL settings: one line before any connection is tried
    conn.check_reachable()
    return raw_requests.ask(conn, conn.addresses()[0], obj, "the broker")


@click.group("quota")
def quota_group() -> None:
    """Client quotas by user and/or client id (produce/fetch byte rates, request time)."""


@quota_group.command("set")
@_entity_options
@click.option("--add-config", "add_config", multiple=True, metavar="KEY=VALUE[,...]",
              help="Quotas to set: " + ", ".join(_KEYS) + " (repeatable).")
@click.option("--delete-config", "delete_config", multiple=True, metavar="KEY[,...]",
              help="Quotas to remove (repeatable).")
@click.option("--validate-only", is_flag=True, help="Check the change; change nothing.")
@secured_admin_options
def set_quota(conn: Connection, user: str | None, user_default: bool, client_id: str | None,
              client_id_default: bool, add_config: tuple[str, ...],
              delete_config: tuple[str, ...], validate_only: bool) -> None:
    """Set or remove quotas of one entity."""
    parts = _parts(user, user_default, client_id, client_id_default)
    if not parts:
        raise CliError("name the entity: --user/--user-default and/or "
                       "--client-id/--client-id-default")
    values = _parse_add(add_config)
    removed = [k.strip() for item in delete_config for k in item.split(",") if k.strip()]
    for key in removed:
        if key not in _KEYS:
            raise CliError(f"unknown quota {key!r}: expected one of {', '.join(_KEYS)}")
        if key in values:
            raise CliError(f"{key} is both added and deleted")
    if not values and not removed:
        raise CliError("nothing to change: give --add-config and/or --delete-config")
    ops = tuple(alter.request.OpData(key=k, value=f64(v), remove=False) for k, v in values.items())
    ops += tuple(alter.request.OpData(key=k, value=f64(0.0), remove=True) for k in removed)
    entity = tuple(alter.request.EntityData(entity_type=kind, entity_name=name)
                   for kind, name in parts)
    response = _request(conn, alter.AlterClientQuotasRequest(
        entries=(alter.request.EntryData(entity=entity, ops=ops),),
        validate_only=validate_only))
    entry = response.entries[0]
    if entry.error_code != ErrorCode.none:
        raise CliError(f"cannot set quotas of {_entity_text(parts)}: "
                       f"{entry.error_message or ''} ({entry.error_code.name.upper()})")
    done = [f"{k}={_number(v)}" for k, v in values.items()] + [f"{k} removed" for k in removed]
    verb = "would be" if validate_only else "set:"
    click.echo(f"Quotas of {_entity_text(parts)} {verb} {', '.join(done)}")


@quota_group.command("describe")
@_entity_options
@secured_admin_options
def describe_quotas(conn: Connection, user: str | None, user_default: bool,
                    client_id: str | None, client_id_default: bool) -> None:
    """Show quotas: of one entity, or of every entity when none is named."""
    parts = _parts(user, user_default, client_id, client_id_default)
    components = tuple(
        describe.request.ComponentData(entity_type=kind,
                                       match_type=i8(_DEFAULT if name is None else _EXACT),
                                       match=name)
        for kind, name in parts)
    response = _request(conn, describe.DescribeClientQuotasRequest(
        components=components, strict=bool(parts)))
    if response.error_code != ErrorCode.none:
        raise CliError(f"cannot describe quotas: {response.error_message or ''} "
                       f"({response.error_code.name.upper()})")
    for entry in response.entries or ():
        values = ", ".join(f"{v.key}={_number(v.value)}" for v in entry.values)
        click.echo(f"{_entity_text((e.entity_type, e.entity_name) for e in entry.entity)}  "
                   f"{values}")
