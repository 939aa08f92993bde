"""Just enough of the consumer protocol's subscription format to know a group's topics.

Members of a ``consumer`` group send their subscription as protocol metadata: an int16 version
followed, in every version, by an array of topic names (later versions append user data,
owned partitions, generation and rack, which the coordinator does not need). The broker
reads the topics for two Kafka rules: OffsetDelete refuses topics the group consumes, and a
Stable group's offsets of topics nobody subscribes to may expire.
"""

from __future__ import annotations

import struct

PROTOCOL_TYPE = "consumer"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics in one member's subscription; None when the bytes do not parse."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        (count,) = _I32.unpack_from(metadata, 2)
        if version < 0 or count < 0:
            return None
        pos = 6
        topics = set()
        for _ in range(count):
            (size,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if size < 0 or pos + size > len(metadata):
                return None
            topics.add(metadata[pos : pos + size].decode("utf-8"))
            pos += size
    except (struct.error, UnicodeDecodeError):
        return None
    return frozenset(topics)
