"""Nothing orphaned, nobody left in silence (in-process layout, in-memory layer): a cancel that
beats `started`, a live queue position, no worker online, a worker whose lease runs out, and the
sweep a worker makes at start."""
from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from playground.asgi import application
from playground.limits import Reliability
from playground.models import Run, WorkerStatus

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


async def connect():
    comm = WebsocketCommunicator(application, "/ws/generate/", headers=ORIGIN)
    assert (await comm.connect())[0]
    return comm


async def receive(comm, timeout=20):
    return json.loads(await comm.receive_from(timeout=timeout))


def run_frame(max_tokens=2000, code="def f():"):
    return {"type": "run", "mode": "complete", "code": code, "params": {"max_tokens": max_tokens}}


@pytest.fixture
def fast_watch(settings):
    """Short timings so the tests take seconds."""
    settings.PLAYGROUND_RELIABILITY = dataclasses.replace(
        Reliability(), watch_s=0.1, lease_s=1.0, no_worker_timeout_s=1.0, position_every_s=0.3)
    return settings.PLAYGROUND_RELIABILITY


async def get_run(pk):
    return await database_sync_to_async(Run.objects.get)(pk=pk)


async def test_a_disconnect_before_started_still_cancels_the_run(worker):
    for _ in range(5):
        comm = await connect()
        await comm.send_json_to(run_frame())
        accepted = await receive(comm)
        await comm.disconnect()  # before "started": the cancel may beat or follow the worker's claim
        for _ in range(200):
            run = await get_run(accepted["run_id"])
            if run.status in ("cancelled", "done", "error") and worker.current is None:
                break
            await asyncio.sleep(0.05)
        assert run.status == "cancelled" and (run.generated_tokens or 0) < 2000


async def test_a_waiting_client_hears_its_live_position_and_that_no_worker_is_online(fast_watch, layer):
    first, second = await connect(), await connect()
    await first.send_json_to(run_frame())
    assert (await receive(first))["type"] == "accepted"
    await second.send_json_to(run_frame())
    accepted = await receive(second)
    assert accepted["queued_ahead"] == 1
    update = await receive(second)
    assert update["type"] == "queued" and update["queued_ahead"] == 1 and update["workers"] == 0
    await first.send_json_to({"type": "stop"})
    while (msg := await receive(second))["type"] == "queued" and msg["queued_ahead"] == 1:
        pass
    assert msg["type"] == "queued" and msg["queued_ahead"] == 0  # moved up without asking
    while (msg := await receive(second, timeout=5))["type"] == "queued":
        assert msg["workers"] == 0 and msg["waited_s"] >= 0
    assert msg["type"] == "error" and msg["code"] == "no_worker" and "no worker is online" in msg["message"]
    assert (await get_run(accepted["run_id"])).status == "error"
    for comm in (first, second):
        await comm.disconnect()


async def test_a_run_whose_worker_stops_beating_fails_within_the_lease(fast_watch, engine, layer, start_worker,
                                                                        transactional_db):
    async with start_worker(engine, layer, heartbeat_s=3600) as worker:  # beats at start, then never
        await asyncio.sleep(1.2)  # its heartbeat is now older than the lease
        comm = await connect()
        await comm.send_json_to(run_frame(max_tokens=1000))
        accepted = await receive(comm)
        t0 = asyncio.get_running_loop().time()
        while (msg := await receive(comm, timeout=10))["type"] != "error":
            assert msg["type"] in ("queued", "started", "frame")
        waited = asyncio.get_running_loop().time() - t0
        assert msg["code"] == "worker_lost" and msg["run_id"] == accepted["run_id"] and waited < 5
        await asyncio.sleep(0.2)
        run = await get_run(accepted["run_id"])
        assert run.status == "error" and "worker" in run.error
        for _ in range(100):  # the worker finishes its generation; the row stays failed
            if worker.current is None:
                break
            await asyncio.sleep(0.1)
        assert (await get_run(accepted["run_id"])).status == "error"
        await comm.disconnect()


