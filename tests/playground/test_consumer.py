"""The /ws/generate/ protocol end to end: browser frames -> consumer -> in-memory layer ->
Worker with the real Engine (tiny random checkpoint, CPU) -> frames back.

Uses the full ASGI application (origin check, sessions, auth) through WebsocketCommunicator.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from inference.prompts import Prompt
from inference.sampling import SamplingParams
from playground.asgi import application
from playground.models import Run, WorkerStatus

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


async def connect():
    comm = WebsocketCommunicator(application, "/ws/generate/", headers=ORIGIN)
    connected, _ = await comm.connect()
    assert connected
    return comm


async def receive(comm, timeout=20):
    return json.loads(await comm.receive_from(timeout=timeout))


async def collect_until_end(comm, timeout=60):
    """All messages up to and including "done" or a run "error"."""
    messages = []
    while True:
        msg = await receive(comm, timeout)
        messages.append(msg)
        if msg["type"] == "done" or (msg["type"] == "error" and "run_id" in msg):
            return messages


def run_frame(code="def fibonacci(n):", **params):
    return {"type": "run", "mode": "complete", "code": code, "params": {"max_tokens": 48, **params}}


async def assert_runs_again_then_close(comm):
    """The socket (and the worker behind it) still completes a short run; then disconnect."""
    await comm.send_json_to(run_frame(max_tokens=8))
    assert (await collect_until_end(comm))[-1]["type"] == "done"
    await comm.disconnect()


async def test_run_streams_ordered_frames_whose_text_is_the_engines_output(worker, engine):
    comm = await connect()
    await comm.send_json_to(run_frame(temperature=0))
    messages = await collect_until_end(comm)
    types = [m["type"] for m in messages]
    assert types[0] == "accepted" and types[1] == "started" and types[-1] == "done"
    frames = [m for m in messages if m["type"] == "frame"]
    assert [f["seq"] for f in frames] == list(range(len(frames)))
    text = "".join(f["text"] for f in frames)

    expected = list(engine.generate(Prompt.completion("def fibonacci(n):"), SamplingParams(max_tokens=48)))[-1]
    assert text == expected.text
    done = messages[-1]
    stats = done["stats"]
    assert stats["generated_tokens"] == expected.stats.generated_tokens == frames[-1]["tokens"]
    assert stats["frames"] == len(frames)
    assert done["finish_reason"] == expected.stats.finish_reason
    assert stats["ttft_ms"] > 0 and stats["elapsed_ms"] > 0
    # Counters move while streaming: tokens never go down, the first frame already has TTFT.
    assert frames[0]["ttft_ms"] is not None and frames[0]["tokens"] >= 1
    assert all(a["tokens"] <= b["tokens"] for a, b in zip(frames, frames[1:]))

    run = await database_sync_to_async(Run.objects.get)(pk=done["run_id"])
    assert (run.status, run.output, run.generated_tokens) == ("done", text, stats["generated_tokens"])
    assert run.worker_id == worker.worker_id and run.model == engine.info["model"]
    await comm.disconnect()


async def test_first_token_is_sent_at_once_then_text_is_batched(worker):
    comm = await connect()
    await comm.send_json_to(run_frame(max_tokens=200))
    messages = await collect_until_end(comm)
    frames = [m for m in messages if m["type"] == "frame"]
    # The first token does not wait for a batch (a loaded 2-core box may let the engine
    # thread slip in another token before the loop wakes).
    assert frames[0]["tokens"] <= 3
    # ~20 ms frames: far fewer frames than tokens (CPU tiny model decodes hundreds of tok/s).
    assert len(frames) < messages[-1]["stats"]["generated_tokens"]
    await comm.disconnect()


async def test_stop_cancels_the_run_within_a_frame(worker):
    comm = await connect()
    await comm.send_json_to(run_frame(code="def f():", max_tokens=2000))
    assert (await receive(comm))["type"] == "accepted"
    while (msg := await receive(comm))["type"] != "frame":
        pass
    await comm.send_json_to({"type": "stop"})
    messages = await collect_until_end(comm, timeout=10)
    done = messages[-1]
    assert done["type"] == "done" and done["finish_reason"] == "cancelled"
    assert done["stats"]["generated_tokens"] < 2000
    run = await database_sync_to_async(Run.objects.get)(pk=done["run_id"])
    assert run.status == "cancelled"
    # The socket and the worker are ready for the next run.
    await assert_runs_again_then_close(comm)


async def test_disconnect_mid_run_frees_the_worker(worker):
    comm = await connect()
    await comm.send_json_to(run_frame(code="def f():", max_tokens=2000))
    accepted = await receive(comm)
    while (await receive(comm))["type"] != "frame":
        pass
    await comm.disconnect()
    for _ in range(100):
        run = await database_sync_to_async(Run.objects.get)(pk=accepted["run_id"])
        if run.status == "cancelled":
            break
        await asyncio.sleep(0.05)
    assert run.status == "cancelled" and run.generated_tokens < 2000
    assert worker.current is None


async def test_malformed_and_unknown_frames_get_errors_and_the_socket_stays_usable(worker):
    comm = await connect()
    for bad in ["not json", "[1, 2]", json.dumps({"type": "dance"}), json.dumps({"type": "stop"}),
                json.dumps({"type": "run", "mode": "complete", "code": "x", "params": {"temperature": -1}}),
                json.dumps({"type": "run", "mode": "sing", "code": "x"})]:
        await comm.send_to(text_data=bad)
        msg = await receive(comm)
        assert msg["type"] == "error" and msg["message"], bad
        assert "run_id" not in msg
    await comm.send_to(text_data=json.dumps({"type": "run", "mode": "complete", "code": "x",
                                             "params": {"temperature": -1}}))
    assert "temperature" in (await receive(comm))["message"]
    assert await database_sync_to_async(Run.objects.count)() == 0  # nothing bad was queued
    await assert_runs_again_then_close(comm)


async def test_a_second_run_while_one_is_active_is_refused(worker):
    comm = await connect()
    await comm.send_json_to(run_frame(code="def f():", max_tokens=2000))
    assert (await receive(comm))["type"] == "accepted"
    await comm.send_json_to(run_frame())
    while (msg := await receive(comm))["type"] == "frame" or msg["type"] == "started":
        pass
    assert msg["type"] == "error" and "already in progress" in msg["message"]
    await comm.send_json_to({"type": "stop"})
    assert (await collect_until_end(comm))[-1]["finish_reason"] == "cancelled"
    await comm.disconnect()


async def test_stop_before_a_worker_takes_the_job_cancels_it_in_the_queue(engine, layer, start_worker,
                                                                         transactional_db):
    comm = await connect()  # no worker running yet: the job waits on the queue
    await comm.send_json_to(run_frame())
    accepted = await receive(comm)
    await comm.send_json_to({"type": "stop"})
    done = await receive(comm)
    assert done["type"] == "done" and done["finish_reason"] == "cancelled"
    async with start_worker(engine, layer) as worker:
        await comm.send_json_to(run_frame(max_tokens=8))  # the worker skips the cancelled job
        messages = await collect_until_end(comm)
        assert messages[-1]["type"] == "done" and messages[-1]["run_id"] != accepted["run_id"]
        assert worker.jobs_done == 1
    await comm.disconnect()


async def test_prompt_errors_from_the_engine_come_back_as_error_frames(worker, engine):
    comm = await connect()
    too_long = engine.max_context  # prompt + max_tokens exceeds the context
    await comm.send_json_to(run_frame(max_tokens=too_long))
    messages = await collect_until_end(comm)
    assert messages[-1]["type"] == "error" and "context" in messages[-1]["message"]
    run = await database_sync_to_async(Run.objects.get)(pk=messages[-1]["run_id"])
    assert run.status == "error" and "context" in run.error
    await comm.disconnect()


async def test_infill_and_instruct_modes_stream_too(worker):
    comm = await connect()
    await comm.send_json_to({"type": "run", "mode": "infill", "prefix": "def add(a, b):\n    return ",
                             "suffix": "\n", "params": {"max_tokens": 8}})
    assert (await collect_until_end(comm))[-1]["type"] == "done"
    await comm.send_json_to({"type": "run", "mode": "instruct", "instruction": "Write hello world",
                             "params": {"max_tokens": 8}})
    assert (await collect_until_end(comm))[-1]["type"] == "done"
    await comm.disconnect()


async def test_worker_reports_a_heartbeat(worker, engine):
    status = await database_sync_to_async(WorkerStatus.objects.get)(worker_id=worker.worker_id)
    assert status.model == engine.info["model"] and status.device == "cpu"
    assert status.random_weights and not status.busy


async def test_wrong_origin_is_refused(worker):
    comm = WebsocketCommunicator(application, "/ws/generate/", headers=[(b"origin", b"http://evil.example")])
    connected, _ = await comm.connect()
    assert not connected


async def test_a_fault_while_handling_a_frame_is_answered_and_the_socket_stays_open(worker, monkeypatch):
    from playground import records

    async def broken(*args, **kwargs):
        raise RuntimeError("database is on fire")

    comm = await connect()
    with monkeypatch.context() as patch:
        patch.setattr(records, "create_run", broken)
        await comm.send_json_to(run_frame())
        msg = await receive(comm)
    assert msg["type"] == "error" and msg["code"] == "server_error" and "run_id" not in msg
    await assert_runs_again_then_close(comm)


async def test_a_failed_queue_send_fails_the_run_instead_of_leaving_it_queued(worker, monkeypatch):
    from channels.exceptions import ChannelFull

    comm = await connect()
    layer = worker.layer

    async def full(channel, message):
        raise ChannelFull()

    with monkeypatch.context() as patch:
        patch.setattr(layer, "send", full)
        await comm.send_json_to(run_frame())
        msg = await receive(comm)
    assert msg["type"] == "error" and msg["code"] == "queue_unavailable"
    run = await database_sync_to_async(Run.objects.get)(pk=msg["run_id"])
    assert run.status == "error" and run.error
    await assert_runs_again_then_close(comm)
