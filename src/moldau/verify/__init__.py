"""``moldau verify``: a workload and a checker for any Kafka-compatible cluster.

The workload (``workload.py``) only talks to the cluster as a client (confluent-kafka), so
the same run can be pointed at moldau, Apache Kafka or Redpanda. Everything it observes is
written into a :class:`~moldau.verify.history.History`; ``checker.py`` analyses a history
without any broker, which is what makes the checker itself testable; ``report.py`` renders
the verdict; ``nemesis.py`` is the seam where faults are injected.
"""
