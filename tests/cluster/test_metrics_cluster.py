"""Replication health in the metrics of three real brokers: a killed follower shows up as an
under-replicated partition and an ISR shrink on its leader, one broker is the controller, and
readiness includes the ZooKeeper registration."""

from __future__ import annotations

import json

from confluent_kafka import Producer

from tests.conftest import MakeBroker
from tests.helpers import free_port
from tests.helpers.metrics import http_get, scrape, value
from tests.helpers.tcp_proxy import TcpProxy
from tests.helpers.zookeeper import ZooKeeperServer

from .helpers import eventually
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe


def test_killed_follower_makes_its_partition_under_replicated(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    ports = [free_port() for _ in range(3)]
    brokers = [make_broker(f"node.id={i + 1}", f"zookeeper.connect={zk_connect}",
                           f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                           "replica.lag.time.max.ms=2000",
                           f"metrics.listener=http://127.0.0.1:{ports[i]}")
               for i in range(3)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 3)])[topic_name].result(timeout=30)
    eventually(lambda: len(describe(brokers[0], topic_name)[2].get(0, (-1, (), ()))[2]) == 3,
               what="ISR of three")
    for url in urls:
        status, body = http_get(url + "/health/ready")
        assert status == 200, body
        assert json.loads(body)["checks"]["registered_in_cluster"] is True
    assert sum(value(scrape(url), "moldau_active_controller") for url in urls) == 1
    leader = describe(brokers[0], topic_name)[2][0][0]
    leader_url = urls[leader - 1]
    assert value(scrape(leader_url), "moldau_under_replicated_partitions") == 0
    # acks=all waits for the followers: the Produce's remote stage (its deferred wait).
    producer = Producer({"bootstrap.servers": brokers[leader - 1].bootstrap, "acks": "all",
                         "linger.ms": 0})
    for i in range(20):
        producer.produce(topic_name, b"v%d" % i, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    samples = scrape(leader_url)
    assert value(samples, "moldau_topic_messages_in_total", {"topic": topic_name}) == 20
    remote = {"api": "Produce", "stage": "remote"}
    assert value(samples, "moldau_request_time_seconds_count", remote) >= 1
    assert value(samples, "moldau_request_time_seconds_sum", remote) > 0
    assert value(samples, "moldau_replication_bytes_out_total") > 0
    eventually(lambda: all(value(scrape(urls[i - 1]), "moldau_replication_bytes_in_total") > 0
                           for i in (1, 2, 3) if i != leader),
               timeout=30, what="both followers counting the bytes they fetched")
    follower = next(i for i in (1, 2, 3) if i != leader)
    brokers[follower - 1].kill9()
    eventually(lambda: value(scrape(leader_url), "moldau_under_replicated_partitions") >= 1,
               timeout=30, what="the leader reporting an under-replicated partition")
    samples = scrape(leader_url)
    assert value(samples, "moldau_isr_shrinks_total") >= 1
    # Still answering: the live brokers stay ready, one of them the controller.
    live = [url for i, url in enumerate(urls) if i != follower - 1]
    eventually(lambda: sum(value(scrape(url), "moldau_active_controller") for url in live) == 1,
               timeout=30, what="one active controller among the live brokers")
    for url in live:
        assert http_get(url + "/health/ready")[0] == 200


def test_ready_fails_while_zookeeper_is_out_of_reach(
        make_broker: MakeBroker, zookeeper: ZooKeeperServer, zk_connect: str) -> None:
    """A broker cut off from ZooKeeper answers 503 naming the check, and 200 once back."""
    chroot = zk_connect[len(zookeeper.address):]
    proxy = TcpProxy(zookeeper.port)
    port = free_port()
    url = f"http://127.0.0.1:{port}/health/ready"
    try:
        make_broker("node.id=1", f"zookeeper.connect=127.0.0.1:{proxy.port}{chroot}",
                    f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                    f"metrics.listener=http://127.0.0.1:{port}")
        assert http_get(url)[0] == 200
        proxy.cut()
        eventually(lambda: http_get(url)[0] == 503, timeout=30, what="not ready")
        status, body = http_get(url)
        answer = json.loads(body)
        assert status == 503 and answer["status"] == "not ready"
        assert "zookeeper_connected" in answer["failing"], answer
        assert http_get(url.replace("ready", "live"))[0] == 200  # the loop still answers
        proxy.heal()
        eventually(lambda: http_get(url)[0] == 200, timeout=30, what="ready again")
    finally:
        proxy.close()
