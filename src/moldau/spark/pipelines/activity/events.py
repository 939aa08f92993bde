"""Realistic page-view events: users with sessions walking a site, arriving from referrers.

Pages are drawn with a Zipf-like skew (the home page and a few products get most views),
a session's first page has an external referrer (search, social, newsletter or none) and
later pages have the previous page as referrer, as a browser would send. A seeded
:class:`random.Random` makes a run reproducible, which the tests rely on.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

SITE = "https://shop.example"
PAGES = (
    ["/", "/products", "/cart", "/checkout", "/search", "/about", "/blog", "/login"]
    + [f"/products/{n}" for n in range(1, 21)]
    + [f"/blog/post-{n}" for n in range(1, 6)]
)
EXTERNAL_REFERRERS = (
    None, None, "https://www.google.com/", "https://duckduckgo.com/",
    "https://twitter.com/", "https://news.ycombinator.com/", "https://newsletter.example/",
)
USER_AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/126.0 Safari/537.36",
)


@dataclass(frozen=True)
class PageView:
    """One event as it travels on the ``page-views`` topic (JSON, keyed by user)."""

    event_id: str
    user_id: str
    session_id: str
    page: str
    referrer: str | None
    timestamp: str  # ISO 8601, UTC, milliseconds
    user_agent: str

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


def iso_millis(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class _Session:
    user_id: str
    session_id: str
    user_agent: str
    last_page: str | None = None
    remaining: int = 0


class EventFactory:
    """Makes a stream of page views from ``users`` simulated visitors."""

    def __init__(self, seed: int = 0, users: int = 500) -> None:
        self.random = random.Random(seed)
        self.users = users
        self.sessions: dict[str, _Session] = {}
        self._page_weights = [1 / (rank + 1) for rank in range(len(PAGES))]

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.random.getrandbits(128), version=4))

    def _session(self) -> _Session:
        user_id = f"user-{self.random.randrange(self.users):05d}"
        session = self.sessions.get(user_id)
        if session is None or session.remaining <= 0:
            session = _Session(user_id, self._uuid(), self.random.choice(USER_AGENTS),
                               remaining=self.random.randint(1, 12))
            self.sessions[user_id] = session
        return session

    def next(self, moment: datetime) -> PageView:
        """The next page view, happening at ``moment``."""
        session = self._session()
        page = self.random.choices(PAGES, weights=self._page_weights)[0]
        referrer = (SITE + session.last_page if session.last_page is not None
                    else self.random.choice(EXTERNAL_REFERRERS))
        session.last_page = page
        session.remaining -= 1
        return PageView(self._uuid(), session.user_id, session.session_id, page, referrer,
                        iso_millis(moment), session.user_agent)

    def malformed(self) -> bytes:
        """Input the job must route to the dead-letter topic instead of failing on."""
        kinds = (
            b'{"user_id": "user-1", "page": "/", "timestamp": ',     # cut short
            b"not json at all",
            b'{"page": "/cart", "timestamp": "2024-01-01T00:00:00Z"}',  # no user
            b'{"user_id": "user-2", "page": "/", "timestamp": "yesterday"}',
            b"[1, 2, 3]",
            b"",
        )
        return self.random.choice(kinds)
