"""One API run on the shared queue: record it, enqueue it, follow the worker's messages, cancel it.

The same path as the WebSocket consumer: `records.create_run`, a "job.run" on the "inference"
queue with our own reply channel, then gen.started / gen.frame / gen.done / gen.error back.
While the job waits, `events()` reports the queue position every `poll_s`. `cancel()` is the
consumer's Stop: to the worker's control channel once it has the job, else the queued Run is
marked cancelled (and if a worker claimed it meanwhile, its gen.started is awaited briefly so
the cancel still reaches it).
"""
from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from channels.layers import get_channel_layer
from django.conf import settings

from .. import protocol as p
from .. import records
from ..protocol import ApiRequest
from .auth import Caller

CLAIM_WAIT_S = 5.0  # how long a cancel waits for the gen.started of a job a worker just claimed


@dataclass
class Event:
    kind: str  # "queued" | "started" | "frame" | "done" | "error"
    message: dict = field(default_factory=dict)
    ahead: int = 0  # "queued": runs queued before this one


class ApiRun:
    def __init__(self, layer, run_id: int, reply: str):
        self.layer, self.run_id, self.reply = layer, run_id, reply
        self.worker_channel: str | None = None
        self.finished = False
        self._inbox: asyncio.Queue = asyncio.Queue()
        self._pump = asyncio.create_task(self._receive())

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
        return cls(layer, run_id, reply)

    async def _receive(self):
        while True:
            await self._inbox.put(await self.layer.receive(self.reply))

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
