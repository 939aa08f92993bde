"""The arithmetic of Kafka's client quotas: a sampled rate, a token bucket, throttle times.

:class:`SampledRate` is Kafka's ``Rate`` over a ``SampledStat``: ``samples`` windows of
``window_ms`` each (``quota.window.num``, default 11, of ``quota.window.size.seconds``,
default 1). A value is added to the current window; a window that is ``window_ms`` old is
complete and the next one (the oldest, reset) starts; windows older than all of them together
are forgotten. The rate is the sum of the windows over the time they span, which counts as at
least ``samples - 1`` windows, so a client's first burst is spread over ten seconds instead of
looking infinite.

Over quota, the client is throttled for ``(rate - quota) / quota * span`` (Kafka's
QuotaUtils.throttleTime): the time after which the measured rate is back at the quota if the
client sends nothing meanwhile. Kafka bounds it to one window for request time only
(ClientRequestQuotaManager); byte rates are not bounded.

:class:`TokenBucket` is KIP-599's bucket for ``controller_mutation_rate``: ``quota`` tokens
a second, at most ``quota * samples * window`` of them; a mutation takes one token per
partition and may drive the bucket negative, after which the next one has to wait.
"""

from __future__ import annotations


class SampledRate:
    """A rate (units per second) over ``samples`` windows of ``window_ms``; times are ms."""

    __slots__ = ("_current", "_samples", "_starts", "_values", "_window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: float) -> None:
        self._samples = max(samples, 2)
        self._window_ms = max(window_ms, 1)
        #: Start time and sum of each window; grown up to ``samples`` windows.
        self._starts: list[float] = [now_ms]
        self._values: list[float] = [0.0]
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        i = self._current
        if now_ms >= self._starts[i] + self._window_ms:
            i = (i + 1) % self._samples
            if i == len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[i] = now_ms
                self._values[i] = 0.0
            self._current = i
        self._values[i] += value

    @property
    def last_window_ms(self) -> float:
        """When the window of the latest recording started (no recording since: idle)."""
        return self._starts[self._current]

    def _purge(self, now_ms: float) -> None:
        expire = self._samples * self._window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def span_ms(self, now_ms: float) -> float:
        """The time the windows cover, at least ``samples - 1`` windows (Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full = int(elapsed // self._window_ms)
        if full < self._samples - 1:
            elapsed += (self._samples - 1 - full) * self._window_ms
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        span = self.span_ms(now_ms)
        return sum(self._values) / (span / 1000.0)

    def throttle_ms(self, quota: float, now_ms: float, max_ms: int) -> int:
        """How long to hold the client back (0 when at or under ``quota``)."""
        span = self.span_ms(now_ms)
        observed = sum(self._values) / (span / 1000.0)
        if observed <= quota:
            return 0
        if quota <= 0:
            return max_ms
        return min(round((observed - quota) / quota * span), max_ms)


class TokenBucket:
    """KIP-599's bucket: ``quota`` tokens/s, bursts up to ``quota * samples * window``."""

    __slots__ = ("_last_ms", "tokens")

    def __init__(self, now_ms: float) -> None:
        self._last_ms = now_ms
        #: Tokens left; None until the first refill, which starts the bucket full.
        self.tokens: float | None = None

    def refill(self, quota: float, burst: float, now_ms: float) -> float:
        if self.tokens is None:
            self.tokens = burst
        else:
            elapsed_s = max(now_ms - self._last_ms, 0.0) / 1000.0
            self.tokens = min(burst, self.tokens + quota * elapsed_s)
        self._last_ms = now_ms
        return self.tokens

    def take(self, amount: float, quota: float, burst: float, now_ms: float) -> None:
        self.tokens = self.refill(quota, burst, now_ms) - amount

    def throttle_ms(self, quota: float, burst: float, now_ms: float) -> int:
        """How long until the bucket is no longer negative (0 when it is not)."""
        tokens = self.refill(quota, burst, now_ms)
        if tokens >= 0:
            return 0
        if quota <= 0:
            return 2**31 - 1
        return round(-tokens / quota * 1000)
