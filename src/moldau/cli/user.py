"""``moldau user add|delete|list``: SCRAM credentials, through confluent-kafka's AdminClient
(AlterUserScramCredentials / DescribeUserScramCredentials), like ``kafka-configs
--entity-type users``. The password is salted and hashed on this side (librdkafka sends the
SaltedPassword); it never reaches the broker in the clear.

A broker that only has SASL listeners needs the CLI to authenticate as well (see
:mod:`.admin_client`: ``--command-config FILE``, ``-X KEY=VALUE``).
"""

from __future__ import annotations

import click
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from .admin_client import secured_admin_options as _client_options
from .connection import Connection
from .errors import CliError

_MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
               "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
_NAMES = {v: k for k, v in _MECHANISMS.items()}


@click.group("user")
def user_group() -> None:
    """Manage SCRAM users (SASL/SCRAM-SHA-256 and SCRAM-SHA-512 credentials)."""


@user_group.command("add")
@click.argument("name")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="The user's password (asked for when not given).")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(list(_MECHANISMS)),
              help="SCRAM mechanism(s) to store (default: both).")
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True,
              help="PBKDF2 iterations of the salted password.")
@click.option("--zookeeper", metavar="CONNECT",
              help="Write the credentials straight into the cluster's ZooKeeper "
                   "(zookeeper.connect) instead of asking a broker: for users that must "
                   "exist before the brokers start, such as the inter-broker user.")
@_client_options
def add(conn: Connection, name: str, password: str, mechanisms: tuple[str, ...],
        iterations: int, zookeeper: str | None) -> None:
    """Create user NAME, or set a new password."""
    chosen = mechanisms or tuple(_MECHANISMS)
    if zookeeper is not None:
        _add_in_zookeeper(zookeeper, name, password, chosen, iterations, conn.timeout)
        return
    admin = conn.admin()
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(name, ScramCredentialInfo(_MECHANISMS[m], iterations),
                                     password.encode())
        for m in chosen]
    futures = admin.alter_user_scram_credentials(upserts,
                                                       request_timeout=conn.timeout)
    conn.result(futures[name], f"cannot set credentials of user {name!r}")
    click.echo(f"User {name}: {', '.join(chosen)} credentials set ({iterations} iterations)")


def _add_in_zookeeper(connect: str, name: str, password: str, mechanisms: tuple[str, ...],
                      iterations: int, timeout_s: float) -> None:
    from ..cluster.scram_credential import store_in_zookeeper

    try:
        store_in_zookeeper(connect, name, password, mechanisms, iterations,
                           timeout_ms=int(timeout_s * 1000))
    except Exception as exc:  # kazoo's time-outs and connection errors, said in one line
        raise CliError(f"cannot write user {name!r} to ZooKeeper at {connect}: "
                       f"{exc or type(exc).__name__}") from None
    click.echo(f"User {name}: {', '.join(mechanisms)} credentials set in ZooKeeper "
               f"({iterations} iterations)")


@user_group.command("delete")
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(list(_MECHANISMS)),
              help="Only these mechanisms' credentials (default: all the user has).")
@_client_options
def delete(conn: Connection, name: str, mechanisms: tuple[str, ...]) -> None:
    """Delete user NAME's credentials."""
    admin = conn.admin()
    if not mechanisms:
        described = admin.describe_user_scram_credentials(
            [name], request_timeout=conn.timeout)
        assert isinstance(described, dict)  # one future per named user
        info = conn.result(described[name], f"cannot delete user {name!r}")
        mechanisms = tuple(_NAMES[i.mechanism] for i in info.scram_credential_infos)
    deletions: list[UserScramCredentialAlteration] = [
        UserScramCredentialDeletion(name, _MECHANISMS[m]) for m in mechanisms]
    futures = admin.alter_user_scram_credentials(deletions,
                                                       request_timeout=conn.timeout)
    conn.result(futures[name], f"cannot delete user {name!r}")
    click.echo(f"User {name}: {', '.join(mechanisms)} credentials deleted")


@user_group.command("list")
@_client_options
def list_users(conn: Connection) -> None:
    """List the users with SCRAM credentials, their mechanisms and iterations."""
    admin = conn.admin()
    future = admin.describe_user_scram_credentials(request_timeout=conn.timeout)
    assert not isinstance(future, dict)  # all users: a single future
    users = conn.result(future, "cannot list users")
    for name in sorted(users):
        infos = ", ".join(f"{_NAMES.get(i.mechanism, i.mechanism)} ({i.iterations} iterations)"
                          for i in users[name].scram_credential_infos)
        click.echo(f"{name}  {infos}")
