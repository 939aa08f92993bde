"""A raw ApiVersions v0 request, to learn which APIs a broker answers before using them.

The group workloads need FindCoordinator and JoinGroup. Asking a broker that lacks them through
confluent-kafka only shows up as a consumer that never gets an assignment (a timeout, not an
error), so the harness asks the broker directly. Version 0 of the request has the same layout
on every broker, which keeps this independent of any codec.
"""

from __future__ import annotations

import socket
import struct

from tests.helpers.sockets import read_exact

API_KEY_FIND_COORDINATOR = 10
API_KEY_JOIN_GROUP = 11
_API_VERSIONS = 18



def api_versions(host: str, port: int, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """Map api key -> (min version, max version) as advertised by the broker."""
    client_id = b"moldau-bench"
    body = struct.pack(">hhih", _API_VERSIONS, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", read_exact(sock, 4))
        payload = read_exact(sock, size)
    _correlation, error, count = struct.unpack_from(">ihi", payload, 0)
    if error != 0:
        raise RuntimeError(f"ApiVersions answered error code {error}")
    versions = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", payload, 10 + 6 * i)
        versions[key] = (lo, hi)
    return versions


def supports_groups(host: str, port: int) -> bool:
    """True when the broker advertises both FindCoordinator and JoinGroup."""
    versions = api_versions(host, port)
    return API_KEY_FIND_COORDINATOR in versions and API_KEY_JOIN_GROUP in versions
