"""Per-client limits in one web process: open sockets, active runs and runs per minute per
client (its IP address), and a token bucket of messages per second per socket.

State lives in this process (N web processes allow N times the figures); every refusal is a
ProtocolError-style message with a `code` the client can act on.
"""
from __future__ import annotations

import time
from collections import defaultdict, deque

from .limits import ClientLimits


class LimitExceeded(Exception):
    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.message, self.code = message, code


class ClientLimiter:
    def __init__(self, limits: ClientLimits, clock=time.monotonic):
        self.limits, self.clock = limits, clock
        self.sockets: dict[str, int] = defaultdict(int)
        self.active: dict[str, int] = defaultdict(int)
        self.starts: dict[str, deque] = defaultdict(deque)

    def open_socket(self, client: str) -> None:
        if self.sockets[client] >= self.limits.sockets:
            raise LimitExceeded(f"too many open connections from this client (at most {self.limits.sockets})",
                                "too_many_sockets")
        self.sockets[client] += 1

    def close_socket(self, client: str) -> None:
        self.sockets[client] -= 1
        if self.sockets[client] <= 0:
            del self.sockets[client]

    def start_run(self, client: str) -> None:
        """Count a run that is about to be queued; LimitExceeded if over either limit."""
        now, starts = self.clock(), self.starts[client]
        while starts and now - starts[0] > 60:
            starts.popleft()
        if self.active[client] >= self.limits.queued_runs:
            raise LimitExceeded(f"this client already has {self.active[client]} run(s) waiting or running "
                                f"(at most {self.limits.queued_runs}); wait for one to finish", "too_many_runs")
        if len(starts) >= self.limits.runs_per_minute:
            wait = 60 - (now - starts[0])
            raise LimitExceeded(f"at most {self.limits.runs_per_minute} runs per minute; try again in {wait:.0f} s",
                                "rate_limited")
        starts.append(now)
        self.active[client] += 1

    def end_run(self, client: str) -> None:
        self.active[client] -= 1
        if self.active[client] <= 0:
            del self.active[client]


class TokenBucket:
    """`rate` messages per second on average, bursts up to `burst`."""

    def __init__(self, rate: float, burst: int, clock=time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


_limiter: ClientLimiter | None = None


def limiter(limits: ClientLimits) -> ClientLimiter:
    """The process's limiter (rebuilt when the settings' limits change, e.g. in tests)."""
    global _limiter
    if _limiter is None or _limiter.limits != limits:
        _limiter = ClientLimiter(limits)
    return _limiter
