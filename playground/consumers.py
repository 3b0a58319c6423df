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

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from . import protocol as p
from . import records
from .limiter import LimitExceeded, TokenBucket, limiter
from .services import parse_run_request

log = logging.getLogger(__name__)


TERMINAL = ("done", "cancelled", "error")


@dataclass
class _WatchState:
    """What the watch of one run remembers between ticks."""
    last_sent: float
    last_position: tuple | None = None
    terminal_since: float | None = None
    stuck_since: float | None = None


class GenerateConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        self.run_id: int | None = None
        self.worker_channel: str | None = None
        self.stop_requested = False
        self.watch_task: asyncio.Task | None = None
        self.layer_down_since: float | None = None
        self.rel = settings.PLAYGROUND_RELIABILITY
        limits = settings.PLAYGROUND_CLIENT_LIMITS
        self.limiter, self.client = limiter(limits), (self.scope.get("client") or ["?"])[0]
        self.bucket, self.slow_down_told = TokenBucket(limits.messages_per_s, limits.burst), 0.0
        self.socket_counted = self.run_counted = False
        await self.accept()
        try:
            self.limiter.open_socket(self.client)
            self.socket_counted = True
        except LimitExceeded as e:
            await self.send_json(p.error(e.message, code=e.code))
            await self.close(code=1008)

    async def disconnect(self, code):
        self._end_watch()
        if self.socket_counted:
            self.limiter.close_socket(self.client)
            self.socket_counted = False
        if self.run_id is not None:
            try:
                await self._stop(notify=False)
            except Exception:
                log.exception("consumer: cancelling run %s on disconnect failed", self.run_id)
        self._release_run()

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

    # -- the channel layer, survived --------------------------------------------------------
    # Channels assigns `channel_receive` (the layer's receive for our channel) in __call__; the
    # property wraps it so that a layer outage is told to the client and retried, not a 1011.
    @property
    def channel_receive(self):
        return self._resilient_channel_receive

    @channel_receive.setter
    def channel_receive(self, receive):
        self._layer_receive = receive

    async def _resilient_channel_receive(self):
        delay = 0.25
        while True:
            try:
                message = await self._layer_receive()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self.layer_down_since is None:
                    self.layer_down_since = time.monotonic()
                    log.warning("consumer: channel layer error (%s); retrying", e)
                    with contextlib.suppress(Exception):
                        await self.send_json(p.error("the message layer is unavailable; reconnecting",
                                                     code="layer_down"))
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.rel.layer_retry_max_s)
                with contextlib.suppress(Exception):  # our next receive returns it as soon as the layer is back
                    await self.channel_layer.send(self.channel_name, p.layer_probe())
                continue
            if self.layer_down_since is not None:
                await self._layer_recovered()
            return message

    async def _layer_recovered(self):
        self.layer_down_since = None
        log.warning("consumer: channel layer back")
        if self.run_id is not None and self.worker_channel is None:  # its job may have been lost
            try:
                await self._requeue(self.run_id)
            except Exception as e:  # down again: the watch queues it again later
                log.warning("consumer: queueing run %s again failed: %r", self.run_id, e)

    async def layer_probe(self, message):
        """Our own probe (see _resilient_channel_receive): its arrival already ran _layer_recovered."""

    async def _requeue(self, run_id: int):
        """Queue a still-queued run's job again (a duplicate is skipped when a worker claims it)."""
        request = await records.request_if_queued(run_id)
        if request is not None:
            log.warning("consumer: run %s looks lost from the queue; queueing it again", run_id)
            await self.channel_layer.send(settings.PLAYGROUND_QUEUE_CHANNEL,
                                          p.job_run(run_id, request, self.channel_name))

    # -- browser -> server ---------------------------------------------------------------
    async def receive(self, text_data=None, bytes_data=None):
        if not self.bucket.take():  # a flood: drop it, say so at most once a second
            now = time.monotonic()
            if now - self.slow_down_told >= 1.0:
                self.slow_down_told = now
                limits = settings.PLAYGROUND_CLIENT_LIMITS
                await self.send_json(p.error(f"too many messages (at most {limits.messages_per_s:g}/s); "
                                             "some were dropped", code="rate_limited"))
            return
        try:
            await self._receive(text_data)
        except p.ProtocolError as e:
            await self.send_json(e.frame())

    async def _receive(self, text_data):
        if text_data is None:
            raise p.ProtocolError("frames must be JSON text, not binary")
        limit = settings.PLAYGROUND_MAX_FRAME_BYTES
        if len(text_data) > limit or len(text_data.encode("utf-8", "surrogatepass")) > limit:
            raise p.ProtocolError(f"frame too large (more than {limit:,} bytes)")
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
        try:
            self.limiter.start_run(self.client)
        except LimitExceeded as e:
            return await self.send_json(p.error(e.message, code=e.code))
        self.run_counted = True
        try:
            session = self.scope.get("session")
            run_id = await records.create_run(request, getattr(session, "session_key", None) or "")
        except BaseException:
            self._release_run()
            raise
        try:
            await self.channel_layer.send(settings.PLAYGROUND_QUEUE_CHANNEL,
                                          p.job_run(run_id, request, self.channel_name))
        except Exception as e:  # the row must not stay "queued" for a job that never got queued
            log.warning("consumer: queueing run %s failed: %r", run_id, e)
            message = "the queue is unavailable right now; try again in a moment"
            self._release_run()
            await records.fail_run(run_id, message)
            return await self.send_json(p.error(message, run_id=run_id, code="queue_unavailable"))
        self.run_id, self.worker_channel, self.stop_requested = run_id, None, False
        await self.send_json(p.accepted(run_id, await records.queued_ahead(run_id)))
        self._end_watch()
        self.watch_task = asyncio.create_task(self._watch(run_id))

    async def _stop(self, notify: bool = True):
        self.stop_requested = True
        if self.worker_channel:
            await self.channel_layer.send(self.worker_channel, p.job_cancel(self.run_id))
        elif await records.cancel_if_queued(self.run_id):
            run_id = self.run_id
            self._clear_run()
            if notify:
                await self.send_json(p.done(run_id, "cancelled", {"finish_reason": "cancelled",
                                                                  "generated_tokens": 0}))
        elif channel := await records.worker_channel_of(self.run_id):  # claimed, "started" not here yet
            await self.channel_layer.send(channel, p.job_cancel(self.run_id))

    # -- the watch: live queue position, no worker, dead worker, lost replies ----------------
    def _end_watch(self):
        if self.watch_task is not None and self.watch_task is not asyncio.current_task():
            self.watch_task.cancel()
        self.watch_task = None

    async def _watch(self, run_id: int):
        """While `run_id` waits or runs: tell the client its live position (and when no worker
        is online), fail it when its worker's lease runs out or nobody came for too long, and
        report a terminal state the database has but whose message never arrived. A failing
        tick (database busy, layer down, client gone) is logged and the next one tries again:
        the watch is what keeps a waiting client from silence, so nothing may end it early."""
        watch = _WatchState(last_sent=time.monotonic())
        try:
            while self.run_id == run_id:
                await asyncio.sleep(self.rel.watch_s)
                try:
                    if await self._watch_tick(run_id, watch):
                        return
                except Exception as e:
                    log.warning("consumer: watching run %s: %r", run_id, e)
        except asyncio.CancelledError:
            pass

    async def _watch_tick(self, run_id: int, watch: "_WatchState") -> bool:
        """One look at the run's row; True once the client has been told the run's end."""
        state = await records.run_state(run_id, self.rel.lease_s)
        if state is None or self.run_id != run_id:
            return True
        status, now = state["status"], time.monotonic()
        if status == "queued":
            position = (state["queued_ahead"], state["workers"])
            if state["workers"] == 0 and state["waited_s"] > self.rel.no_worker_timeout_s:
                message = f"no worker is online (waited {state['waited_s']:.0f} s); try again later"
                if await records.fail_if(run_id, "queued", message):
                    await self._finish(p.error(message, run_id=run_id, code="no_worker"))
                    return True
            if state["idle_workers"] > 0:  # an idle worker would have taken every job queued ahead, and ours
                watch.stuck_since = watch.stuck_since or now
                if now - watch.stuck_since >= self.rel.requeue_after_s:  # so it was lost (Redis restarted)
                    await self._requeue(run_id)  # raises while the layer is down: tried again next tick
                    watch.stuck_since = None
            else:
                watch.stuck_since = None
            if position != watch.last_position or now - watch.last_sent >= self.rel.position_every_s:
                watch.last_sent, watch.last_position = now, position
                await self.send_json(p.queued(run_id, state["queued_ahead"], state["waited_s"], state["workers"]))
        elif status == "running":
            age = state["worker_age_s"]
            if age is None or age > self.rel.lease_s:
                message = "the worker serving this run stopped; run it again"
                if await records.fail_if(run_id, "running", message):
                    await self._finish(p.error(message, run_id=run_id, code="worker_lost"))
                    return True
        elif status in TERMINAL:  # the worker's own message normally arrives first
            watch.terminal_since = watch.terminal_since or now
            if now - watch.terminal_since >= self.rel.terminal_grace_s:
                if status == "error":
                    await self._finish(p.error(state["error"] or "the run failed", run_id=run_id))
                else:
                    reason = state["finish_reason"] or status
                    await self._finish(p.done(run_id, reason, state["stats"] or {"finish_reason": reason}))
                return True
        return False

    async def _finish(self, message: dict):
        self._clear_run()
        await self.send_json(message)

    def _clear_run(self):
        """The run is over for this socket: forget it, stop watching, free the client's slot."""
        self.run_id = self.worker_channel = None
        self._end_watch()
        self._release_run()

    def _release_run(self):
        if self.run_counted:
            self.run_counted = False
            self.limiter.end_run(self.client)

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
            self._clear_run()
            await self.send_json(p.done(message["run_id"], message["finish_reason"], message["stats"]))

    async def gen_error(self, message):
        if message["run_id"] == self.run_id:
            self._clear_run()
            await self.send_json(p.error(message["message"], run_id=message["run_id"], code=message.get("code")))

    async def send_json(self, content):
        await self.send(text_data=p.dumps(content))