async def test_a_worker_sweeps_orphans_at_start_and_dead_workers_leave(engine, layer, start_worker,
                                                                       transactional_db):
    old = timezone.now() - timedelta(hours=1)

    def make_orphans():
        WorkerStatus.objects.create(worker_id="ghost", last_heartbeat=old)
        running = Run.objects.create(mode="complete", code="x", status="running", worker_id="ghost")
        queued = Run.objects.create(mode="complete", code="y", status="queued")
        Run.objects.filter(pk=queued.pk).update(created_at=old)
        fresh = Run.objects.create(mode="complete", code="z", status="queued")
        return running.pk, queued.pk, fresh.pk

    running, queued, fresh = await database_sync_to_async(make_orphans)()
    async with start_worker(engine, layer, worker_id="sweeper"):
        statuses = {pk: (await get_run(pk)).status for pk in (running, queued, fresh)}
        assert statuses == {running: "error", queued: "error", fresh: "queued"}
        assert "expired in the queue" in (await get_run(queued)).error
        ids = await database_sync_to_async(lambda: set(WorkerStatus.objects.values_list("worker_id", flat=True)))()
        assert ids == {"sweeper"}


async def test_a_cancel_arriving_before_the_claim_is_kept_by_the_worker(worker):
    from playground import protocol as p

    await worker.layer.send(worker.channel, p.job_cancel(10**6))  # for a run it has not claimed yet
    for _ in range(50):
        if 10**6 in worker.early_cancels:
            break
        await asyncio.sleep(0.02)
    assert 10**6 in worker.early_cancels


@pytest.fixture
def tight_limits(settings):
    from playground.limits import ClientLimits

    settings.PLAYGROUND_CLIENT_LIMITS = ClientLimits(sockets=2, queued_runs=1, runs_per_minute=3,
                                                     messages_per_s=5, burst=5)
    return settings.PLAYGROUND_CLIENT_LIMITS


async def test_one_client_gets_a_clear_error_past_each_limit(tight_limits, layer):
    a, b = await connect(), await connect()
    c = WebsocketCommunicator(application, "/ws/generate/", headers=ORIGIN)
    assert (await c.connect())[0]
    refused = await receive(c)
    assert refused["code"] == "too_many_sockets" and "at most 2" in refused["message"]
    assert (await c.receive_output(timeout=2))["type"] == "websocket.close"

    await a.send_json_to(run_frame())
    assert (await receive(a))["type"] == "accepted"
    await b.send_json_to(run_frame())  # the same client, another socket: one active run at most
    msg = await receive(b)
    assert msg["type"] == "error" and msg["code"] == "too_many_runs" and "run_id" not in msg
    await a.send_json_to({"type": "stop"})
    while (await receive(a))["type"] != "done":
        pass
    for _ in range(2):  # runs per minute: 3 in all
        await b.send_json_to(run_frame())
        assert (await receive(b))["type"] == "accepted"
        await b.send_json_to({"type": "stop"})
        while (await receive(b))["type"] != "done":
            pass
    await b.send_json_to(run_frame())
    assert (await receive(b))["code"] == "rate_limited"
    await a.disconnect()
    await b.disconnect()


async def test_a_message_flood_is_dropped_with_one_error_a_second(tight_limits, layer):
    comm = await connect()
    for _ in range(50):
        await comm.send_json_to({"type": "ping"})
    replies = []
    while not await comm.receive_nothing(timeout=0.3):
        replies.append(await receive(comm))
    assert [r["type"] for r in replies].count("pong") == 5
    assert [r.get("code") for r in replies if r["type"] == "error"] == ["rate_limited"]
    await comm.disconnect()


async def test_frames_over_the_documented_maximum_are_refused_with_a_message(settings, layer):
    settings.PLAYGROUND_MAX_FRAME_BYTES = 1000
    comm = await connect()
    await comm.send_to(text_data=json.dumps({"type": "ping", "pad": "x" * 1000}))
    msg = await receive(comm)
    assert msg["type"] == "error" and "too large" in msg["message"]
    await comm.send_json_to({"type": "ping"})
    assert (await receive(comm))["type"] == "pong"
    await comm.disconnect()
