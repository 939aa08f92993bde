"""A confluent-kafka client that a test drives from inside a lab host, one JSON line at a time.

A client library's sockets and threads must all live in the host's network namespace, which
only a separate process guarantees, so ``NetnsKafkaClient`` (tests/helpers/netns.py) starts
this script with ``ip netns exec`` and sends it requests on stdin; each answer is one JSON
line on stdout. The producer and consumer are kept between requests, so a test can see what
a long-lived client does across a partition and a heal (its TCP connections stay open).

Requests:
  {"op": "create_topic", "topic": T, "partitions": 1, "replication_factor": 1, "timeout": s}
      -> {"error": null | str}
  {"op": "produce", "topic": T, "values": [str, ...], "timeout": s}
      -> {"results": [{"offset": int | null, "partition": int | null, "error": null | str,
                       "value": str}]}   (in the order of the delivery reports)
  {"op": "consume", "topic": T, "count": n, "timeout": s}
      -> {"values": [str, ...], "records": [[partition, offset, str], ...]}   (from the
         beginning, all partitions; "until": V stops after reading the value V)
  {"op": "metadata", "topic": T, "timeout": s}
      -> {"brokers": [id, ...], "controller": id,
          "partitions": {"<p>": {"leader": id, "replicas": [...], "isr": [...]}}}
         (what the first broker that answers says; "error": str when none did)

Run as a script (not ``-m``): it imports nothing from the test package.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic


class Worker:
    def __init__(self, bootstrap: str, producer_config: dict[str, Any]) -> None:
        self.bootstrap = bootstrap
        self.producer_config = producer_config
        self._producer: Producer | None = None

    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                {"bootstrap.servers": self.bootstrap, "acks": "all", **self.producer_config}
            )
        return self._producer

    def create_topic(self, req: dict[str, Any]) -> dict[str, Any]:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        topic = NewTopic(req["topic"], req.get("partitions", 1), req.get("replication_factor", 1))
        future = admin.create_topics([topic], request_timeout=req.get("timeout", 10))
        try:
            future[req["topic"]].result(timeout=req.get("timeout", 10))
        except Exception as exc:  # the test decides whether this error matters
            return {"error": str(exc)}
        return {"error": None}

    def produce(self, req: dict[str, Any]) -> dict[str, Any]:
        producer = self.producer()
        results: list[dict[str, Any]] = []

        def report(err: KafkaError | None, msg: Any) -> None:
            value = msg.value().decode()
            if err is not None:
                results.append(
                    {"offset": None, "partition": None, "error": str(err), "value": value}
                )
            else:
                results.append(
                    {"offset": msg.offset(), "partition": msg.partition(), "error": None,
                     "value": value}
                )

        for value in req["values"]:
            producer.produce(req["topic"], value.encode(), on_delivery=report)
        deadline = time.monotonic() + req.get("timeout", 30)
        while len(results) < len(req["values"]) and time.monotonic() < deadline:
            producer.poll(0.1)
        while len(results) < len(req["values"]):
            results.append({"offset": None, "partition": None, "error": "no delivery report"})
        return {"results": results}

    def consume(self, req: dict[str, Any]) -> dict[str, Any]:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"netns-client-{time.monotonic_ns()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        values: list[str] = []
        records: list[list[Any]] = []
        try:
            consumer.subscribe([req["topic"]])
            deadline = time.monotonic() + req.get("timeout", 30)
            while len(values) < req["count"] and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                values.append(msg.value().decode())
                records.append([msg.partition(), msg.offset(), values[-1]])
                if values[-1] == req.get("until"):
                    break
        finally:
            consumer.close()
        return {"values": values, "records": records}

    def metadata(self, req: dict[str, Any]) -> dict[str, Any]:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        try:
            md = admin.list_topics(timeout=req.get("timeout", 10))
        except Exception as exc:  # no broker answered in time: the test decides
            return {"error": str(exc)}
        topic = md.topics.get(req["topic"])
        partitions = {} if topic is None else {
            str(p.id): {"leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
            for p in topic.partitions.values()}
        return {"brokers": sorted(md.brokers), "controller": md.controller_id,
                "partitions": partitions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--producer-config", default="{}", help="JSON object")
    args = parser.parse_args()
    worker = Worker(args.bootstrap, json.loads(args.producer_config))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        answer = getattr(worker, req["op"])(req)
        print(json.dumps(answer), flush=True)
    if worker._producer is not None:
        worker._producer.flush(5)


if __name__ == "__main__":
    main()
