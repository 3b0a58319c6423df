"""WebSocket consumer for /ws/generate/: parse a frame, call a service, reply.

The messages both ways are named and built in protocol.py (full description in the README).
Malformed or unknown frames get an "error" frame and the socket stays open; so does any
failure while handling a frame (logged once, answered with a short error). One run at a time
per socket.

The consumer never talks to the engine: it records the Run, puts a job on the
"inference" queue with its own channel name as the reply address, and forwards the
worker's gen.* messages to the browser. Stop/disconnect -> "job.cancel" to the worker
that took the job (its control channel arrives in "gen.started"), or, if no worker has
it yet, the queued Run is marked cancelled and the worker skips it.
"""
from __future__ import annotations

import contextlib
import logging

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from . import protocol as p
from . import records
from .services import parse_run_request

log = logging.getLogger(__name__)


class GenerateConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        self.run_id: int | None = None
        self.worker_channel: str | None = None
        self.stop_requested = False
        await self.accept()

    async def disconnect(self, code):
        if self.run_id is not None:
            try:
                await self._stop(notify=False)
            except Exception:
                log.exception("consumer: cancelling run %s on disconnect failed", self.run_id)

    async def dispatch(self, message):
        """Every handler (browser frames and gen.* messages): a failure is logged once and
        answered with an error frame; the socket stays open."""
        try:
            await super().dispatch(message)
        except StopConsumer:
            raise
        except Exception:  # a bug or a layer/database fault
            log.exception("consumer: handling %r failed", message.get("type"))
            with contextlib.suppress(Exception):
                await self.send_json(p.error("the server could not handle that; try again", code="server_error"))

    # -- browser -> server ---------------------------------------------------------------
    async def receive(self, text_data=None, bytes_data=None):
        try:
            await self._receive(text_data)
        except p.ProtocolError as e:
            await self.send_json(e.frame())

    async def _receive(self, text_data):
        if text_data is None:
            raise p.ProtocolError("frames must be JSON text, not binary")
        frame = p.loads(text_data)
        if not isinstance(frame, dict):
            raise p.ProtocolError("frames must be JSON objects")
        kind = frame.get("type")
        if kind == p.RUN:
            return await self._run(frame)
        if kind == p.STOP:
            if self.run_id is None:
                raise p.ProtocolError("nothing is running")
            return await self._stop()
        if kind == p.PING:
            return await self.send_json(p.pong())
        shown = kind if isinstance(kind, str) and len(kind) <= 40 else "..."
        raise p.ProtocolError(f"unknown frame type {shown!r} (use '{p.RUN}', '{p.STOP}' or '{p.PING}')", "type")

    async def _run(self, frame: dict):
        if self.run_id is not None:
            raise p.ProtocolError("a run is already in progress; stop it first")
        request = parse_run_request(frame)
        session = self.scope.get("session")
        run_id = await records.create_run(request, getattr(session, "session_key", None) or "")
        try:
            await self.channel_layer.send(settings.PLAYGROUND_QUEUE_CHANNEL,
                                          p.job_run(run_id, request, self.channel_name))
        except Exception as e:  # the row must not stay "queued" for a job that never got queued
            log.warning("consumer: queueing run %s failed: %r", run_id, e)
            message = "the queue is unavailable right now; try again in a moment"
            await records.fail_run(run_id, message)
            return await self.send_json(p.error(message, run_id=run_id, code="queue_unavailable"))
        self.run_id, self.worker_channel, self.stop_requested = run_id, None, False
        await self.send_json(p.accepted(run_id, await records.queued_ahead(run_id)))

    async def _stop(self, notify: bool = True):
        self.stop_requested = True
        if self.worker_channel:
            await self.channel_layer.send(self.worker_channel, p.job_cancel(self.run_id))
        elif await records.cancel_if_queued(self.run_id):
            run_id, self.run_id = self.run_id, None
            if notify:
                await self.send_json(p.done(run_id, "cancelled", {"finish_reason": "cancelled",
                                                                  "generated_tokens": 0}))

    # -- worker -> server (channel layer) ------------------------------------------------
    async def gen_started(self, message):
        if message["run_id"] != self.run_id:
            return
        self.worker_channel = message["worker_channel"]
        if self.stop_requested:  # Stop arrived while the job was still queued
            await self.channel_layer.send(self.worker_channel, p.job_cancel(self.run_id))
        await self.send_json(p.started(self.run_id, message.get("model"), message.get("worker_id")))

    async def gen_frame(self, message):
        if message["run_id"] == self.run_id:
            await self.send_json(p.frame_from_gen(message))

    async def gen_done(self, message):
        if message["run_id"] == self.run_id:
            self.run_id = self.worker_channel = None
            await self.send_json(p.done(message["run_id"], message["finish_reason"], message["stats"]))

    async def gen_error(self, message):
        if message["run_id"] == self.run_id:
            self.run_id = self.worker_channel = None
            await self.send_json(p.error(message["message"], run_id=message["run_id"]))

    async def send_json(self, content):
        await self.send(text_data=p.dumps(content))
