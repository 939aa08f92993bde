"""JSON bytes exactly as Kafka 3.9 writes its znodes: compact, keys in Kafka's map order.

Kafka encodes znode data with Jackson over Scala (2.13) and Java maps, so the key order of a
znode is the iteration order of the map Kafka built, not the order in its source. Readers do
not care (Kafka parses JSON), but writing the same bytes lets anyone diff `zookeeper-shell get`
output of a moldau cluster against a Kafka one, and lets tests compare byte for byte. The
three orders used are reproduced here from the collections' published algorithms:

- Scala ``immutable.Map`` of up to 4 entries (Map1..Map4): insertion order;
  with 5 or more a CHAMP trie (``immutable.HashMap``) ordered by the improved hash;
- Scala ``mutable.HashMap``: by bucket (improved hash masked by the table size), then by hash;
- ``java.util.Properties`` (a ConcurrentHashMap inside): by bucket, insertion order in a bucket.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit value (over UTF-16 code units)."""
    data = text.encode("utf-16-le")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & _MASK
    return h


def _signed(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def _champ_improve(h: int) -> int:
    """``scala.collection.Hashing.improve``: the hash an immutable.HashMap indexes by."""
    h = (h + (~(h << 9) & _MASK)) & _MASK
    h ^= h >> 14
    h = (h + (h << 4)) & _MASK
    return h ^ (h >> 10)


def _champ_order(keys: Sequence[str], shift: int = 0) -> list[str]:
    """Iteration order of a CHAMP node: its own entries by slot, then its sub-nodes by slot."""
    if shift >= 32 or len(keys) < 2:
        return list(keys)  # a full-hash collision node keeps insertion order
    slots: dict[int, list[str]] = {}
    for key in keys:
        slots.setdefault((_champ_improve(java_string_hash(key)) >> shift) & 31, []).append(key)
    ordered = [group[0] for _, group in sorted(slots.items()) if len(group) == 1]
    for _, group in sorted(slots.items()):
        if len(group) > 1:
            ordered += _champ_order(group, shift + 5)
    return ordered


def scala_immutable_order(keys: Sequence[str]) -> list[str]:
    """Key order of ``Map(k1 -> v1, ...)`` in Scala 2.13."""
    return list(keys) if len(keys) <= 4 else _champ_order(keys)


def _mutable_table_size(initial: int, count: int) -> int:
    """Table length of a Scala 2.13 mutable.HashMap holding ``count`` keys after growth."""
    size = initial
    for n in range(count):
        if n + 1 >= int(size * 0.75):
            size *= 2
    return size


def _scala_table_size_for(capacity: int) -> int:
    return 1 << max(capacity - 1, 4).bit_length()


def scala_mutable_order(keys: Sequence[str], *, built_with: int = 0) -> list[str]:
    """Key order of a Scala 2.13 ``mutable.HashMap``.

    ``built_with`` is the number of pairs given to ``mutable.Map(...)`` at construction (it
    sizes the table); 0 means ``mutable.Map()`` (empty, table of 16) and keys added later.
    """
    initial = _scala_table_size_for(int((built_with + 1) / 0.75)) if built_with else 16
    size = _mutable_table_size(initial, len(keys))

    def improved(key: str) -> int:
        h = java_string_hash(key)
        return h ^ (h >> 16)

    return sorted(keys, key=lambda k: (improved(k) & (size - 1), _signed(improved(k))))


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """Key order of ``new Properties()`` filled with ``keys`` in this order (Java 9+).

    The table starts at 16 bins and doubles once it holds 3/4 of its size; a resize splits
    each bin keeping its last run of same-side nodes and putting the others before it in
    reverse, as ConcurrentHashMap.transfer does.
    """
    size = 16
    bins: list[list[tuple[int, str]]] = [[] for _ in range(size)]
    count = 0
    for key in keys:
        h = java_string_hash(key)
        h = (h ^ (h >> 16)) & 0x7FFFFFFF
        bucket = bins[h & (size - 1)]
        if any(k == key for _, k in bucket):
            continue
        bucket.append((h, key))
        count += 1
        if count >= size - (size >> 2):
            bins = _chm_transfer(bins, size)
            size *= 2
    return [key for bucket in bins for _, key in bucket]


def _chm_transfer(bins: list[list[tuple[int, str]]], n: int) -> list[list[tuple[int, str]]]:
    grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
    for i, nodes in enumerate(bins):
        if not nodes:
            continue
        last_run = 0
        for j in range(1, len(nodes)):
            if (nodes[j][0] & n) != (nodes[j - 1][0] & n):
                last_run = j
        run = nodes[last_run:]
        low = run if (run[0][0] & n) == 0 else []
        high = run if low == [] else []
        for node in nodes[:last_run]:
            if node[0] & n == 0:
                low = [node, *low]
            else:
                high = [node, *high]
        grown[i], grown[i + n] = list(low), list(high)
    return grown


def ordered(mapping: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """A dict of ``mapping`` with its keys in ``order`` (for json.dumps)."""
    return {key: mapping[key] for key in order}


def dumps(value: Any) -> bytes:
    """Jackson's default output: no spaces, non-ASCII as UTF-8, ``/`` not escaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
