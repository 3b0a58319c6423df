"""A worker always stops: cancelling run() or request_stop() ends it within a second, even when
the channel layer swallows the cancel sent into its receive, as redis-py's send does on Python
3.11 (its `asyncio.wait_for` drops a cancel that lands as the send completes; this once hung
test_redis_layer.py for 300 s)."""
from __future__ import annotations

import asyncio

import pytest

from playground.worker import cancel_and_wait

pytestmark = pytest.mark.django_db(transaction=True)


class SwallowingLayer:
    """The in-memory layer, except that each receive() swallows the first cancel it gets and
    keeps waiting, exactly what a swallowed cancel does to channels_redis' BZPOPMIN loop."""

    def __init__(self, layer):
        self.inner = layer
        self.swallowed = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def receive(self, channel):
        try:
            return await self.inner.receive(channel)
        except asyncio.CancelledError:
            self.swallowed += 1
            return await self.inner.receive(channel)


async def test_cancel_and_wait_ends_a_task_that_swallows_a_cancel():
    swallowed = []

    async def stubborn():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            swallowed.append(1)
        await asyncio.sleep(60)  # a second cancel is needed here

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task, retry_s=0.05), 2)
    assert task.cancelled() and swallowed == [1]


async def test_a_cancelled_worker_ends_even_if_its_layer_swallows_the_cancel(engine, layer, transactional_db):
    from playground.worker import Worker

    swallowing = SwallowingLayer(layer)
    worker = Worker(engine, swallowing)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done and task.cancelled()
    assert swallowing.swallowed >= 1  # the case that used to hang


async def test_request_stop_ends_an_idle_worker_even_if_its_layer_swallows_the_cancel(engine, layer, transactional_db):
    from playground.worker import Worker

    swallowing = SwallowingLayer(layer)
    worker = Worker(engine, swallowing)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    worker.request_stop()
    await asyncio.wait_for(worker.stopped(), 2)
    assert task.done() and task.exception() is None and swallowing.swallowed >= 1
