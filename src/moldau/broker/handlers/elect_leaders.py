"""ElectLeaders (API 43): move leadership to the preferred replica, or elect an unclean leader.

Kafka's admin client sends it to the controller (``kafka-leader-election.sh``,
``AdminClient.elect_leaders``). In a cluster the controller's ``LeaderElector`` decides and
writes the new states (``cluster/leader_election.py``); this handler answers once this
broker's state cache shows them (at most the request's timeout; REQUEST_TIMED_OUT for those
still missing). Any other broker answers NOT_CONTROLLER for each partition, as Kafka does.

As in Kafka, a request for all partitions (null) reports only the partitions that were
elected or failed, not those whose leader was already right (ELECTION_NOT_NEEDED); an
election type other than 0 (PREFERRED) and 1 (UNCLEAN) fails the whole request with
UNKNOWN_SERVER_ERROR, at the top and for every partition named. A single node leads every
partition it has, which is its only replica: nothing to elect.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster.leader_election import (
    NOT_NEEDED,
    PREFERRED,
    UNCLEAN,
    UNKNOWN_PARTITION,
    ElectionOutcome,
    Key,
    not_available,
)
from ...protocol.codec import build
from ..broker import RequestContext
from .api_versions import NO_THROTTLE


def _requested(request: Any) -> set[Key] | None:
    """The partitions named (duplicates merged, as Kafka's request does), None for all."""
    if request.topic_partitions is None:
        return None
    return {(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions}


def _single_node(ctx: RequestContext, election_type: int,
                 wanted: set[Key] | None) -> dict[Key, ElectionOutcome]:
    broker = ctx.broker
    if wanted is None:
        wanted = {(name, p) for name, topic in broker.metadata.topics().items()
                  for p in range(topic.partitions)}
    outcomes: dict[Key, ElectionOutcome] = {}
    for key in wanted:
        hosted = broker.partition(*key)
        if hosted is None:
            outcomes[key] = UNKNOWN_PARTITION
        elif hosted.offline:  # in an offline log dir: its one replica cannot lead
            outcomes[key] = not_available(election_type, key)
        else:
            outcomes[key] = NOT_NEEDED
    return outcomes


def _response(ctx: RequestContext, code: ErrorCode,
              outcomes: dict[Key, ElectionOutcome]) -> Any:
    m = ctx.resp
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), outcome in sorted(outcomes.items()):
        by_topic[topic].append(build(m.PartitionResult, partition_id=partition,
                                     error_code=outcome.code, error_message=outcome.message))
    results = tuple(build(m.ReplicaElectionResult, topic=topic, partition_result=tuple(parts))
                    for topic, parts in by_topic.items())
    return build(m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=code,
                 replica_election_results=results)


async def handle_elect_leaders(request: Any, ctx: RequestContext) -> Any:
    election_type = int(getattr(request, "election_type", PREFERRED))  # v0: preferred only
    wanted = _requested(request)
    if election_type not in (PREFERRED, UNCLEAN):
        failed = ElectionOutcome(ErrorCode.unknown_server_error)
        return _response(ctx, ErrorCode.unknown_server_error,
                         dict.fromkeys(wanted or (), failed))
    link = ctx.broker.cluster
    if link is None:
        outcomes = _single_node(ctx, election_type, wanted)
    else:
        timeout_s = max(0.0, request.timeout.total_seconds())
        outcomes = await link.elect_leaders(election_type, wanted, timeout_s)
    if wanted is None:
        outcomes = {k: o for k, o in outcomes.items()
                    if o.code != ErrorCode.election_not_needed}
    return _response(ctx, ErrorCode.none, outcomes)
