"""The web console: server-rendered pages over a Kafka cluster, for people.

It is a Kafka client like the CLI (AdminClient and short-lived consumers through
confluent-kafka, reusing the CLI's helpers) and never imports broker internals, so it works
against any Kafka-compatible cluster. ``moldau console`` serves it; ``moldau top`` shares
its throughput sampler. Importing this package needs no web dependencies: only
:mod:`moldau.console.app` does (the ``console`` extra).
"""
