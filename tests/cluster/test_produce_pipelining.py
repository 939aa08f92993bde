"""A connection's acks=all Produces are appended one after another without waiting for the
ISR in between, and still answered in order (three real brokers, raw Kafka requests).

While a follower is paused, an acks=all produce cannot complete (the paused follower is still
in the ISR). The next Produce on the same connection is appended anyway, so the followers can
fetch both in one round trip; any other request waits behind them, and every response comes
back in request order once the follower resumes.
"""

from __future__ import annotations

import datetime
import select
import time

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.conftest import MakeBroker
from tests.integration.wire import WireClient
from tests.unit.batchgen import simple_batch

from .helpers import eventually
from .test_cluster_brokers import create_topic, describe, start_cluster


def _produce(topic: str, batch: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=60),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=batch),)),))


def _log_bytes(data_dir, topic: str) -> int:  # type: ignore[no-untyped-def]
    return sum(f.stat().st_size for f in (data_dir / f"{topic}-0").glob("*.log"))


def test_acks_all_produces_are_appended_back_to_back_and_answered_in_order(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    # The paused follower stays in the ISR for the whole test (it neither lags long enough
    # nor loses its ZooKeeper session): nothing completes until it resumes.
    brokers = start_cluster(make_broker, zk_connect, 3, "replica.lag.time.max.ms=60000",
                            "zookeeper.session.timeout.ms=60000")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, 1, rf=3)
    eventually(lambda: len(describe(brokers[0], topic_name)[2].get(0, (-1, (), ()))[2]) == 3,
               what="ISR of three")
    leader, replicas, _ = describe(brokers[0], topic_name)[2][0]
    follower = next(r for r in replicas if r != leader)
    first, second = simple_batch(3, tag=1), simple_batch(2, tag=2)
    leader_dir = brokers[leader - 1].data_dir
    brokers[follower - 1].pause()
    try:
        with WireClient.to(brokers[leader - 1].bootstrap, timeout=60) as client:
            ids = [client.send_request(_produce(topic_name, first)),
                   client.send_request(_produce(topic_name, second)),
                   client.send_request(ApiVersionsRequest(
                       client_software_name="moldau-tests", client_software_version="1"))]
            # The second batch reaches the leader's log while the first still waits for the
            # paused follower (before, the connection read nothing more until it was answered).
            eventually(lambda: _log_bytes(leader_dir, topic_name) >= len(first) + len(second),
                       timeout=20, what="both batches appended on the leader")
            readable, _, _ = select.select([client.sock], [], [], 0.2)
            assert not readable, "answered before the paused follower had the records"
            brokers[follower - 1].resume()
            started = time.monotonic()
            answers = [client.read_response(0, 9, ids[0]), client.read_response(0, 9, ids[1]),
                       client.read_response(18, 3, ids[2])]
            print(f"answered {time.monotonic() - started:.2f} s after the follower resumed")
    finally:
        brokers[follower - 1].resume()
    offsets = []
    for answer in answers[:2]:
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none
        offsets.append(part.base_offset)
    assert offsets == [0, 3]
    assert answers[2].error_code == ErrorCode.none
