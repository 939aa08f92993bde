"""A Schema Registry compatible with Confluent's REST API, storing in ``_schemas``.

A client of the broker like the CLI: it reaches the broker only through confluent-kafka
and never imports broker internals (see docs/architecture.md, "Schema Registry").
"""
