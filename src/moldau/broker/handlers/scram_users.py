"""DescribeUserScramCredentials and AlterUserScramCredentials, with Kafka's per-user errors.

Clients send the salted password (RFC 5802's SaltedPassword), never the password; the broker
keeps the stored key and server key derived from it (:class:`~..scram.ScramCredential`), in
the metadata store: the node's metadata file, or ``/config/users/<user>`` in ZooKeeper.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ..scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
)
from .api_versions import NO_THROTTLE

if TYPE_CHECKING:
    from ..broker import Broker, RequestContext

T = TypeVar("T")


async def _io(broker: Broker, call: Callable[..., T], *args: Any) -> T:
    """A metadata store call: ZooKeeper calls block, so they run in a thread."""
    if broker.cluster is not None:
        return await asyncio.to_thread(call, *args)
    return call(*args)


def _credentials(configs: dict[str, str]) -> dict[str, ScramCredential]:
    found = {}
    for mechanism in MECHANISMS:
        if mechanism in configs:
            try:
                found[mechanism] = ScramCredential.decode(configs[mechanism])
            except (KeyError, ValueError):
                continue
    return found


async def handle_describe(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    store = broker.metadata
    names = [u.name for u in request.users or ()]
    counts = Counter(names)
    if not names:
        names = await _io(broker, store.users)
    results = []
    for name in dict.fromkeys(names):
        code, message, infos = ErrorCode.none, None, ()
        if counts[name] > 1:
            code, message = ErrorCode.duplicate_resource, f"Cannot describe SCRAM credentials " \
                f"for the same user twice in a single request: {name}"
        else:
            creds = _credentials(await _io(broker, store.user_configs, name))
            if not creds:
                code = ErrorCode.resource_not_found
                message = f"Attempt to describe a user credential that does not exist: {name}"
            infos = tuple(build(m.CredentialInfo, mechanism=MECHANISMS[mech][1],
                                iterations=cred.iterations) for mech, cred in creds.items())
        results.append(build(m.DescribeUserScramCredentialsResult, user=name, error_code=code,
                             error_message=message, credential_infos=infos))
    return build(m.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, error_message=None, results=tuple(results))


def _check(user: str, mechanism_type: int, iterations: int | None
           ) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism_type not in MECHANISM_BY_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


async def handle_alter(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    store = broker.metadata
    changes: list[tuple[str, int, Any]] = (
        [(d.name, d.mechanism, None) for d in request.deletions]
        + [(u.name, u.mechanism, u) for u in request.upsertions])
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: Counter[tuple[str, int]] = Counter((name, mech) for name, mech, _ in changes)
    for name, mech, upsert in changes:
        if seen[(name, mech)] > 1:
            errors.setdefault(name, (ErrorCode.duplicate_resource, "A user credential cannot "
                                     "be altered twice in the same request"))
        problem = _check(name, mech, upsert.iterations if upsert is not None else None)
        if problem is not None:
            errors.setdefault(name, problem)
    users = list(dict.fromkeys(name for name, _, _ in changes))
    for user in users:
        if user in errors:
            continue
        configs = await _io(broker, store.user_configs, user)
        updated = dict(configs)
        for name, mech, upsert in changes:
            if name != user:
                continue
            mechanism = MECHANISM_BY_TYPE[mech]
            if upsert is None:
                if mechanism not in updated:
                    errors[user] = (ErrorCode.resource_not_found, "Attempt to delete a user "
                                    "credential that does not exist")
                    break
                del updated[mechanism]
            else:
                updated[mechanism] = ScramCredential.from_salted_password(
                    mechanism, upsert.salt, upsert.salted_password, upsert.iterations).encode()
        if user not in errors and updated != configs:
            await _io(broker, store.set_user_configs, user, updated)
    results = tuple(
        build(m.AlterUserScramCredentialsResult, user=user,
              error_code=errors.get(user, (ErrorCode.none, ""))[0],
              error_message=errors[user][1] if user in errors else None)
        for user in users)
    return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE,
                 results=results)
