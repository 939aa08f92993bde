"""Kafka's rules for topic names."""

from __future__ import annotations

import re

from kio.schema.errors import ErrorCode

from .errors import ApiError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str | None) -> str:
    """Raise INVALID_TOPIC_EXCEPTION unless ``name`` is a legal Kafka topic name."""
    if not name:
        raise ApiError(ErrorCode.invalid_topic_exception, "Topic name is empty")
    if name in (".", ".."):
        raise ApiError(ErrorCode.invalid_topic_exception, f"Topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise ApiError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is longer than the maximum of {MAX_NAME_LENGTH} characters",
        )
    if not _LEGAL.match(name):
        raise ApiError(
            ErrorCode.invalid_topic_exception,
            f"Topic name {name!r} is illegal: only ASCII alphanumerics, '.', '_' and '-' allowed",
        )
    return name


def collision_key(name: str) -> str:
    """Kafka treats '.' and '_' as colliding because metric names cannot tell them apart."""
    return name.replace(".", "_")
