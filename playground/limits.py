"""Reliability timings and per-client limits, as data (settings.py holds one of each).

Reliability: how fast a dead worker is noticed (heartbeat + lease on its running job), how
often a waiting client hears its live queue position, how long a run may wait with no worker
online, when a queued job counts as expired (the layer's expiry).
ClientLimits: what one client (session or IP) may hold or send.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reliability:
    heartbeat_s: float = 1.0  # a worker writes its WorkerStatus row this often
    lease_s: float = 3.5  # a running job whose worker has not beaten for this long is failed
    watch_s: float = 0.5  # a consumer checks its waiting/running run this often
    position_every_s: float = 5.0  # a queued client hears its position at least this often
    no_worker_timeout_s: float = 60.0  # a queued run with no worker online for this long fails
    terminal_grace_s: float = 2.0  # a run terminal in the DB whose gen.done never came is reported after this
    worker_forget_s: float = 60.0  # a worker row this stale leaves the dashboard
    layer_retry_max_s: float = 5.0  # backoff cap when the channel layer is down
    requeue_after_s: float = 3.0  # queued while a worker sits idle this long: the job was lost; queue it again


@dataclass(frozen=True)
class ClientLimits:
    sockets: int = 8  # open WebSockets per client
    queued_runs: int = 2  # runs waiting or running per client
    runs_per_minute: int = 30
    messages_per_s: float = 20.0  # sustained frames per socket (bursts up to `burst`)
    burst: int = 40
