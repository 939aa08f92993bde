"""Benchmarks: throughput and latency, printed as JSON. Never part of ``make test``."""
