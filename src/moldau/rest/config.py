"""What a REST Proxy process is configured with (``moldau rest`` options)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_LISTEN = "127.0.0.1:8082"
# Confluent's consumer.instance.timeout.ms default: an idle consumer instance is closed
# (leaving its group) after five minutes without a request.
DEFAULT_INSTANCE_TIMEOUT_MS = 300_000
# Request bodies above this are refused with 413 before they are parsed (Confluent's proxy
# has no default limit; a limit keeps one client from filling the proxy's memory).
DEFAULT_MAX_REQUEST_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class RestConfig:
    bootstrap: str
    schema_registry_url: str | None = None
    instance_timeout_ms: int = DEFAULT_INSTANCE_TIMEOUT_MS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    request_timeout_s: float = 30.0

    def client_config(self) -> dict[str, object]:
        """librdkafka settings every client of the proxy shares."""
        return {"bootstrap.servers": self.bootstrap, "client.id": "moldau-rest"}
