"""One API run on the shared queue: record it, enqueue it, follow the worker's messages, cancel it.

The same path as the WebSocket consumer: `records.create_run`, a "job.run" on the "inference"
queue with our own reply channel, then gen.started / gen.frame / gen.done / gen.error back.
While the job waits, `events()` reports the queue position every `poll_s`. `cancel()` is the
consumer's Stop: to the worker's control channel once it has the job, else the queued Run is
marked cancelled (and if a worker claimed it meanwhile, its gen.started is awaited briefly so
the cancel still reaches it). When no message comes for `poll_s`, the run's row is checked as the
WebSocket consumer's watch checks it (worker lease, a reply or job lost with a Redis restart), so
an API client is never left waiting in silence.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from channels.layers import get_channel_layer
from django.conf import settings

from .. import protocol as p
from .. import records
from ..protocol import ApiRequest
from .auth import Caller

log = logging.getLogger(__name__)

CLAIM_WAIT_S = 5.0  # how long a cancel waits for the gen.started of a job a worker just claimed


@dataclass
class Event:
    kind: str  # "queued" | "started" | "frame" | "done" | "error"
    message: dict = field(default_factory=dict)
    ahead: int = 0  # "queued": runs queued before this one


class ApiRun:
    def __init__(self, layer, run_id: int, reply: str, job: dict | None = None):
        self.layer, self.run_id, self.reply, self.job = layer, run_id, reply, job
        self.worker_channel: str | None = None
        self.finished = False
        self._inbox: asyncio.Queue = asyncio.Queue()
        self._pump = asyncio.create_task(self._receive())
        self._terminal_since: float | None = None
        self._stuck_since: float | None = None

    @classmethod
    async def submit(cls, api: ApiRequest, caller: Caller) -> "ApiRun":
        layer = get_channel_layer()
        reply = await layer.new_channel("api")
        run_id = await records.create_run(api.run, "", source=caller.source,
                                          api_key_id=caller.key.pk if caller.key else None)
        job = p.job_run(run_id, api.run, reply)
        job["fit_context"] = api.fit_context
        if api.logprobs is not None:
            job["logprobs"] = api.logprobs
        await layer.send(settings.PLAYGROUND_QUEUE_CHANNEL, job)
        return cls(layer, run_id, reply, job)

    async def _receive(self):
        """The worker's messages into the inbox; layer errors (Redis restarting) retried with backoff."""
        delay = 0.25
        while True:
            try:
                message = await self.layer.receive(self.reply)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("api run %s: channel layer error (%s); retrying", self.run_id, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, settings.PLAYGROUND_RELIABILITY.layer_retry_max_s)
                continue
            delay = 0.25
            await self._inbox.put(message)

    async def _check(self) -> Event | None:
        """A look at the run's row while no message comes, as the WebSocket consumer's watch does:
        a worker whose lease ran out fails the run; a terminal row whose message never came (lost
        with a Redis restart) is reported; a job still queued while a worker sits idle is queued again."""
        rel = settings.PLAYGROUND_RELIABILITY
        state = await records.run_state(self.run_id, rel.lease_s)
        if state is None:
            return None
        status, now = state["status"], time.monotonic()
        if status == "queued" and self.job is not None and state["idle_workers"] > 0:
            self._stuck_since = self._stuck_since or now
            if now - self._stuck_since >= rel.requeue_after_s:
                await self.layer.send(settings.PLAYGROUND_QUEUE_CHANNEL, self.job)  # a duplicate is skipped
                self._stuck_since = None
            return None
        self._stuck_since = None
        if status == "running" and (state["worker_age_s"] is None or state["worker_age_s"] > rel.lease_s):
            message = "the worker serving this run stopped; run it again"
            if await records.fail_if(self.run_id, "running", message):
                return Event("error", {"message": message, "code": "worker_lost"})
        elif status in ("done", "cancelled", "error"):
            self._terminal_since = self._terminal_since or now
            if now - self._terminal_since >= rel.terminal_grace_s:
                if status == "error":
                    return Event("error", {"message": state["error"] or "the run failed"})
                reason = state["finish_reason"] or status
                return Event("done", {"finish_reason": reason, "stats": state["stats"] or {"finish_reason": reason}})
        return None

    async def events(self, poll_s: float = 1.0):
        """Yield Events until "done" or "error" (queue position first and then every poll_s while queued)."""
        try:
            yield Event("queued", ahead=await records.queued_ahead(self.run_id))
            while True:
                try:
                    msg = await asyncio.wait_for(self._inbox.get(), poll_s)
                except asyncio.TimeoutError:
                    if self.worker_channel is None:
                        if await records.run_status(self.run_id) == "cancelled":  # e.g. from the admin
                            self.finished = True
                            yield Event("done", {"finish_reason": "cancelled", "stats": {}})
                            return
                        yield Event("queued", ahead=await records.queued_ahead(self.run_id))
                    try:
                        end = await self._check()
                    except Exception as e:  # the database is busy or the layer down: look again next time
                        log.warning("api run %s: checking its row failed: %r", self.run_id, e)
                        end = None
                    if end is not None:
                        self.finished = True
                        yield end
                        return
                    continue
                if msg.get("run_id") != self.run_id:
                    continue
                kind = {p.GEN_STARTED: "started", p.GEN_FRAME: "frame", p.GEN_DONE: "done",
                        p.GEN_ERROR: "error"}.get(msg.get("type"))
                if kind is None:
                    continue
                if kind == "started":
                    self.worker_channel = msg["worker_channel"]
                elif kind in ("done", "error"):
                    self.finished = True
                yield Event(kind, msg)
                if self.finished:
                    return
        finally:
            try:
                if not self.finished:
                    # The client went away (or the view failed): stop the run, even while we are being cancelled.
                    await asyncio.shield(self.cancel())
            finally:
                self._pump.cancel()

    async def cancel(self) -> None:
        if self.finished:
            return
        self.finished = True
        if self.worker_channel is None and not await records.cancel_if_queued(self.run_id):
            with contextlib.suppress(asyncio.TimeoutError):  # claimed meanwhile: its gen.started is on its way
                async with asyncio.timeout(CLAIM_WAIT_S):
                    while self.worker_channel is None:
                        msg = await self._inbox.get()
                        if msg.get("type") == p.GEN_STARTED and msg.get("run_id") == self.run_id:
                            self.worker_channel = msg["worker_channel"]
        if self.worker_channel is not None:
            await self.layer.send(self.worker_channel, p.job_cancel(self.run_id))
