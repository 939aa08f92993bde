"""Mutations of valid request frames: what a broken or hostile client can send.

Every mutation takes a seed frame and a seeded ``random.Random`` and returns the bytes to
send plus what the sender should do next, so a run is reproducible from its seed. Kinds:

- ``valid``: the seed unchanged (handlers must answer every legal request);
- ``truncate``: the body cut short, the size prefix adjusted (a complete but short frame);
- ``bitflip``: 1-8 random bits flipped in the header or body;
- ``length_lie``: a size prefix that is larger (the frame never completes), smaller (the rest
  becomes the next "frame"), negative or beyond any limit;
- ``wrong_version``: the header names another version (or API key) than the body was built for;
- ``big``: a valid request with thousands of partitions (or topics, groups) from the big
  corpus, to find handlers whose synchronous work grows with the request;
- ``oversized_count``: a huge array/string count written where counts usually sit: the compact
  varint ``ff ff ff ff 0f``, int32 ``7f ff ff ff``, or ``80 00 00 00``.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from enum import Enum

from .corpus import Seed

_SIZE = struct.Struct(">i")
HUGE_COUNTS = (b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
               b"\xfe\xff\xff\xff\x07", b"\x00\x0f\x42\x41")


class After(Enum):
    """What the sender does once the bytes are written."""

    READ = "read"  # wait for one response (or the broker closing the connection)
    CLOSE = "close"  # close the connection: the frame cannot be answered
    NEXT = "next"  # send the next frame at once (no response is due)


@dataclass(frozen=True, slots=True)
class Mutant:
    kind: str
    data: bytes
    after: After


def _reframe(payload: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(payload)) + bytes(payload)


def valid(seed: Seed, rng: random.Random) -> Mutant:
    return Mutant("valid", seed.frame, After.READ if seed.expects_response else After.NEXT)


def truncate(seed: Seed, rng: random.Random) -> Mutant:
    payload = seed.frame[4:]
    cut = rng.randrange(0, len(payload)) if len(payload) > 1 else 0
    return Mutant("truncate", _reframe(payload[:cut]), After.READ)


def bitflip(seed: Seed, rng: random.Random) -> Mutant:
    payload = bytearray(seed.frame[4:])
    if not payload:
        return valid(seed, rng)
    body_start = seed.header_end - 4
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        # Mostly in the body: flipping the api key or version only tests the dispatcher.
        low = body_start if rng.random() < 0.8 and body_start < len(payload) else 0
        pos = rng.randrange(low, len(payload))
        payload[pos] ^= 1 << rng.randrange(8)
    return Mutant("bitflip", _reframe(payload), After.READ)


def length_lie(seed: Seed, rng: random.Random) -> Mutant:
    payload = seed.frame[4:]
    choice = rng.randrange(5)
    if choice == 0:  # longer than what follows: the broker waits for bytes that never come
        return Mutant("length_lie", _SIZE.pack(len(payload) + rng.randrange(1, 512)) + payload,
                      After.CLOSE)
    if choice == 1:  # shorter: the tail is read as the next frame's size and header
        size = rng.randrange(0, len(payload)) if payload else 0
        return Mutant("length_lie", _SIZE.pack(size) + payload, After.CLOSE)
    if choice == 2:
        return Mutant("length_lie", _SIZE.pack(-rng.randrange(1, 2**31)) + payload, After.READ)
    if choice == 3:
        return Mutant("length_lie", _SIZE.pack(2**31 - 1) + payload, After.READ)
    return Mutant("length_lie", _SIZE.pack(0), After.READ)


def wrong_version(seed: Seed, rng: random.Random) -> Mutant:
    payload = bytearray(seed.frame[4:])
    api_key, version = struct.unpack_from(">hh", payload, 0)
    roll = rng.random()
    if roll < 0.6:
        version = rng.choice((version - 1, version + 1, version + 2, 0, -1, 32767,
                              rng.randrange(0, 20)))
    elif roll < 0.9:
        api_key = rng.choice(sorted({0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 16, 18, 19, 22, 32, 37}))
    else:
        api_key = rng.choice((-1, 4, 5, 6, 7, 17, 24, 50, 1000, 32767))
    struct.pack_into(">hh", payload, 0, api_key, version)
    return Mutant("wrong_version", _reframe(payload), After.READ)


def oversized_count(seed: Seed, rng: random.Random) -> Mutant:
    payload = bytearray(seed.frame[4:])
    body_start = seed.header_end - 4
    huge = rng.choice(HUGE_COUNTS)
    if rng.random() < 0.6:  # counts sit near the start of a body more often than not
        pos = body_start + rng.randrange(0, min(24, max(1, len(payload) - body_start)))
    else:
        pos = rng.randrange(0, max(1, len(payload)))
    if rng.random() < 0.5:
        payload[pos:pos + len(huge)] = huge  # overwrite
    else:
        payload[pos:pos] = huge  # insert
    return Mutant("oversized_count", _reframe(payload), After.READ)


MUTATIONS = {
    "valid": valid,
    "truncate": truncate,
    "bitflip": bitflip,
    "length_lie": length_lie,
    "wrong_version": wrong_version,
    "oversized_count": oversized_count,
    "big": valid,  # see Mutator.next: drawn from the big corpus
}
#: How often each kind is picked (relative weights): about one frame in 600 is big.
DEFAULT_WEIGHTS: dict[str, float] = {"valid": 3, "truncate": 2, "bitflip": 4, "length_lie": 1,
                                     "wrong_version": 1, "oversized_count": 2, "big": 0.02}


class Mutator:
    """Picks a seed and a mutation kind per frame, from one seeded generator."""

    def __init__(self, corpus: list[Seed], rng: random.Random,
                 weights: dict[str, float] | None = None, big: list[Seed] | None = None
                 ) -> None:
        self.corpus = corpus
        self.big = big or []
        self.rng = rng
        chosen = DEFAULT_WEIGHTS if weights is None else weights
        self.kinds = [k for k, w in chosen.items() if w > 0]
        self.weights = [chosen[k] for k in self.kinds]

    def next(self) -> tuple[Seed, Mutant]:
        kind = self.rng.choices(self.kinds, self.weights)[0]
        if kind == "big":
            seed = self.rng.choice(self.big or self.corpus)
            return seed, Mutant("big", seed.frame, After.READ if seed.expects_response
                                else After.NEXT)
        seed = self.rng.choice(self.corpus)
        return seed, MUTATIONS[kind](seed, self.rng)
