"""Scale-out on a REAL Redis: two workers (each its own RedisChannelLayer and Engine, as two
processes would have) share the "inference" queue; every job is served by exactly one of
them, both take work, and a cancel reaches the busy worker through its control channel.
"""
from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from inference.engine import Engine
from playground.models import Run
from inference.sampling import SamplingParams
from playground.protocol import RunRequest, job_run, sampling_json

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def redis_layer(url):
    """The Redis layer settings.py names, configured exactly as settings.py configures it."""
    from django.utils.module_loading import import_string

    from playground.layer import LayerConfig

    setting = LayerConfig().channel_layers(url)["default"]
    return import_string(setting["BACKEND"])(**setting["CONFIG"])


@database_sync_to_async
def new_run(request: RunRequest) -> int:
    return Run.objects.create(mode=request.mode, code=request.code, params=sampling_json(request.params)).pk


async def read_run(web, channel, timeout=60):
    """All gen.* messages of one run, up to gen.done / gen.error."""
    messages = []
    while True:
        msg = await asyncio.wait_for(web.receive(channel), timeout)
        messages.append(msg)
        if msg["type"] in ("gen.done", "gen.error"):
            return messages


async def test_each_job_goes_to_exactly_one_worker(redis_url, tiny_model_dir, start_worker):
    engines = [Engine.from_pretrained(tiny_model_dir, device="cpu") for _ in range(2)]
    web = redis_layer(redis_url)  # plays the Daphne process
    async with start_worker(engines[0], redis_layer(redis_url), worker_id="w-a") as a, \
            start_worker(engines[1], redis_layer(redis_url), worker_id="w-b") as b:
        jobs = []
        for i in range(6):
            request = RunRequest("complete", code=f"def job_{i}():", params=SamplingParams(max_tokens=40))
            run_id = await new_run(request)
            reply = await web.new_channel()
            await web.send("inference", job_run(run_id, request, reply))
            jobs.append((run_id, reply))
        results = await asyncio.gather(*(read_run(web, reply) for _, reply in jobs))

        served_by = {}
        for (run_id, _), messages in zip(jobs, results):
            started = [m for m in messages if m["type"] == "gen.started"]
            assert len(started) == 1 and messages[-1]["type"] == "gen.done"
            assert all(m["run_id"] == run_id for m in messages)
            served_by[run_id] = started[0]["worker_id"]
            assert messages[-1]["stats"]["worker_id"] == served_by[run_id]
        assert set(served_by.values()) == {"w-a", "w-b"}  # both took work
        rows = await database_sync_to_async(lambda: dict(Run.objects.values_list("pk", "worker_id")))()
        assert rows == served_by

        # Nothing left over: no job was delivered twice or lost on the queue. (A worker counts a job
        # once its last send returns: channels_redis' send is ZADD then EXPIRE, and we may read the
        # message in between. So wait a moment, then count.)
        await asyncio.sleep(0.5)
        assert a.current is None and b.current is None and a.jobs_done + b.jobs_done == 6

        # Cancel through Redis reaches the busy worker's control channel.
        request = RunRequest("complete", code="def f():", params=SamplingParams(max_tokens=2000))
        run_id = await new_run(request)
        reply = await web.new_channel()
        await web.send("inference", job_run(run_id, request, reply))
        started = await asyncio.wait_for(web.receive(reply), 30)
        assert started["type"] == "gen.started"
        await web.send(started["worker_channel"], {"type": "job.cancel", "run_id": run_id})
        messages = await read_run(web, reply, timeout=15)
        assert messages[-1]["finish_reason"] == "cancelled"
        assert messages[-1]["stats"]["generated_tokens"] < 2000


async def test_an_idle_worker_and_an_idle_reader_outlive_every_layer_timeout(redis_url, engine, start_worker):
    """redis-py 8's default 5 s socket timeout once equalled channels_redis' 5 s blocking pop:
    idle workers died and idle sockets closed with 1011. Idle 7 s, then work."""
    from channels_redis.core import RedisChannelLayer

    from playground.layer import check_redis_timeouts

    web = redis_layer(redis_url)
    check_redis_timeouts(web)
    idle = RedisChannelLayer.brpop_timeout + 2
    async with start_worker(engine, redis_layer(redis_url), worker_id="idle") as worker:
        reply = await web.new_channel()
        with pytest.raises(asyncio.TimeoutError):  # nothing arrives; the read itself must not fail
            await asyncio.wait_for(web.receive(reply), idle)
        request = RunRequest("complete", code="def f():", params=SamplingParams(max_tokens=8))
        run_id = await new_run(request)
        await web.send("inference", job_run(run_id, request, reply))
        messages = await read_run(web, reply, timeout=30)
        assert messages[-1]["type"] == "gen.done"
        await asyncio.sleep(0.5)  # the worker counts the job once its last send returns (see above)
        assert worker.jobs_done == 1


def test_a_socket_timeout_at_the_blocking_pop_is_refused():
    from channels_redis.core import RedisChannelLayer

    from playground.layer import check_redis_timeouts

    with pytest.raises(RuntimeError, match="socket_timeout"):
        check_redis_timeouts(RedisChannelLayer(hosts=[{"address": "redis://127.0.0.1:1/0", "socket_timeout": 5}]))


async def test_the_backup_cleaner_outlives_a_redis_outage(caplog):
    """channels_redis cleans each received message's backup copy in a task nobody awaits; with Redis
    gone that task used to die with "Task exception was never retrieved" and a traceback. Ours logs
    one line. (It overrides a private method: if channels_redis renames it, this test fails.)"""
    from channels_redis.core import RedisChannelLayer

    from playground.layer import RedisLayer

    assert "_clean_receive_backup" in vars(RedisChannelLayer)
    layer = RedisLayer(hosts=[{"address": "redis://127.0.0.1:1/0", "socket_timeout": 7,
                               "socket_connect_timeout": 1}])
    with caplog.at_level("WARNING", logger="playground.layer"):
        await layer._clean_receive_backup(0, "inference")  # nothing listens on port 1
    assert "backup cleanup skipped" in caplog.text
