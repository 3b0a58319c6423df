"""Channel-layer configuration: the in-memory layer for one process, channels_redis for many.

channels_redis waits for messages with a blocking BZPOPMIN of `brpop_timeout` (5 s) seconds.
redis-py 8 gives every socket a default read timeout of 5 s, the same figure, so an idle
blocking pop timed out and killed the worker and every idle socket. Here the Redis socket
timeout is set explicitly and well above the blocking pop (checked by `check_redis_timeouts`
at start and by a test), whatever redis-py's default is.

`RedisLayer` is channels_redis' layer with one change: after each receive, channels_redis fires a
task that pops the received message's copy off a backup queue and never awaits it. When Redis goes
away at that moment the task dies with a ConnectionError that asyncio prints as "Task exception was
never retrieved" and a traceback, in a process that otherwise rides out the outage. Nothing is lost
there (a new Redis has no backup queue; a surviving one is cleaned by the next receive's script),
so our cleaner logs one line instead.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from channels_redis.core import RedisChannelLayer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LayerConfig:
    # Queued jobs wait on the "inference" channel while workers are busy: keep them far
    # longer than channels' 60 s default; let reply channels buffer a burst of frames.
    expiry_s: int = 900
    capacity: int = 1000
    socket_timeout_s: float = 20.0  # > channels_redis' 5 s blocking pop
    socket_connect_timeout_s: float = 5.0
    health_check_interval_s: int = 15

    def channel_layers(self, redis_url: str) -> dict:
        """The CHANNEL_LAYERS setting: Redis when a URL is given, else in-memory."""
        common = {"expiry": self.expiry_s, "capacity": self.capacity}
        if not redis_url:
            return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": common}}
        host = {"address": redis_url, "socket_timeout": self.socket_timeout_s,
                "socket_connect_timeout": self.socket_connect_timeout_s,
                "health_check_interval": self.health_check_interval_s, "socket_keepalive": True}
        return {"default": {"BACKEND": "playground.layer.RedisLayer", "CONFIG": {"hosts": [host], **common}}}


def check_redis_timeouts(layer) -> None:
    """Refuse a Redis layer whose socket timeout could end an idle blocking pop."""
    hosts = getattr(layer, "hosts", None)
    if hosts is None:
        return
    pop = getattr(layer, "brpop_timeout", 5)
    for host in hosts:
        timeout = host.get("socket_timeout")
        if timeout is None or timeout <= pop + 1:
            raise RuntimeError(f"channel layer: Redis socket_timeout {timeout!r} must exceed the blocking pop "
                               f"({pop} s) by more than 1 s, or idle workers and sockets time out")


class RedisLayer(RedisChannelLayer):
    """channels_redis' layer whose fire-and-forget backup cleaner survives a Redis outage."""

    async def _clean_receive_backup(self, index, channel):
        try:
            await super()._clean_receive_backup(index, channel)
        except (RedisConnectionError, RedisTimeoutError, OSError) as e:
            log.warning("channel layer: backup cleanup skipped, Redis unreachable (%s)", e)
