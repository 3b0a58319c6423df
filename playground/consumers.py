"""WebSocket consumer for /ws/generate/: parse a frame, call a service, reply.

Client -> server: {"type": "run", ...} and {"type": "stop"}. Server -> client: "accepted",
"started", "frame", "done", "error" (full protocol in the README). Malformed or unknown
frames get an "error" frame and the socket stays open. One run at a time per socket.

The consumer never talks to the engine: it records the Run, puts a job on the
"inference" queue with its own channel name as the reply address, and forwards the
worker's gen.* messages to the browser. Stop/disconnect -> "job.cancel" to the worker
that took the job (its control channel arrives in "gen.started"), or, if no worker has
it yet, the queued Run is marked cancelled and the worker skips it.
"""
from __future__ import annotations

import json

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from inference.errors import EngineError

from . import records
from .services import job_message, parse_run_request


class GenerateConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        self.run_id: int | None = None
        self.worker_channel: str | None = None
        self.stop_requested = False
        await self.accept()

    async def disconnect(self, code):
        if self.run_id is not None:
            await self._stop(notify=False)

    # -- browser -> server ---------------------------------------------------------------
    async def receive(self, text_data=None, bytes_data=None):
        try:
            frame = json.loads(text_data) if text_data is not None else None
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            return await self.send_json({"type": "error", "message": "frames must be JSON objects"})
        kind = frame.get("type")
        if kind == "run":
            return await self._run(frame)
        if kind == "stop":
            if self.run_id is None:
                return await self.send_json({"type": "error", "message": "nothing is running"})
            return await self._stop()
        if kind == "ping":
            return await self.send_json({"type": "pong"})
        await self.send_json({"type": "error", "message": f"unknown frame type {kind!r} (use 'run' or 'stop')"})

    async def _run(self, frame: dict):
        if self.run_id is not None:
            return await self.send_json({"type": "error", "message": "a run is already in progress; stop it first"})
        try:
            request = parse_run_request(frame)
        except EngineError as e:
            return await self.send_json({"type": "error", "message": str(e)})
        session = self.scope.get("session")
        run_id = await records.create_run(request, getattr(session, "session_key", None) or "")
        self.run_id, self.worker_channel, self.stop_requested = run_id, None, False
        await self.channel_layer.send(settings.PLAYGROUND_QUEUE_CHANNEL,
                                      job_message(run_id, request, self.channel_name))
        await self.send_json({"type": "accepted", "run_id": run_id, "queued_ahead": await records.queued_ahead(run_id)})

    async def _stop(self, notify: bool = True):
        self.stop_requested = True
        if self.worker_channel:
            await self.channel_layer.send(self.worker_channel, {"type": "job.cancel", "run_id": self.run_id})
        elif await records.cancel_if_queued(self.run_id):
            run_id, self.run_id = self.run_id, None
            if notify:
                await self.send_json({"type": "done", "run_id": run_id, "finish_reason": "cancelled",
                                      "stats": {"finish_reason": "cancelled", "generated_tokens": 0}})

    # -- worker -> server (channel layer) ------------------------------------------------
    async def gen_started(self, message):
        if message["run_id"] != self.run_id:
            return
        self.worker_channel = message["worker_channel"]
        if self.stop_requested:  # Stop arrived while the job was still queued
            await self.channel_layer.send(self.worker_channel, {"type": "job.cancel", "run_id": self.run_id})
        await self.send_json({"type": "started", "run_id": self.run_id, "model": message.get("model"),
                              "worker_id": message.get("worker_id")})

    async def gen_frame(self, message):
        if message["run_id"] == self.run_id:
            await self.send_json({k: v for k, v in message.items() if k != "run_id"} | {"type": "frame"})

    async def gen_done(self, message):
        if message["run_id"] == self.run_id:
            self.run_id = self.worker_channel = None
            await self.send_json({"type": "done", "run_id": message["run_id"], "stats": message["stats"],
                                  "finish_reason": message["finish_reason"]})

    async def gen_error(self, message):
        if message["run_id"] == self.run_id:
            self.run_id = self.worker_channel = None
            await self.send_json({"type": "error", "run_id": message["run_id"], "message": message["message"]})

    async def send_json(self, content):
        await self.send(text_data=json.dumps(content))
