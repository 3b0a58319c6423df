"""An API stream is never left in silence: when no message comes, its run's row is checked as
the WebSocket consumer checks it (a worker whose lease ran out, a reply lost with Redis)."""
from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from playground.api.runs import ApiRun
from playground.limits import Reliability
from playground.models import Run, WorkerStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fast(settings):
    settings.PLAYGROUND_RELIABILITY = dataclasses.replace(Reliability(), lease_s=0.5, terminal_grace_s=0.2)


async def events_until_end(run: ApiRun, timeout: float = 5):
    async def collect():
        return [ev async for ev in run.events(poll_s=0.1)]

    return await asyncio.wait_for(collect(), timeout)


async def started_run(layer, **row) -> ApiRun:
    pk = await database_sync_to_async(lambda: Run.objects.create(mode="complete", code="x", **row).pk)()
    run = ApiRun(layer, pk, await layer.new_channel("api"))
    run.worker_channel = "worker.gone"  # gen.started came; then nothing more
    return run


async def test_a_stream_whose_worker_stopped_beating_ends_with_worker_lost(fast, layer):
    stale = timezone.now() - timedelta(seconds=10)
    await database_sync_to_async(WorkerStatus.objects.create)(worker_id="w-dead", last_heartbeat=stale)
    run = await started_run(layer, status=Run.RUNNING, worker_id="w-dead")
    events = await events_until_end(run)
    assert events[-1].kind == "error" and events[-1].message["code"] == "worker_lost"
    row = await database_sync_to_async(Run.objects.get)(pk=run.run_id)
    assert row.status == Run.ERROR


async def test_a_stream_whose_final_message_was_lost_gets_it_from_the_row(fast, layer):
    run = await started_run(layer, status=Run.DONE, finish_reason="length", stats={"generated_tokens": 3})
    events = await events_until_end(run)
    assert events[-1].kind == "done" and events[-1].message["finish_reason"] == "length"
    assert events[-1].message["stats"] == {"generated_tokens": 3}


async def test_the_stream_survives_a_layer_error_and_reads_on(fast, layer):
    class Flaky:
        """The in-memory layer, whose first receive fails as a restarting Redis would."""

        def __init__(self, inner):
            self.inner, self.failed = inner, False

        def __getattr__(self, name):
            return getattr(self.inner, name)

        async def receive(self, channel):
            if not self.failed:
                self.failed = True
                raise ConnectionError("Redis is restarting")
            return await self.inner.receive(channel)

    await database_sync_to_async(WorkerStatus.objects.create)(worker_id="w", last_heartbeat=timezone.now())
    run = await started_run(Flaky(layer), status=Run.RUNNING, worker_id="w")
    await layer.send(run.reply, {"type": "gen.done", "run_id": run.run_id, "finish_reason": "stop", "stats": {}})
    events = await events_until_end(run)
    assert events[-1].kind == "done" and events[-1].message["finish_reason"] == "stop"
