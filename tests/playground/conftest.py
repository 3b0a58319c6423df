"""Fixtures for the playground tests: a real Engine on a tiny synthetic checkpoint (CPU),
a fresh in-memory channel layer per test, and an in-process Worker running in the test's
event loop (the same arrangement `manage.py playground` makes inside Daphne's loop).
"""
from __future__ import annotations

import asyncio
import contextlib

import pytest
from channels.layers import get_channel_layer

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from inference.synth import write_checkpoint

    return write_checkpoint("tiny", tmp_path_factory.mktemp("tiny_model"), device="cpu")


@pytest.fixture(scope="session")
def engine(tiny_model_dir):
    from inference.engine import Engine

    return Engine.from_pretrained(tiny_model_dir, device="cpu")


@pytest.fixture
async def layer():
    """The process's in-memory layer, emptied: its queues must belong to this test's loop."""
    layer = get_channel_layer()
    await layer.flush()
    yield layer
    await layer.flush()


@contextlib.asynccontextmanager
async def running_worker(engine, layer, **kwargs):
    from playground.worker import Worker

    worker = Worker(engine, layer, heartbeat_s=kwargs.pop("heartbeat_s", 30), **kwargs)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    try:
        yield worker
    finally:
        worker.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
def start_worker():
    """`async with start_worker(engine, layer) as worker:` — a worker for part of a test."""
    return running_worker


@pytest.fixture
def ws_headers():
    return list(ORIGIN)


@pytest.fixture
async def worker(engine, layer, transactional_db):
    async with running_worker(engine, layer) as w:
        yield w
