"""Topic names that never collide between tests sharing one broker."""

from __future__ import annotations

import re
import secrets

_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]+")


def unique_topic_name(test_name: str, max_prefix: int = 80) -> str:
    """The test's name made legal for Kafka (``[A-Za-z0-9._-]``) plus a random suffix.

    The prefix says which test left a topic behind; the suffix keeps reruns and
    parametrised cases apart on a shared, long-lived broker.
    """
    prefix = _ILLEGAL.sub("-", test_name).strip("-.")[:max_prefix] or "topic"
    return f"{prefix}-{secrets.token_hex(4)}"
