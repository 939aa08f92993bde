"""Bad input to the REST Proxy gets Confluent's status and error code, and the proxy keeps
serving: after every case, a produce from another client still works."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import create_topic

JSON_V2 = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"


@pytest.fixture(scope="module")
def healthy_topic(broker: Any) -> str:
    name = "rest-bad-input-healthy"
    create_topic(broker.bootstrap, name)
    return name


@pytest.fixture
def still_serving(rest: httpx.Client, healthy_topic: str) -> Iterator[None]:
    yield
    with httpx.Client(base_url=rest.base_url, timeout=30) as other:
        answer = other.post(f"/topics/{healthy_topic}", headers={"Content-Type": JSON_V2},
                            json={"records": [{"value": "still here"}]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["offsets"][0]["error_code"] is None


def error_of(answer: httpx.Response) -> tuple[int, int]:
    return answer.status_code, answer.json()["error_code"]


@pytest.mark.usefixtures("still_serving")
def test_malformed_json(rest: httpx.Client, healthy_topic: str) -> None:
    answer = rest.post(f"/topics/{healthy_topic}", headers={"Content-Type": JSON_V2},
                       content=b'{"records": [{"value": ')
    assert error_of(answer) == (400, 400)
    v3 = rest.post("/v3/clusters/x/topics", content=b"{nope",
                   headers={"Content-Type": "application/json"})
    assert v3.status_code == 404  # the cluster is checked first, as the path names it


@pytest.mark.usefixtures("still_serving")
def test_unknown_content_type(rest: httpx.Client, healthy_topic: str) -> None:
    for content_type in ("text/plain", "application/vnd.kafka.xml.v2+json",
                         "application/vnd.kafka.json.v1+json"):
        answer = rest.post(f"/topics/{healthy_topic}", headers={"Content-Type": content_type},
                           content=b'{"records": [{"value": 1}]}')
        assert error_of(answer) == (415, 415), content_type
    answer = rest.post("/consumers/some-group", headers={"Content-Type": "text/csv"},
                       content=b"a,b")
    assert error_of(answer) == (415, 415)


@pytest.mark.usefixtures("still_serving")
def test_schema_format_without_schema(rest: httpx.Client, healthy_topic: str) -> None:
    body = {"records": [{"key": 1, "value": {"a": 1}}]}
    answer = rest.post(f"/topics/{healthy_topic}",
                       headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
                       json={**body, "value_schema_id": 1})
    assert error_of(answer) == (422, 42201)
    answer = rest.post(f"/topics/{healthy_topic}",
                       headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
                       json={**body, "key_schema_id": 1})
    assert error_of(answer) == (422, 42202)


@pytest.mark.usefixtures("still_serving")
def test_topic_or_partition_that_does_not_exist(rest: httpx.Client, healthy_topic: str,
                                                cluster_id: str) -> None:
    records = {"records": [{"value": 1}]}
    assert error_of(rest.post("/topics/no-such-topic", headers={"Content-Type": JSON_V2},
                              json=records)) == (404, 40401)
    assert error_of(rest.get("/topics/no-such-topic")) == (404, 40401)
    assert error_of(rest.post(f"/topics/{healthy_topic}/partitions/9",
                              headers={"Content-Type": JSON_V2}, json=records)) == (404, 40402)
    assert error_of(rest.get(f"/topics/{healthy_topic}/partitions/9")) == (404, 40402)
    assert error_of(rest.post(f"/topics/{healthy_topic}", headers={"Content-Type": JSON_V2},
                              json={"records": [{"value": 1, "partition": 9}]})) == (404, 40402)
    v3 = rest.post(f"/v3/clusters/{cluster_id}/topics/no-such-topic/records",
                   json={"value": {"type": "JSON", "data": 1}})
    assert error_of(v3) == (404, 404)


@pytest.mark.usefixtures("still_serving")
def test_oversized_body(rest: httpx.Client, healthy_topic: str) -> None:
    limit = 10 * 1024 * 1024
    answer = rest.post(f"/topics/{healthy_topic}", headers={"Content-Type": JSON_V2},
                       content=b" " * (limit + 1))
    assert error_of(answer) == (413, 413)

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(11):
            yield b" " * (1024 * 1024)

    answer = rest.post(f"/topics/{healthy_topic}", headers={"Content-Type": JSON_V2},
                       content=chunked())
    assert error_of(answer) == (413, 413)


@pytest.mark.usefixtures("still_serving")
def test_bad_payloads(rest: httpx.Client, healthy_topic: str) -> None:
    binary = {"Content-Type": "application/vnd.kafka.binary.v2+json"}
    assert error_of(rest.post(f"/topics/{healthy_topic}", headers=binary,
                              json={"records": [{"value": "not base64!"}]})) == (422, 42205)
    assert error_of(rest.post(f"/topics/{healthy_topic}", headers=binary,
                              json={"values": []})) == (422, 422)
    assert error_of(rest.post(f"/topics/{healthy_topic}", headers=binary,
                              json=[1, 2])) == (422, 422)


@pytest.mark.usefixtures("still_serving")
def test_consumer_instance_mistakes(rest: httpx.Client, healthy_topic: str) -> None:
    headers = {"Content-Type": V2}
    assert error_of(rest.get("/consumers/g/instances/nobody/subscription")) == (404, 40403)
    assert error_of(rest.delete("/consumers/g/instances/nobody")) == (404, 40403)
    assert error_of(rest.post("/consumers/g", headers=headers,
                              json={"format": "xml"})) == (422, 42204)
    assert error_of(rest.post("/consumers/g", headers=headers,
                              json={"auto.offset.reset": "sideways"})) == (422, 42204)
    created = rest.post("/consumers/bad-input-group", headers=headers,
                        json={"name": "mistakes", "format": "binary"})
    base = "/consumers/bad-input-group/instances/mistakes"
    assert created.status_code == 200
    try:
        wrong_format = rest.get(f"{base}/records", headers={"Accept": JSON_V2})
        assert error_of(wrong_format) == (406, 40601)
        assert error_of(rest.post(f"{base}/subscription", headers=headers,
                                  json={"topics": []})) == (422, 422)
        assert error_of(rest.post(f"{base}/positions", headers=headers,
                                  json={"offsets": [{"topic": healthy_topic}]})) == (422, 422)
        unassigned = rest.post(f"{base}/positions", headers=headers, json={
            "offsets": [{"topic": healthy_topic, "partition": 0, "offset": 0}]})
        assert error_of(unassigned) == (409, 40903)
    finally:
        rest.delete(base)


@pytest.mark.usefixtures("still_serving")
def test_unknown_path_and_method(rest: httpx.Client) -> None:
    assert error_of(rest.get("/no/such/path")) == (404, 404)
    assert error_of(rest.put("/topics")) == (405, 405)
