"""The GPU worker: takes jobs from the "inference" queue, runs one Engine, streams frames.

One worker = one Engine = one job at a time (batch 1). It is an asyncio object that runs
in whatever event loop owns its channel layer: inside Daphne's loop for the embedded
default (`manage.py playground`, in-memory layer), or in its own loop in
`manage.py playground_worker` (Redis layer; one process per GPU).

Channels it uses:
  "inference"            shared queue; each job message is received by exactly one worker,
                         and a worker only receives while idle, so busy workers leave jobs
                         to idle ones.
  worker control channel a per-worker channel from `layer.new_channel()`. The worker tells
                         the consumer its name in the "gen.started" message; the consumer
                         sends {"type": "job.cancel", "run_id"} there on Stop or disconnect.
                         It is read all the time, also while a job is running.

Engine.generate is a blocking generator: it runs in a one-thread executor (so every engine
call, the warm-up included, happens on the same thread) and hands token
events to a FrameStream; the loop sends the first token at once, then one frame per
~20 ms with the text gathered meanwhile. Cancellation sets a threading.Event that the
engine checks between steps, so a Stop lands within one frame.
Messages are built by protocol.py. Not here: validation of user input (protocol.py), the ORM
(records.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from channels.exceptions import ChannelFull
from django.conf import settings

from inference.engine import FinishEvent
from inference.errors import EngineError
from inference.prompts import Prompt
from inference.sampling import SamplingParams

from . import protocol as p
from . import records
from .limits import Reliability
from .models import Run

log = logging.getLogger(__name__)


class FrameStream:
    """Token events from the engine thread -> ~20 ms frames on the event loop.

    The thread calls push()/close(); the loop iterates frames(). The loop is woken only
    when the buffer goes from empty to non-empty, not once per token.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, t0: float):
        self._loop = loop
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        self._pending = False
        self._parts: list[str] = []  # text not yet sent
        self._logprobs: list[dict] = []  # per-token logprob entries not yet sent (API requests that ask)
        self.output: list[str] = []  # all text, for the Run row
        self.tokens = 0
        self.accepted = 0  # drafted tokens accepted so far (speculative decoding)
        self.t0 = t0
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.closed = False
        self.stats: dict | None = None
        self.error: str | None = None
        self.error_code = "internal"  # "invalid_request" when the engine refused the request itself

    # -- engine thread side --------------------------------------------------------------
    def push(self, token_ids: list[int], text: str, t: float, logprobs: list[dict] | None = None,
             accepted: int = 0) -> None:
        with self._lock:
            self.accepted = accepted
            if logprobs:
                self._logprobs.extend(logprobs)
            if text:
                self._parts.append(text)
                self.output.append(text)
            if token_ids:
                self.tokens += len(token_ids)
                if self.t_first is None:
                    self.t_first = t
                self.t_last = t
            notify, self._pending = not self._pending, True
        if notify:
            self._loop.call_soon_threadsafe(self._wake.set)

    def close(self, stats: dict | None = None, error: str | None = None, error_code: str = "internal") -> None:
        with self._lock:
            self.stats, self.error, self.error_code, self.closed = stats, error, error_code, True
            self._pending = True
        self._loop.call_soon_threadsafe(self._wake.set)

    # -- event loop side -----------------------------------------------------------------
    def _take(self) -> tuple[dict | None, bool]:
        with self._lock:
            text, self._parts = "".join(self._parts), []
            self._pending = False
            now = time.perf_counter()
            tok_s = 0.0
            if self.tokens > 1 and self.t_last > self.t_first:
                tok_s = (self.tokens - 1) / (self.t_last - self.t_first)
            frame = {
                "text": text,
                "tokens": self.tokens,
                "tok_s": round(tok_s, 1),
                "accepted": self.accepted,
                "ttft_ms": None if self.t_first is None else round((self.t_first - self.t0) * 1000, 1),
                "elapsed_ms": round((now - self.t0) * 1000, 1),
            }
            if self._logprobs:
                frame["logprobs"], self._logprobs = self._logprobs, []
            return (frame if (text or self.tokens) else None), self.closed

    async def frames(self, interval: float):
        last_tokens = -1
        while True:
            await self._wake.wait()
            self._wake.clear()
            frame, closed = self._take()
            if frame is not None and (frame["text"] or frame["tokens"] != last_tokens):
                last_tokens = frame["tokens"]
                yield frame
            if closed:
                return
            await asyncio.sleep(interval)


