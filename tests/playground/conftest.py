"""Fixtures for the playground tests: a real Engine on a tiny synthetic checkpoint (CPU),
a fresh in-memory channel layer per test, and an in-process Worker running in the test's
event loop (the same arrangement `manage.py playground` makes inside Daphne's loop).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from channels.layers import get_channel_layer
from procs import free_port, wait_for_port  # tests/playground/procs.py

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
REPO = Path(__file__).resolve().parents[2]




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

    worker = Worker(engine, layer, **kwargs)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 10)
    try:
        yield worker
    finally:
        worker.stop()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=15)
        assert done, "the worker did not end within 15 s of being cancelled"
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # A database call the cancelled task was awaiting may still run in the database thread: a no-op queued
        # behind it returns once it is done, so the test's teardown (flush) never meets a locked table.
        from channels.db import database_sync_to_async
        await database_sync_to_async(lambda: None)()


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


@pytest.fixture(scope="session")
def free_tcp_port():
    """Call it for a free loopback port."""
    return free_port


@contextlib.contextmanager
def redis_server(tmp: Path):
    """A throwaway redis-server on a free loopback port (no persistence); yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server); needed for the real-Redis tests")
    port = free_port()
    log = tmp / "redis.log"
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp)], stdout=log.open("w"), stderr=subprocess.STDOUT)
    wait_for_port(port, proc, log, timeout=10)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def redis_url(tmp_path):
    with redis_server(tmp_path) as url:
        yield url


@pytest.fixture(scope="module")
def module_redis_url(tmp_path_factory):
    """One redis-server for a whole test module (live deployments shared by its tests)."""
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


class Processes:
    """Subprocesses of the repo's manage.py / daphne, killed at teardown; logs in tmp."""

    def __init__(self, tmp: Path, env: dict):
        self.tmp, self.env, self.procs = tmp, env, []

    def start(self, name: str, *args: str, port: int | None = None) -> subprocess.Popen:
        log = self.tmp / f"{name}.log"
        proc = subprocess.Popen([sys.executable, *args], cwd=REPO, env=self.env, stdout=log.open("w"),
                                stderr=subprocess.STDOUT)
        self.procs.append((proc, log))
        if port is not None:
            wait_for_port(port, proc, log)
        return proc

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()}" for _, log in self.procs)

    def stop(self):
        for proc, _ in self.procs:
            proc.terminate()
        for proc, _ in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


def playground_env(tmp: Path, **extra) -> dict:
    """Environment for a live server: temp DB and cache, no inherited model/Redis settings."""
    env = dict(os.environ, PLAYGROUND_DB=str(tmp / "db.sqlite3"), PLAYGROUND_CACHE_DIR=str(tmp / "cache"),
               PLAYGROUND_SECRET_KEY="live-test", PYTHONUNBUFFERED="1")
    for key in ("REDIS_URL", "PLAYGROUND_MODEL"):
        env.pop(key, None)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def processes_factory():
    made = []

    def make(tmp: Path, **extra) -> Processes:
        made.append(Processes(tmp, playground_env(tmp, **extra)))
        return made[-1]

    yield make
    for procs in made:
        procs.stop()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium through Playwright (never `playwright install`), one per test module."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()
