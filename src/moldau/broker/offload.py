"""Big responses are encoded on a worker thread, so that the event loop keeps serving others.

kio's encoder is pure Python, about 40 µs per partition of a response: 0.2-0.6 s for a
5,000-partition Produce, Fetch, OffsetCommit or Metadata answer, during which every other
client waits. On a worker thread the encoder holds the GIL for at most the interpreter's
switch interval (5 ms) at a time, and the loop runs in between. That is safe because a response
is an immutable kio dataclass and encoding touches no broker state. Small responses, nearly all
of them, are encoded inline: a thread hand-off costs more than encoding them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from functools import cache
from typing import Any

from ..protocol import codec

#: Responses with at least this many array elements (two levels deep: topics and their
#: partitions) are encoded on a thread; ~40 ms of encoding on an idle machine.
LARGE_RESPONSE_ELEMENTS = 1000


@cache
def _array_fields(cls: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if "tuple[" in str(f.type))


def array_elements(obj: Any, limit: int = LARGE_RESPONSE_ELEMENTS, depth: int = 2) -> int:
    """Elements in ``obj``'s arrays and its elements' arrays; stops counting at ``limit``."""
    count = 0
    cls: Any = type(obj)
    for name in _array_fields(cls):
        items = getattr(obj, name, None)
        if not items:
            continue
        count += len(items)
        if count >= limit:
            return count
        if depth > 1:
            for item in items:
                if dataclasses.is_dataclass(item):
                    count += array_elements(item, limit - count, depth - 1)
                    if count >= limit:
                        return count
    return count


async def encode_body(api_key: int, version: int, response: Any) -> bytes:
    """:func:`codec.encode_body`, on a worker thread when the response is big."""
    if array_elements(response) >= LARGE_RESPONSE_ELEMENTS:
        return await asyncio.to_thread(codec.encode_body, api_key, version, response)
    return codec.encode_body(api_key, version, response)