def gpu_memory(device: str) -> tuple[float | None, float | None]:
    """(used MiB, total MiB) for a CUDA device, else (None, None)."""
    if not str(device).startswith("cuda"):
        return None, None
    import torch

    dev = torch.device(device)
    return (
        torch.cuda.memory_reserved(dev) / 2**20,
        torch.cuda.get_device_properties(dev).total_memory / 2**20,
    )


def model_capabilities(engine) -> dict:
    """What the API checks before queueing a request: FIM tokens and a chat template."""
    tok = getattr(engine, "tokenizer", None)
    if tok is None:
        return {}
    return {"fim": getattr(tok, "fim_tokens", None) is not None,
            "chat_template": bool(tok.chat_template)}


STOP_GRACE_S = 5.0  # on request_stop, how long the running job has to fail itself and tell its client


async def cancel_and_wait(task: asyncio.Task, retry_s: float = 0.2) -> None:
    """Cancel `task` and return once it has ended, whatever it swallows.

    One cancel() is not enough on Python 3.11: redis-py sends every command through
    `asyncio.wait_for(..., socket_timeout)`, and 3.11's wait_for returns normally, dropping the
    cancel, when it lands in the loop iteration where the send completes (CPython gh-86296,
    fixed in 3.12). The task then goes on blocking in channels_redis' BZPOPMIN loop forever.
    So cancel again until the task is done.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=retry_s)


SERIES_POINTS = 60  # tok/s samples kept with a run's stats (share-page sparkline)


def downsample(values: list[float], n: int) -> list[float]:
    """At most n bucket means of `values`, in order."""
    if len(values) <= n:
        return list(values)
    out = []
    for i in range(n):
        lo, hi = i * len(values) // n, (i + 1) * len(values) // n
        out.append(round(sum(values[lo:hi]) / (hi - lo), 1))
    return out


class Worker:
    def __init__(self, engine, layer, *, worker_id: str | None = None, queue: str | None = None,
                 frame_interval: float | None = None, heartbeat_s: float | None = None,
                 reliability: Reliability | None = None):
        self.engine = engine
        self.layer = layer
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.queue = queue or settings.PLAYGROUND_QUEUE_CHANNEL
        self.frame_interval = settings.PLAYGROUND_FRAME_INTERVAL_S if frame_interval is None else frame_interval
        self.rel = reliability or settings.PLAYGROUND_RELIABILITY
        self.heartbeat_s = self.rel.heartbeat_s if heartbeat_s is None else heartbeat_s
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        self.channel: str | None = None  # control channel, set in run()
        self.current: tuple[int, threading.Event] | None = None
        self.early_cancels: dict[int, float] = {}  # run_id -> when; cancels that beat the claim
        self.jobs_done = 0
        self.ready = asyncio.Event()
        self.stopping = False
        self._busy = False  # between taking a job off the queue and finishing it
        self._job_task: asyncio.Task | None = None
        self._stop_requested = asyncio.Event()
        self._stopped = asyncio.Event()
        self.capabilities = model_capabilities(engine)

    @property
    def model(self) -> str:
        return str(self.engine.info.get("model", ""))

    async def run(self) -> None:
        """Serve until cancelled or `request_stop()`: jobs, cancel messages, heartbeats."""
        self.channel = await self.layer.new_channel("worker")
        await asyncio.get_running_loop().run_in_executor(self.executor, self._warmup)
        await self.heartbeat()
        swept = await records.sweep(self.rel.lease_s, self._queue_expiry_s(), self.rel.worker_forget_s,
                                    own_worker_id=self.worker_id)
        if any(swept.values()):
            log.warning("worker %s: at start, failed %d orphaned running and %d expired queued run(s)",
                        self.worker_id, swept["running"], swept["expired"])
        self._job_task = asyncio.create_task(self._job_loop())
        tasks = [self._job_task, asyncio.create_task(self._control_loop()), asyncio.create_task(self._heartbeat_loop())]
        stop = asyncio.create_task(self._stop_requested.wait())
        self.ready.set()
        log.info("worker %s serving %s on %s (queue %r)", self.worker_id, self.model,
                 self.engine.info.get("device"), self.queue)
        try:
            # Wait on the tasks, never `await` one directly: a cancel of run() then always lands
            # here, even when the cancel it would pass into the task is swallowed (cancel_and_wait).
            await asyncio.wait({self._job_task, stop}, return_when=asyncio.FIRST_COMPLETED)
            if self.stopping and self._busy:  # the running job fails with its message, then the loop ends
                await asyncio.wait({self._job_task}, timeout=STOP_GRACE_S)
        finally:
            if self.current:
                self.current[1].set()
            for task in [*tasks, stop]:
                await cancel_and_wait(task)
        if not self._job_task.cancelled() and self._job_task.exception() is not None:
            raise self._job_task.exception()  # a bug in the job loop: the process supervisor restarts us
        if self.stopping:  # a clean stop: leave the dashboard
            await records.remove_worker(self.worker_id)
            log.info("worker %s stopped", self.worker_id)
        self._stopped.set()

    async def stopped(self) -> None:
        """Returns once run() has finished after request_stop()."""
        await self._stopped.wait()

    def request_stop(self) -> None:
        """SIGTERM/SIGINT: stop taking jobs; the running one is cancelled, failed with a message
        its client sees, and run() returns."""
        if self.stopping:
            return
        self.stopping = True
        log.info("worker %s: stopping", self.worker_id)
        if self.current:
            self.current[1].set()
        self._stop_requested.set()

    def stop(self) -> None:
        """Last-resort shutdown hook: cancel the running generation so the engine thread ends at once."""
        self.stopping = True
        if self.current:
            self.current[1].set()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def _queue_expiry_s(self) -> float:
        return float(getattr(self.layer, "expiry", 900))

    async def _receive(self, channel: str) -> dict:
        """layer.receive, retried with backoff while the layer is down (Redis restarting)."""
        delay, down_since = 0.25, None
        while True:
            try:
                msg = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if down_since is None:
                    down_since = time.monotonic()
                    log.warning("worker %s: channel layer error (%s); retrying", self.worker_id, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.rel.layer_retry_max_s)
                continue
            if down_since is not None:
                log.warning("worker %s: channel layer back after %.1f s", self.worker_id, time.monotonic() - down_since)
            return msg

    async def _job_loop(self) -> None:
        while not self.stopping:
            job = await self._receive(self.queue)
            if job.get("type") != p.JOB_RUN:
                log.warning("worker %s: ignoring %r on the job queue", self.worker_id, job.get("type"))
                continue
            self._busy = True
            try:
                await self.handle_job(job)
            except Exception:  # one bad job must not take the worker down
                log.exception("worker %s: job %s failed", self.worker_id, job.get("run_id"))
                if isinstance(job.get("run_id"), int):
                    with contextlib.suppress(Exception):
                        await records.fail_if(job["run_id"], Run.RUNNING, "internal error in the worker")
            finally:
                self._busy = False

    async def _control_loop(self) -> None:
        while True:
            msg = await self._receive(self.channel)
            if msg.get("type") != p.JOB_CANCEL:
                continue
            if self.current and self.current[0] == msg.get("run_id"):
                self.current[1].set()
            elif isinstance(msg.get("run_id"), int):  # the cancel beat our claim: remember it a while
                now = time.monotonic()
                self.early_cancels = {k: t for k, t in self.early_cancels.items() if now - t < 60}
                self.early_cancels[msg["run_id"]] = now

    async def _heartbeat_loop(self) -> None:
        beats = 0
        while True:
            await asyncio.sleep(self.heartbeat_s)
            beats += 1
            try:
                await self.heartbeat()
                if beats % 10 == 0:
                    await records.sweep(self.rel.lease_s, self._queue_expiry_s(), self.rel.worker_forget_s)
            except Exception as e:
                log.warning("worker %s: heartbeat failed: %s", self.worker_id, e)

    async def heartbeat(self, job_finished: bool = False) -> None:
        info = self.engine.info
        used, total = gpu_memory(str(info.get("device", "cpu")))
        current = self.current
        status = await records.write_heartbeat(self.worker_id, {
            "model": self.model,
            "device": str(info.get("device", "")),
            "random_weights": bool(info.get("random_weights")),
            "fast_path": bool(info.get("fast_path")),
            "busy": current is not None,
            "current_run": current[0] if current else None,
            "gpu_memory_used_mb": used,
            "gpu_memory_total_mb": total,
            "info": {**{k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or k == "card"},
                     **self.capabilities, "control_channel": self.channel},
        }, job_finished=job_finished)
        if current and status is not None and status != Run.RUNNING:  # cancelled or failed elsewhere
            current[1].set()

    async def _reply(self, channel: str, message: dict, cancel: threading.Event, lost: list) -> None:
        try:
            await self.layer.send(channel, message)
        except ChannelFull:  # the browser stopped reading: nobody wants the rest
            cancel.set()
        except Exception as e:  # the layer is down: the client cannot hear us; stop and record why
            if not lost:
                log.warning("worker %s: reply to run %s failed: %s", self.worker_id, message.get("run_id"), e)
            lost.append(e)
            cancel.set()

    async def handle_job(self, job: dict) -> None:
        run_id, reply = job["run_id"], job["reply_channel"]
        if not await records.claim_run(run_id, self.worker_id, self.model):
            return  # stopped (or taken) before we got to it
        cancel = threading.Event()
        self.current = (run_id, cancel)
        if self.early_cancels.pop(run_id, None) is not None or self.stopping:
            cancel.set()
        lost: list = []
        loop = asyncio.get_running_loop()
        stream = FrameStream(loop, time.perf_counter())
        await self._reply(reply, p.gen_started(run_id, self.channel, self.worker_id, self.model), cancel, lost)
        future = loop.run_in_executor(self.executor, self._generate, job, cancel, stream)
        seq, series = 0, []
        try:
            async for frame in stream.frames(self.frame_interval):
                if not lost:
                    await self._reply(reply, p.gen_frame(run_id, seq, **frame), cancel, lost)
                seq += 1
                if frame["tok_s"] > 0:
                    series.append(frame["tok_s"])
            await future
        finally:
            self.current = None
        output = "".join(stream.output)
        error, code = stream.error, stream.error_code
        if lost:
            error, code = "the connection to the message layer was lost during the run", "layer_down"
        elif self.stopping and (stream.stats or {}).get("finish_reason") == "cancelled":
            error, code = "the worker was shut down during the run; run it again", "worker_stopped"
        if error is not None:
            await records.fail_run(run_id, error, output)
            await self._reply(reply, p.gen_error(run_id, error, code=code), cancel, lost)
        else:
            stats = dict(stream.stats, elapsed_ms=round((time.perf_counter() - stream.t0) * 1000, 1),
                         frames=seq, model=self.model, worker_id=self.worker_id,
                         tok_s_series=downsample(series, SERIES_POINTS))
            await records.finish_run(run_id, output, stats)
            await self._reply(reply, p.gen_done(run_id, stats["finish_reason"], stats), cancel, lost)
        self.jobs_done += 1
        await self.heartbeat(job_finished=True)

    def _warmup(self) -> None:
        """A few tokens on the engine thread before serving: lazy compilation, CUDA-graph
        capture and allocator growth happen here, not in the first user's TTFT."""
        try:
            for _ in self.engine.generate(Prompt.completion("def main():"), SamplingParams(max_tokens=4, seed=0)):
                pass
        except EngineError as e:
            log.warning("worker %s: warm-up failed: %s", self.worker_id, e)

    def _logprob_entries(self, logprobs) -> list[dict] | None:
        """Engine TokenLogprobs -> JSON entries {"token", "logprob", "top": [[token, logprob], ...]}."""
        if logprobs is None:
            return None
        text = self.engine.tokenizer.decode
        return [{"token": text([lp.token_id]), "logprob": lp.logprob,
                 "top": [[text([i]), v] for i, v in lp.top]} for lp in logprobs]

    def _generate(self, job: dict, cancel: threading.Event, stream: FrameStream) -> None:
        """Engine thread: run one generation into `stream`; always ends with stream.close()."""
        try:
            request = p.RunRequest.from_json(job["request"])
            prompt, params = request.prompt(), request.params
            if job.get("fit_context"):  # API request without max_tokens: up to the context, within the cap
                room = self.engine.max_context - len(self.engine.prompt_ids(prompt))
                params = replace(params, max_tokens=max(1, min(params.max_tokens, room)))
            if job.get("logprobs") is not None:  # API request: each token's logprob and the top k
                params = replace(params, logprobs=job["logprobs"])
            events = self.engine.generate(prompt, params, cancel=cancel)
            for ev in events:
                if isinstance(ev, FinishEvent):
                    stream.close(stats=ev.stats.to_dict())
                    return
                stream.push(ev.token_ids, ev.text, ev.t, self._logprob_entries(ev.logprobs), ev.accepted)
            stream.close(error="the engine ended without a finish event")
        except (EngineError, p.ProtocolError) as e:  # the request itself is at fault
            stream.close(error=str(e), error_code="invalid_request")
        except Exception as e:  # a bug, not the user's fault: log it, tell them briefly
            log.exception("engine failure on run %s", job.get("run_id"))
            stream.close(error=f"internal error in the worker ({type(e).__name__})")
