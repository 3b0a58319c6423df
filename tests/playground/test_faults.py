"""Fault tests on the production layout with real processes: a real redis-server, a web process
(`manage.py playground --no-worker`) and `manage.py playground_worker` processes serving the tiny
synthetic checkpoint (passed explicitly). Each test kills or stops something mid-run and asserts
what the client sees (and how soon), the database's final states, and that nothing queued is lost.
"""
from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import time

import pytest

from wsclient import WSClient, ended  # tests/playground/wsclient.py


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)

pytestmark = [pytest.mark.slow]

LONG = {"type": "run", "mode": "complete", "code": "def f():", "params": {"max_tokens": 1500, "seed": 1}}
SHORT = {"type": "run", "mode": "complete", "code": "def g():", "params": {"max_tokens": 4}}


class Redis:
    """A redis-server we can kill and restart on the same port (no persistence)."""

    def __init__(self, tmp):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            pytest.skip("redis-server is not installed")
        self.port, self.tmp, self.proc = free_port(), tmp, None
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self):
        log = self.tmp / "redis.log"
        self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.tmp)], stdout=log.open("a"),
                                     stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.proc, log, timeout=10)

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def stack(tmp_path, processes_factory, tiny_model_dir):
    redis = Redis(tmp_path)
    procs = processes_factory(tmp_path, REDIS_URL=redis.url)
    web = free_port()
    procs.start("web", "manage.py", "playground", "--no-worker", "--port", str(web), port=web)
    db = tmp_path / "db.sqlite3"

    def worker(name):
        proc = procs.start(name, "manage.py", "playground_worker", "--device", "cpu", "--model", str(tiny_model_dir),
                           "--worker-id", name)
        deadline = time.monotonic() + 90
        while not query(db, "select count(*) from playground_workerstatus where worker_id = ?", name)[0][0]:
            assert proc.poll() is None and time.monotonic() < deadline, procs.logs()
            time.sleep(0.1)
        return proc

    yield type("Stack", (), {"redis": redis, "procs": procs, "web": web, "db": db, "worker": staticmethod(worker)})
    redis.kill()


def query(db, sql, *args):
    con = sqlite3.connect(db, timeout=20)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def status_of(db, run_id):
    return query(db, "select status, error from playground_run where id = ?", run_id)[0]


def start_long_run(port):
    """A client whose long run has streamed its first frame."""
    client = WSClient(port)
    client.send(LONG)
    messages = client.until(lambda m: m["type"] == "frame" or ended(m), timeout=60)
    assert messages[-1]["type"] == "frame", messages
    return client, messages[0]["run_id"]


def assert_no_tracebacks(procs):
    assert "Traceback" not in procs.logs(), procs.logs()


def test_worker_killed_mid_run_fails_the_run_within_5_s_and_the_queue_survives(stack):
    w1 = stack.worker("w1")
    a, run_a = start_long_run(stack.web)
    b = WSClient(stack.web)
    b.send(SHORT)
    run_b = b.until(lambda m: m["type"] == "accepted")[-1]["run_id"]
    w1.send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    end = a.until(ended, timeout=10)[-1]
    assert end["type"] == "error" and end["code"] == "worker_lost" and time.monotonic() - t0 < 5, end
    assert status_of(stack.db, run_a)[0] == "error"
    stack.worker("w2")  # the queued run is served by the next worker: nothing queued was lost
    end = b.until(ended, timeout=60)[-1]
    assert end["type"] == "done" and end["stats"]["worker_id"] == "w2"
    assert status_of(stack.db, run_b)[0] == "done"
    a.send(SHORT)  # the first socket is still usable
    assert a.until(ended, timeout=60)[-1]["type"] == "done"


def test_sigterm_fails_the_running_job_tells_its_client_and_exits_cleanly(stack):
    w1 = stack.worker("w1")
    a, run_a = start_long_run(stack.web)
    w1.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    end = a.until(ended, timeout=10)[-1]
    assert end["type"] == "error" and end["code"] == "worker_stopped" and time.monotonic() - t0 < 5, end
    assert w1.wait(15) == 0
    assert status_of(stack.db, run_a)[0] == "error"
    assert query(stack.db, "select count(*) from playground_workerstatus")[0][0] == 0  # left the dashboard
    assert_no_tracebacks(stack.procs)


def test_clients_gone_before_started_cost_the_worker_nothing(stack):
    stack.worker("w1")
    runs = []
    for _ in range(5):
        client = WSClient(stack.web)
        client.send(LONG)
        runs.append(client.until(lambda m: m["type"] == "accepted")[-1]["run_id"])
        client.close()
    deadline = time.monotonic() + 30
    while True:
        rows = query(stack.db, "select status, generated_tokens from playground_run")
        if all(status not in ("queued", "running") for status, _ in rows) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [status for status, _ in rows] == ["cancelled"] * 5, rows
    assert all((tokens or 0) < 200 for _, tokens in rows), rows


def test_a_redis_restart_mid_run_tells_every_client_and_loses_nothing_queued(stack):
    """Redis dies (kill -9) while a run streams and two wait behind it, and comes back empty: the
    streaming client hears its run end (error or done) within 5 s of Redis being back, the queued
    jobs (gone with Redis) are queued again and served, the worker survives, no socket closes."""
    w1 = stack.worker("w1")
    a, run_a = start_long_run(stack.web)
    queued = []
    for source in ("127.0.0.2", "127.0.0.3"):  # other client IPs: the per-client limits stay out of the way
        client = WSClient(stack.web, source=source)
        client.send(SHORT)
        queued.append((client, client.until(lambda m: m["type"] == "accepted")[-1]["run_id"]))
    stack.redis.kill()
    time.sleep(1.0)
    stack.redis.start()  # empty: no persistence, the queued jobs are gone
    back = time.monotonic()

    end_a = a.until(ended, timeout=5)[-1]  # raises if silent for 5 s; a close (1011) raises Closed
    assert end_a["run_id"] == run_a and end_a["type"] in ("error", "done"), end_a
    for client, run_id in queued:
        end = client.until(ended, timeout=15)[-1]
        assert end["run_id"] == run_id and end["type"] == "done", end  # served after the restart
    assert time.monotonic() - back < 15
    assert w1.poll() is None  # the worker survived
    statuses = dict(query(stack.db, "select id, status from playground_run"))
    assert statuses[run_a] in ("error", "done") and all(statuses[r] == "done" for _, r in queued), statuses
    for client in (a, queued[0][0]):  # no 1011: the same sockets run again
        client.send(SHORT)
        assert client.until(ended, timeout=30)[-1]["type"] == "done"
    assert "Traceback" not in stack.procs.logs(), stack.procs.logs()
