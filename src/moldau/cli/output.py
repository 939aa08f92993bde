"""Consoles for tables and progress bars.

When stdout is not a terminal (a pipe, a test, a CI log) rich would assume 80 columns
and wrap long topic names or config values across lines, which breaks ``grep``; so
non-terminal output gets a wide fixed width and no colour codes.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table

_PIPE_WIDTH = 250


def _console(stream: TextIO) -> Console:
    if stream.isatty():
        return Console(file=stream)
    return Console(file=stream, width=_PIPE_WIDTH, no_color=True, highlight=False)


def stdout_console() -> Console:
    return _console(sys.stdout)


def stderr_console() -> Console:
    return _console(sys.stderr)


def table(*columns: str, title: str | None = None) -> Table:
    """A plain table whose cells never wrap, so every row stays on one line."""
    result = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    for name in columns:
        result.add_column(name, no_wrap=True, overflow="ignore")
    return result
