"""PostgreSQL tables of the activity pipeline, written by upsert so replays cannot double count.

Each streaming micro-batch (update mode) carries the *current* totals of the windows it
touched, not increments. Writing them with ``INSERT ... ON CONFLICT DO UPDATE`` keyed by
(window, page) therefore gives the same table however often a batch is replayed after a
crash. The ``batch_id`` guard keeps an older batch replayed late from overwriting a newer
total. A window total across all pages has page NULL in the job; here it goes to its own
table, because a primary key column cannot be NULL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg

SCHEMA = """
CREATE TABLE IF NOT EXISTS page_view_counts (
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL,
    page         text        NOT NULL,
    views        bigint      NOT NULL,
    unique_users bigint      NOT NULL,
    batch_id     bigint      NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (window_start, page)
);
CREATE TABLE IF NOT EXISTS window_totals (
    window_start timestamptz NOT NULL PRIMARY KEY,
    window_end   timestamptz NOT NULL,
    views        bigint      NOT NULL,
    unique_users bigint      NOT NULL,
    batch_id     bigint      NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
"""

_UPSERT_PAGE = """
INSERT INTO page_view_counts (window_start, window_end, page, views, unique_users, batch_id)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (window_start, page) DO UPDATE
SET window_end = EXCLUDED.window_end, views = EXCLUDED.views,
    unique_users = EXCLUDED.unique_users, batch_id = EXCLUDED.batch_id, updated_at = now()
WHERE page_view_counts.batch_id <= EXCLUDED.batch_id
"""

_UPSERT_TOTAL = """
INSERT INTO window_totals (window_start, window_end, views, unique_users, batch_id)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (window_start) DO UPDATE
SET window_end = EXCLUDED.window_end, views = EXCLUDED.views,
    unique_users = EXCLUDED.unique_users, batch_id = EXCLUDED.batch_id, updated_at = now()
WHERE window_totals.batch_id <= EXCLUDED.batch_id
"""


@dataclass(frozen=True)
class WindowCount:
    """One aggregated row; ``page`` None is the total over all pages."""

    window_start: datetime
    window_end: datetime
    page: str | None
    views: int
    unique_users: int


def create_schema(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)


def upsert_counts(dsn: str, batch_id: int, rows: Iterable[WindowCount]) -> int:
    """Write one micro-batch's totals in one transaction; returns how many rows it had."""
    pages: list[Sequence[object]] = []
    totals: list[Sequence[object]] = []
    for r in rows:
        if r.page is None:
            totals.append((r.window_start, r.window_end, r.views, r.unique_users, batch_id))
        else:
            pages.append((r.window_start, r.window_end, r.page, r.views, r.unique_users,
                          batch_id))
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
        if pages:
            cursor.executemany(_UPSERT_PAGE, pages)
        if totals:
            cursor.executemany(_UPSERT_TOTAL, totals)
    return len(pages) + len(totals)
