"""The seed corpus: valid requests for every API key and version the broker advertises.

Each seed is a whole frame (size prefix, request header, body) built from kio's generated
request dataclasses and written with kio's entity writer, so it is valid by construction and
independent of how the broker decodes it. Field values are drawn from a seeded
``random.Random``: small and boundary integers, a few topic and group names the fuzzing broker
knows (so handlers go past "unknown topic"), short timeouts (so long polls end quickly), real
record batches, and ``None`` wherever the schema allows null, because handlers must cope with
every value a request can legally hold.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.serial import entity_writer
from kio.static.primitive import Records

from moldau.protocol.apis import ALTER_CLIENT_QUOTAS, SUPPORTED
from moldau.protocol.schemas import request_schema as load_request_schema
from tests.unit.batchgen import simple_batch

#: Topics and groups the fuzz requests name. The fuzz driver creates the topics first; the
#: verification producer and consumer use names outside these pools, so fuzzing cannot touch
#: their records or offsets.
TOPICS = ("fuzz-t0", "fuzz-t1", "fuzz-t2", "fuzz-new")
GROUPS = ("fuzz-g0", "fuzz-g1", "")
STRINGS = ("", "x", "fuzz", "range", "consumer", "cleanup.policy", "retention.ms", "1000")
INTS = (0, 0, 0, 1, 1, 2, 3, -1, -1, -2, 7, 100)
BOUNDARY_INTS = (2**31 - 1, -(2**31), 2**15 - 1, 2**63 - 1, -(2**63), 127, -128, 255)


@dataclass(frozen=True, slots=True)
class Seed:
    """One valid request frame and where its parts start (for targeted mutations)."""

    api_key: int
    version: int
    frame: bytes
    header_end: int  # offset (in ``frame``) of the first body byte
    flexible: bool
    expects_response: bool


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   flexible: bool) -> bytes:
    """Request header v1 (v2 when flexible: an empty tagged-field section follows)."""
    raw = None if client_id is None else client_id.encode()
    head = struct.pack(">hhih", api_key, version, correlation_id, -1 if raw is None else len(raw))
    head += raw or b""
    return head + (b"\x00" if flexible else b"")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_array(hint: Any) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_is_array(a) for a in typing.get_args(hint))
    return typing.get_origin(hint) is tuple


def _clamp(value: int, cls: type) -> int:
    low = getattr(cls, "__low__", None)
    high = getattr(cls, "__high__", None)
    if low is not None and value < low:
        return int(low)
    if high is not None and value > high:
        return int(high)
    return value


class RequestGenerator:
    """Fills kio request dataclasses with valid, seeded values."""

    def __init__(self, rng: random.Random, big: int = 0) -> None:
        self.rng = rng
        #: When set, arrays of partitions (or top-level arrays of topics, groups, resources
        #: without partitions inside) get this many elements: requests whose handling scales
        #: with their size, to find work that stalls the event loop.
        self.big = big

    def value(self, hint: Any, name: str, depth: int) -> Any:
        rng = self.rng
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(hint) if a is not type(None)]
            if rng.random() < 0.25 and not (self.big and typing.get_origin(options[0])):
                return None
            return self.value(options[0], name, depth)
        if origin is tuple:
            (item, _ellipsis) = typing.get_args(hint)
            count = rng.choice((0, 1, 1, 1, 2, 3)) if depth < 3 else rng.choice((0, 1))
            if self.big:
                count = self.big if self._scales(item, name, depth) else 1
            return tuple(self.value(item, name, depth + 1) for _ in range(count))
        if dataclasses.is_dataclass(hint):
            return self.entity(typing.cast(type, hint), depth + 1)
        return self.scalar(hint, name)

    def _scales(self, item: Any, name: str, depth: int) -> bool:
        if "partition" in name:
            return True
        if depth > 0:
            return False
        if not dataclasses.is_dataclass(item):
            return True
        return not any(_is_array(h) for h in _hints(typing.cast(type, item)).values())

    def scalar(self, hint: Any, name: str) -> Any:
        rng = self.rng
        if hint is bool:
            return rng.random() < 0.5
        if isinstance(hint, type) and issubclass(hint, Records):
            return hint(simple_batch(rng.choice((1, 1, 3)), tag=rng.randrange(256)))
        if hint is bytes:
            return rng.choice((b"", b"\x00", rng.randbytes(rng.randrange(1, 40))))
        if hint is uuid.UUID:
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))))
        if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
            # Timeouts and waits: short, so that long polls and joins end quickly.
            ms = rng.choice((0, 1, 10, 100, -1))
            return hint.parse(datetime.timedelta(milliseconds=ms))
        if isinstance(hint, type) and issubclass(hint, str):
            if "topic" in name or name == "name":
                pool: tuple[str, ...] = TOPICS
            elif "group" in name:
                pool = GROUPS
            else:
                pool = STRINGS
            return hint(rng.choice(pool))
        if isinstance(hint, type) and issubclass(hint, float):  # quota values
            return hint(rng.choice((0.0, 1.0, 1.5, -1.0, 1048576.0, 1e300, -1e300)))
        if isinstance(hint, type) and issubclass(hint, int):
            if name == "acks":
                raw = rng.choice((-1, 1, 1, 0, 2))
            elif rng.random() < 0.9:
                raw = rng.choice(INTS)
            else:
                raw = rng.choice(BOUNDARY_INTS)
            return hint(_clamp(raw, hint))
        raise TypeError(f"no generator for {hint!r} ({name})")

    def entity(self, cls: type, depth: int = 0) -> Any:
        hints = _hints(cls)
        fields = {f.name: self.value(hints[f.name], f.name, depth)
                  for f in dataclasses.fields(cls)}
        return cls(**fields)


@cache
def _writer(cls: type) -> Callable[..., Any]:
    return entity_writer(cls)


def encode(request: Any) -> bytes:
    buf = io.BytesIO()
    _writer(type(request))(buf, request)
    return buf.getvalue()


def advertised() -> list[tuple[int, int]]:
    """Every (api key, version) the broker advertises in ApiVersions."""
    return [(r.key, v) for r in SUPPORTED.values()
            for v in range(r.min_version, r.max_version + 1)]


def build_seed(gen: RequestGenerator, api_key: int, version: int, correlation_id: int) -> Seed:
    cls = load_request_schema(api_key, version)
    request = gen.entity(cls)
    if api_key == ALTER_CLIENT_QUOTAS:
        # A random quota on a default entity would (rightly) throttle the fuzz clients
        # themselves for as long as it says: check the requests, store nothing.
        request = dataclasses.replace(request, validate_only=True)
    flexible = bool(cls.__flexible__)
    client = gen.rng.choice(("fuzz", "fuzz-client", None, ""))
    head = request_header(api_key, version, correlation_id, client, flexible)
    payload = head + encode(request)
    # Produce with acks=0 gets no answer, by design.
    expects = not (api_key == 0 and getattr(request, "acks", 1) == 0)
    return Seed(api_key, version, struct.pack(">i", len(payload)) + payload, 4 + len(head),
                flexible, expects)


#: APIs whose big requests the fuzz mix sends; partition creation (CreateTopics,
#: CreatePartitions) is left out on purpose: thousands of new partitions per frame would
#: exhaust file descriptors long before they tell anything about the other handlers.
BIG_APIS = (0, 1, 2, 3, 8, 9, 15, 16, 20, 21, 23, 32, 35, 42, 47)


def build_big_corpus(seed: int, elements: int = 5000, skip: frozenset[int] = frozenset()
                     ) -> list[Seed]:
    """One request per API in :data:`BIG_APIS` (its newest version) with ``elements``-long
    arrays, reproducible."""
    gen = RequestGenerator(random.Random(seed), big=elements)
    return [build_seed(gen, key, SUPPORTED[key].max_version, 1) for key in BIG_APIS
            if key not in skip]


def build_corpus(seed: int, variants: int = 4, skip: frozenset[int] = frozenset()
                 ) -> list[Seed]:
    """``variants`` random valid requests for each advertised API version, reproducible.

    ``skip``: API keys left out (to fuzz the rest while a known bug in one is being fixed).
    """
    gen = RequestGenerator(random.Random(seed))
    corpus = []
    correlation = 0
    for api_key, version in advertised():
        if api_key in skip:
            continue
        for _ in range(variants):
            correlation += 1
            corpus.append(build_seed(gen, api_key, version, correlation))
    return corpus
