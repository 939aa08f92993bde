"""An encoded response body: bytes and file ranges, sent in order after a size prefix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class FileRange(Protocol):
    """A range of a segment file (``moldau.log`` FileSlice satisfies this)."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...

    def read(self) -> bytes: ...


@dataclass(slots=True)
class Response:
    parts: list[bytes | FileRange]
    size: int

    @classmethod
    def of_bytes(cls, *chunks: bytes) -> Response:
        return cls(list(chunks), sum(len(c) for c in chunks))
