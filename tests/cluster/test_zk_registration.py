"""Broker registration and controller election against a real ZooKeeper server."""

from __future__ import annotations

import dataclasses

import pytest

from moldau.cluster import znodes
from moldau.cluster.controller_election import ControllerElection
from moldau.cluster.zookeeper import ZkStoreError
from tests.helpers.tcp_proxy import TcpProxy
from tests.helpers.zookeeper import ZooKeeperServer, four_letter_word

from .helpers import Stores, eventually, raw_client, registration


def test_start_makes_kafkas_persistent_paths_and_cluster_id(stores: Stores,
                                                            zk_connect: str) -> None:
    first = stores.open(1)
    second = stores.open(2)
    assert second.cluster_id == first.cluster_id  # the first broker's id is the cluster's
    with raw_client(zk_connect) as zk:
        for path in znodes.PERSISTENT_PATHS:
            assert zk.exists(path) is not None, path
        data, _ = zk.get(znodes.CLUSTER_ID)
        assert data == b'{"version":"1","id":"' + first.cluster_id.encode() + b'"}'


def test_registration_is_ephemeral_and_refuses_a_second_live_broker_with_the_same_id(
        stores: Stores, zk_connect: str) -> None:
    store = stores.open(1)
    epoch = store.register_broker(registration(1, rack="r1"))
    with raw_client(zk_connect) as zk:
        data, stat = zk.get("/brokers/ids/1")
        assert stat.ephemeralOwner == store.session.session_id
        assert stat.czxid == epoch
        read = znodes.decode_broker(1, data)
        assert read == dataclasses.replace(registration(1, rack="r1"),
                                           timestamp_ms=read.timestamp_ms)
        assert data.startswith(b'{"features":{},"listener_security_protocol_map":')
        assert store.live_brokers()[1].rack == "r1"
        with pytest.raises(ZkStoreError, match="already registered"):
            stores.open(11).register_broker(registration(1))
        store.close()
        eventually(lambda: zk.exists("/brokers/ids/1") is None, what="registration gone")


def test_two_brokers_race_for_controller_and_the_other_takes_over(stores: Stores) -> None:
    one, two = stores.open(1), stores.open(2)
    elections = [ControllerElection(one), ControllerElection(two)]
    for election in elections:
        election.start()
    for election in elections:
        assert election.wait(lambda e: e.controller_id in (1, 2), 30)
    winners = [e for e in elections if e.is_controller]
    assert len(winners) == 1
    winner = winners[0]
    loser = elections[1] if winner is elections[0] else elections[0]
    assert winner.lease is not None and winner.lease.epoch == 1
    assert loser.controller_id == winner.lease.broker_id
    (one if winner is elections[0] else two).close()
    assert loser.wait(lambda e: e.is_controller, 30)
    assert loser.lease is not None and loser.lease.epoch == 2


def test_expired_session_steps_down_and_registers_again(
        stores: Stores, zookeeper: ZooKeeperServer, zk_connect: str) -> None:
    """A network cut longer than the session timeout: the server expires the session."""
    chroot = zk_connect[len(zookeeper.address):]
    proxy = TcpProxy(zookeeper.port)
    try:
        cut_off = stores.open(1, connect=f"127.0.0.1:{proxy.port}{chroot}",
                              session_timeout_ms=3000)
        cut_off.register_broker(registration(1))
        first = ControllerElection(cut_off)
        first.start()
        assert first.wait(lambda e: e.is_controller, 30)
        other = stores.open(2)
        other.register_broker(registration(2))
        second = ControllerElection(other)
        second.start()
        assert second.wait(lambda e: e.controller_id == 1, 30)
        old_session = cut_off.session.session_id

        proxy.cut()
        # The server expires the session: its ephemeral znodes go, broker 2 is elected.
        assert second.wait(lambda e: e.is_controller, 30)
        assert second.lease is not None and second.lease.epoch == 2
        assert 1 not in other.live_brokers()

        proxy.heal()
        # Broker 1 learns its session expired, steps down and comes back as a follower.
        assert first.wait(lambda e: not e.is_controller and e.controller_id == 2, 30)
        eventually(lambda: 1 in other.live_brokers(), what="broker 1 registered again")
        assert cut_off.session.session_id != old_session
        with raw_client(zk_connect) as zk:
            _, stat = zk.get("/brokers/ids/1")
            assert stat.ephemeralOwner == cut_off.session.session_id
    finally:
        proxy.close()


def test_registration_survives_a_zookeeper_restart(stores: Stores, zookeeper: ZooKeeperServer,
                                                  zk_connect: str) -> None:
    store = stores.open(1, session_timeout_ms=20_000)
    store.register_broker(registration(1))
    session = store.session.session_id
    zookeeper.restart()
    # Sessions are in ZooKeeper's log: the same session resumes and its znode is still there.
    eventually(lambda: store.client.connected, what="store reconnected")
    assert store.session.session_id == session
    with raw_client(zk_connect) as zk:
        _, stat = zk.get("/brokers/ids/1")
        assert stat.ephemeralOwner == session
    assert store.live_brokers().keys() == {1}


def test_every_store_follows_the_live_brokers_and_their_epochs(stores: Stores) -> None:
    watcher = stores.open(9)
    eventually(lambda: watcher.brokers() == {}, what="no broker yet")
    one = stores.open(1)
    epoch = one.register_broker(registration(1, rack="r1"))
    eventually(lambda: 1 in watcher.brokers(), what="broker 1 seen by the watch")
    assert watcher.brokers()[1].rack == "r1"
    assert watcher.broker_epochs() == {1: epoch}
    one.close()
    eventually(lambda: watcher.brokers() == {}, what="broker 1 gone from the watch")


def test_paused_zookeeper_answers_nothing_until_resumed(zookeeper: ZooKeeperServer) -> None:
    zookeeper.pause()
    try:
        assert four_letter_word(zookeeper.port, "ruok", timeout=1.0) == ""
    finally:
        zookeeper.resume()
    eventually(lambda: four_letter_word(zookeeper.port, "ruok") == "imok", what="imok")
