"""The exactly-once sink's options, parsed without Spark or a broker."""

from __future__ import annotations

import pytest

from moldau.spark.options import (
    DEFAULT_COMMITS_TOPIC,
    DEFAULT_TRANSACTIONAL_ID_PREFIX,
    OptionError,
    parse_sink_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_at_least_once_unless_asked() -> None:
    assert parse_sink_options(BASE).exactly_once is None
    assert parse_sink_options({**BASE, "exactlyOnce": "false"}).exactly_once is None


def test_exactly_once_defaults_and_overrides() -> None:
    eos = parse_sink_options({**BASE, "ExactlyOnce": "TRUE"}).exactly_once
    assert eos is not None
    assert eos.commits_topic == DEFAULT_COMMITS_TOPIC
    assert eos.transactional_id_prefix == DEFAULT_TRANSACTIONAL_ID_PREFIX
    assert eos.fail_task_once is None and eos.die_after_commit_once is None
    eos = parse_sink_options({**BASE, "exactlyOnce": "true", "commitsTopic": "commits",
                              "transactionalIdPrefix": "jobA-",
                              "moldau.test.failTaskOnce": "/tmp/x"}).exactly_once
    assert eos is not None
    assert (eos.commits_topic, eos.transactional_id_prefix, eos.fail_task_once) == \
        ("commits", "jobA-", "/tmp/x")


@pytest.mark.parametrize(("options", "message"), [
    ({"exactlyOnce": "yes"}, "'exactlyOnce' must be true or false"),
    ({"commitsTopic": "c"}, "'commitsTopic' needs option 'exactlyOnce'"),
    ({"transactionalIdPrefix": "p"}, "'transactionalIdPrefix' needs option 'exactlyOnce'"),
    ({"exactlyOnce": "true", "commitsTopic": " "}, "'commitsTopic' is empty"),
    ({"exactlyOnce": "true", "kafka.transactional.id": "t"}, "'kafka.transactional.id'"),
    ({"batchId": "3"}, "'batchId' needs option 'exactlyOnce'"),
    ({"exactlyOnce": "true", "batchId": "3"}, "'queryId' and 'batchId' go together"),
    ({"exactlyOnce": "true", "queryId": "q", "batchId": "-1"}, "'batchId' must be a batch id"),
])
def test_mistakes_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_sink_options({**BASE, **options})


def test_foreach_batch_names_its_stream_and_batch() -> None:
    eos = parse_sink_options({**BASE, "exactlyOnce": "true", "queryId": " q1 ",
                              "batchId": "12"}).exactly_once
    assert eos is not None
    assert (eos.query_id, eos.batch_id) == ("q1", 12)
