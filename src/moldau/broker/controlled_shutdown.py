"""The broker's side of a controlled shutdown (Kafka's ``KafkaServer.controlledShutdown``).

On SIGTERM, with ``controlled.shutdown.enable`` (the default) and a cluster, the broker hands
its leadership over before it stops, so that clients move to the new leaders at once instead
of waiting for its ZooKeeper session to end and a failover:

1. it stops following leaders for good (``ClusterLink.begin_controlled_shutdown``): a broker
   still fetching would be taken back into the ISRs the controller is about to take it out
   of; and it stops appending to the replicated partitions it leads until their followers
   have every record it wrote (at most ``DRAIN_TIMEOUT_S``). So the next leader holds all of
   it, and no batch written here but not yet acknowledged is sent again by its producer and
   written twice (moldau keeps no producer sequence state yet to catch such a retry).
   Produce requests for them wait until the hand-over is over and are then answered
   NOT_LEADER_OR_FOLLOWER: answered at once, a client would ask Metadata while it still
   names this broker and back off longer with every retry;
2. it sends ControlledShutdown(broker id, broker epoch) to the current controller and tries
   again, ``controlled.shutdown.max.retries`` attempts in all, ``controlled.shutdown.retry.
   backoff.ms`` apart, while the controller moved (NOT_CONTROLLER), cannot be reached, or
   answers that partitions remain (ones with no other in-sync replica) of which a follower
   is still fetching here (it may catch up, join the ISR and take over). Unlike Kafka it does
   not wait when no registered follower fetches after the answer (``FETCH_CHECK_S``; the
   last broker of a cluster, or every broker stopping at once): nothing would change;
3. it applies the new partition states at once (``ClusterLink.apply_led_states``): produce
   and fetch for the partitions that moved get NOT_LEADER_OR_FOLLOWER from now on, and it
   keeps answering for ``LINGER_S`` before closing its connections;
4. a controller gives /controller up (``ClusterLink.resign_controller``), so that another
   broker is elected while this one closes its connections and logs.

Whatever happens, the broker then shuts down as before (a failed controlled shutdown only
means the controller learns of it when the session ends, as with a kill).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ..protocol.apis import CONTROLLED_SHUTDOWN
from ..protocol.schemas import request_schema
from .broker import now_ms

if TYPE_CHECKING:
    from .cluster_link import ClusterLink

log = logging.getLogger(__name__)

#: The request version sent (the flexible one; every moldau broker takes it).
VERSION = 3
#: How long one attempt may wait for the controller's answer (controller.socket.timeout.ms).
REQUEST_TIMEOUT_S = 30.0
#: Longest wait for the followers to fetch what this broker wrote before appends stopped.
DRAIN_TIMEOUT_S = 5.0
#: How long the broker keeps answering once its leadership moved (NOT_LEADER_OR_FOLLOWER,
#: Metadata naming the new leaders) before it closes its connections: clients then learn
#: the new leaders from its answers instead of from lost connections and metadata retries
#: (measured: the median pause of an acks=all producer fell from about 0.45 s to 0.2 s).
LINGER_S = 0.3
#: Longest a ZooKeeper step of the shutdown may take (ZooKeeper may be unreachable).
ZOOKEEPER_STEP_TIMEOUT_S = 5.0
#: A follower still replicating fetches again within this long (a fetch waits at most
#: 500 ms on the leader).
FETCH_CHECK_S = 1.0


async def controlled_shutdown(link: ClusterLink, max_retries: int, backoff_ms: int) -> bool:
    """Move this broker's leadership away (see the module docstring); True once the
    controller answered with no partition remaining."""
    await link.begin_controlled_shutdown(DRAIN_TIMEOUT_S)
    done = False
    try:
        for attempt in range(1, max_retries + 1):
            outcome = await _attempt(link, attempt, backoff_ms / 1000)
            done = outcome is _Outcome.DONE
            if outcome is not _Outcome.RETRY:
                break
            if attempt < max_retries:
                log.info("controlled shutdown: retrying in %d ms", backoff_ms)
                await asyncio.sleep(backoff_ms / 1000)
        if not done:
            log.warning("controlled shutdown did not complete; shutting down anyway")
        await _bounded(link.apply_led_states(), "applying the new partition states")
    finally:
        link.end_handover()
        if link.election.is_controller or link.election.controller_id == link.node_id:
            await _bounded(asyncio.to_thread(link.resign_controller),
                           "resigning as controller")
    if done:
        await asyncio.sleep(LINGER_S)
    return done


async def _bounded(work: Coroutine[Any, Any, None], what: str) -> None:
    """ZooKeeper may be unreachable: never let a step keep the broker from stopping."""
    try:
        await asyncio.wait_for(work, ZOOKEEPER_STEP_TIMEOUT_S)
    except Exception as exc:
        log.warning("controlled shutdown: %s failed: %s: %s", what, type(exc).__name__, exc)


class _Outcome(enum.Enum):
    DONE = "nothing remains"
    RETRY = "try again"
    GIVE_UP = "what remains cannot move"


async def _attempt(link: ClusterLink, attempt: int, wait_s: float) -> _Outcome:
    """One ControlledShutdown request to the controller."""
    election = link.election
    if election.controller_id < 0:  # mid-election: wait (bounded) for the next controller
        await asyncio.to_thread(election.wait, lambda e: e.controller_id >= 0, wait_s)
    controller = election.controller_id
    address = link.endpoint_of(controller) if controller >= 0 else None
    if address is None:
        log.info("controlled shutdown attempt %d: no controller known", attempt)
        return _Outcome.RETRY
    cls = request_schema(CONTROLLED_SHUTDOWN, VERSION)
    request = cls(broker_id=link.node_id, broker_epoch=link.store.broker_epoch)
    try:
        conn = await link.connector.connect(address, REQUEST_TIMEOUT_S)
        try:
            response = await asyncio.wait_for(conn.request(request), REQUEST_TIMEOUT_S)
        finally:
            conn.close()
    except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as exc:
        log.info("controlled shutdown attempt %d: controller %d at %s:%d unreachable (%s)",
                 attempt, controller, *address, exc or type(exc).__name__)
        return _Outcome.RETRY
    remaining = [(p.topic_name, int(p.partition_index)) for p in response.remaining_partitions]
    if response.error_code != ErrorCode.none:
        log.info("controlled shutdown attempt %d: controller %d answered %s", attempt,
                 controller, response.error_code.name.upper())
        return _Outcome.RETRY
    if remaining:
        link.resume_appends(remaining)
        log.info("controlled shutdown attempt %d: %d partitions still led here (no other "
                 "in-sync replica): %s", attempt, len(remaining),
                 ", ".join(f"{t}-{p}" for t, p in sorted(remaining)[:10]))
        if not await _followers_fetching(link, remaining):
            log.info("controlled shutdown: no follower of theirs is fetching; not waiting")
            return _Outcome.GIVE_UP
        return _Outcome.RETRY
    log.info("controlled shutdown: leadership moved away (attempt %d, controller %d)",
             attempt, controller)
    return _Outcome.DONE


async def _followers_fetching(link: ClusterLink, partitions: list[tuple[str, int]]) -> bool:
    """Whether a registered follower of one of ``partitions`` fetches from here within
    ``FETCH_CHECK_S``: only such a follower can still join the ISR and take over."""
    since = now_ms()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FETCH_CHECK_S
    while True:
        if any(link.follower_fetched(topic, p, since) for topic, p in partitions):
            return True
        if loop.time() > deadline or not any(link.follower_registered(topic, p)
                                             for topic, p in partitions):
            return False
        await asyncio.sleep(0.05)
