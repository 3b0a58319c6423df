"""On a CUDA GPU: the full server path at fast-path speed, and `manage.py playground`'s GPU
default (the synthetic Qwen2.5-Coder-1.5B-shaped checkpoint, CUDA engine, banner).

Skipped without a GPU. Prints the measured numbers (run with -s to see them).
"""
from __future__ import annotations

import json
import time
import urllib.request

import pytest
import torch
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from playground.asgi import application
from playground.models import Run

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


@pytest.fixture(scope="module")
def gpu_engine(tmp_path_factory):
    from inference.engine import Engine
    from inference.synth import write_checkpoint

    path = write_checkpoint("qwen2.5-coder-1.5b", tmp_path_factory.mktemp("q15"), device="cuda")
    return Engine.from_pretrained(path, device="cuda")


async def collect(comm, timeout=120):
    messages = []
    while True:
        msg = json.loads(await comm.receive_from(timeout=timeout))
        messages.append(msg)
        if msg["type"] in ("done", "error"):
            return messages


@pytest.mark.django_db(transaction=True)
async def test_gpu_stream_keeps_every_token_in_order_in_20ms_frames(gpu_engine, layer, start_worker):
    async with start_worker(gpu_engine, layer):
        comm = WebsocketCommunicator(application, "/ws/generate/", headers=ORIGIN)
        assert (await comm.connect())[0]
        await comm.send_json_to({"type": "run", "mode": "complete", "code": "def quicksort(xs):",
                                 "params": {"max_tokens": 1500, "temperature": 0.8, "seed": 1}})
        messages = await collect(comm)
        done = messages[-1]
        assert done["type"] == "done", done
        frames = [m for m in messages if m["type"] == "frame"]
        stats = done["stats"]
        assert [f["seq"] for f in frames] == list(range(len(frames)))
        run = await database_sync_to_async(Run.objects.get)(pk=done["run_id"])
        assert "".join(f["text"] for f in frames) == run.output
        assert frames[-1]["tokens"] == stats["generated_tokens"]
        assert len(frames) <= stats["elapsed_ms"] / 20 + 3  # batched, never per token
        print(f"\nGPU via WebSocket: {stats['generated_tokens']} tokens, decode {stats['decode_tok_s']} tok/s, "
              f"TTFT {stats['ttft_ms']} ms, {len(frames)} frames in {stats['elapsed_ms']} ms, "
              f"engine {gpu_engine.info}")

        # Stop lands within a frame even at full speed.
        await comm.send_json_to({"type": "run", "mode": "complete", "code": "class Stack:",
                                 "params": {"max_tokens": 8000, "temperature": 0.8, "seed": 2}})
        while json.loads(await comm.receive_from(timeout=60))["type"] != "frame":
            pass
        await comm.send_json_to({"type": "stop"})
        messages = await collect(comm)
        assert messages[-1]["finish_reason"] == "cancelled"
        print(f"stopped after {messages[-1]['stats']['generated_tokens']} tokens")
        await comm.disconnect()


def test_playground_command_serves_the_gpu_default(processes_factory, free_tcp_port, tmp_path):
    port = free_tcp_port()
    procs = processes_factory(tmp_path)
    procs.start("playground", "manage.py", "playground", "--port", str(port), "--model",
                "synthetic:qwen2.5-coder-1.5b", port=port)
    for _ in range(60):  # the worker's first heartbeat follows its warm-up
        html = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read().decode()
        if "random weights" in html:
            break
        time.sleep(0.5)
    assert "random weights" in html and "qwen2.5-coder-1.5b" in html and "cuda" in html, procs.logs()
    print(procs.logs())
