"""Website activity tracking: page views in, per-minute counts and an archive out.

``events`` makes page-view events, ``generator`` produces them to Kafka at a rate, ``job``
defines the Structured Streaming queries, ``store`` upserts the counts into PostgreSQL and
``runner`` wires it all for ``moldau pipeline activity``.
"""
