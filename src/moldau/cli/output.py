"""Consoles and tables that never cut a value.

A table whose rows fit the terminal is printed as columns; when they do not, every row
is printed as ``Column: value`` lines instead (psql's expanded layout), so a narrow
terminal costs layout, never content: a shrunk column would otherwise show ``5`` for 55
or ``dem`` for ``demo``. Lines that are still longer than the terminal (one long value)
are written whole and left to the terminal to wrap.

When stdout is not a terminal (a pipe, a test, a CI log) rich would assume 80 columns;
non-terminal output gets a wide fixed width (or ``COLUMNS`` when set) and no colour codes,
so tables stay tables for ``grep``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

_PIPE_WIDTH = 250

Cell = str | Text


def _columns_env() -> int | None:
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def _console(stream: TextIO) -> Console:
    if stream.isatty():
        return Console(file=stream)
    width = _columns_env() or _PIPE_WIDTH
    return Console(file=stream, width=width, no_color=True, highlight=False)


def stdout_console() -> Console:
    return _console(sys.stdout)


def stderr_console() -> Console:
    return _console(sys.stderr)


def print_line(console: Console, text: str) -> None:
    """One line of plain text (never markup), written whole however long it is."""
    console.print(Text(text), soft_wrap=True)


@dataclass
class Rows:
    """A titled table of text cells, rendered by :func:`print_table`."""

    columns: tuple[str, ...]
    title: str | None = None
    rows: list[tuple[Text, ...]] = field(default_factory=list)

    def add_row(self, *cells: Cell) -> None:
        """Cells are taken as plain text: an id like ``[red]x`` prints as typed."""
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(tuple(c if isinstance(c, Text) else Text(c) for c in cells))


def table(*columns: str, title: str | None = None) -> Rows:
    return Rows(columns, title)


def _as_table(rows: Rows) -> Table:
    result = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in rows.columns:
        # Only reached when every cell fits; fold (never crop) should that ever change.
        result.add_column(name, no_wrap=True, overflow="fold")
    for row in rows.rows:
        result.add_row(*row)
    return result


def fits(console: Console, rows: Rows) -> bool:
    """True when the table at its natural width fits the console's width."""
    # Measured without the console's limit: a table measured within it reports the
    # shrunk widths it would squeeze itself into.
    unlimited = console.options.update_width(1_000_000)
    wanted = Measurement.get(console, unlimited, _as_table(rows)).maximum
    return wanted <= console.width


def print_table(console: Console, rows: Rows) -> None:
    """Columns when they fit, otherwise one ``Column: value`` line per cell."""
    if rows.title:
        print_line(console, rows.title)
    if fits(console, rows):
        console.print(_as_table(rows))
        return
    label_width = max(len(name) for name in rows.columns) + 1
    for number, row in enumerate(rows.rows, start=1):
        print_line(console, f"-[ {number} ]" + "-" * max(0, label_width - 4))
        for name, cell in zip(rows.columns, row, strict=True):
            console.print(Text(f"{name + ':':<{label_width}} ").append_text(cell),
                          soft_wrap=True)
