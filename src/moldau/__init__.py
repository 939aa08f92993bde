"""moldau: a small-footprint, Kafka-compatible streaming platform."""

__version__ = "0.1.0"
