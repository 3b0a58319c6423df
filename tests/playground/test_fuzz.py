"""Seeded fuzz of /ws/generate/: thousands of hostile frames, each answered with an `error`
frame or a valid run, the socket never closed, and no traceback in the log.

The categories are the ones that once closed sockets with 1011: NaN/Infinity/1e400/10**400 in
numeric params, huge top_k, lone surrogates in code or stop strings, 100,000-deep nesting,
plus wrong types, unknown keys, truncated JSON and binary frames. No worker runs: a valid run
is accepted, then stopped while queued.
"""
from __future__ import annotations

import json
import logging
import random

import pytest
from channels.testing import WebsocketCommunicator

from playground.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
NUMERIC = ["max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "seed"]
# JSON texts for numbers, including what json.dumps cannot write.
NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400, "1" + "0" * 30, "-1" + "0" * 30,
           "1e308", "-1", "0", "0.5", "1", "2", "7", "1.5", "9223372036854775808", "18446744073709551616",
           '"abc"', '""', "null", "true", "[]", "{}", '"1e400"', '"nan"', '"\\u00b2"', '"12"', "-0.0", "1e-320"]
TEXTS = ['"def f():"', '"\\ud800"', '"x\\udfff"', '"\\ud83d\\ude00 ok"', '""', "42", "null", '["a"]', '{"a": 1}',
         '"\\u0000"', '"' + "y" * 1000 + '"']
MODES = ['"complete"', '"infill"', '"instruct"', '"poem"', "7", "null", '["complete"]']


def fuzz_frames(seed: int, n: int) -> list:
    rng = random.Random(seed)
    frames = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.45:  # a run with hostile params
            params = ", ".join(f'"{rng.choice(NUMERIC)}": {rng.choice(NUMBERS)}' for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.3:
                params += ', "stop": [' + ", ".join(rng.choice(TEXTS) for _ in range(rng.randint(0, 3))) + "]"
            frames.append('{"type": "run", "mode": "complete", "code": "def f():", "params": {' + params + "}}")
        elif kind < 0.7:  # a run with hostile text fields
            fields = {"code": rng.choice(TEXTS), "prefix": rng.choice(TEXTS), "suffix": rng.choice(TEXTS),
                      "instruction": rng.choice(TEXTS)}
            body = ", ".join(f'"{k}": {v}' for k, v in fields.items() if rng.random() < 0.7)
            frames.append('{"type": "run", "mode": ' + rng.choice(MODES) + (", " + body if body else "") + "}")
        elif kind < 0.8:  # deep nesting, at the top or inside params
            depth = rng.choice([9, 50, 1000, 100_000])
            nest = "[" * depth + "]" * depth
            frames.append(nest if rng.random() < 0.5 else '{"type": "run", "mode": "complete", "code": "x", '
                                                           '"params": {"stop": ' + nest + "}}")
        elif kind < 0.9:  # structure: wrong type fields, unknown frames, non-objects
            frames.append(rng.choice([
                '{"type": "dance"}', '{"type": 5}', '{"type": null}', '{"type": ["run"]}', "[]", "3", '"run"',
                "null", '{"type": "run", "params": 5}', '{"type": "run", "mode": "complete", "code": "x", '
                '"params": {"\\ud800": 1}}', '{"type": "stop"}', '{"type": "ping"}', '{"type": "\\ud800"}',
            ]))
        else:  # broken text and binary frames
            valid = '{"type": "run", "mode": "complete", "code": "def f():", "params": {"max_tokens": 4}}'
            cut = rng.randint(1, len(valid) - 1)
            frames.append(rng.choice([valid[:cut], valid[cut:], b"\x00\xff\xfe", "\ud800", "{" * 3, "NaN"]))
    return frames


async def test_every_fuzzed_frame_gets_an_error_or_a_valid_run(layer, caplog, settings):
    from playground.limits import ClientLimits

    # The fuzz is one fast client: lift the per-client limits (tested in test_reliability.py).
    settings.PLAYGROUND_CLIENT_LIMITS = ClientLimits(runs_per_minute=10**6, messages_per_s=1e6, burst=10**6)
    caplog.set_level(logging.WARNING)
    comm = WebsocketCommunicator(application, "/ws/generate/", headers=ORIGIN)
    assert (await comm.connect())[0]
    counts = {"error": 0, "run": 0, "pong": 0}
    for i, frame in enumerate(fuzz_frames(seed=26, n=3000)):
        if isinstance(frame, bytes):
            await comm.send_to(bytes_data=frame)
        else:
            await comm.send_to(text_data=frame)
        reply = json.loads(await comm.receive_from(timeout=5))
        if reply["type"] == "accepted":  # a valid run: stop it while it is queued
            counts["run"] += 1
            await comm.send_json_to({"type": "stop"})
            while (done := json.loads(await comm.receive_from(timeout=5)))["type"] == "queued":
                pass  # a live queue-position update may come first
            assert done["type"] == "done" and done["finish_reason"] == "cancelled", (i, frame)
        elif reply["type"] == "pong":
            counts["pong"] += 1
        else:
            assert reply["type"] == "error" and reply["message"] and "run_id" not in reply, (i, frame, reply)
            counts["error"] += 1
    assert await comm.receive_nothing(timeout=0.1)  # nothing pending, socket still open
    await comm.send_json_to({"type": "ping"})
    assert json.loads(await comm.receive_from(timeout=5))["type"] == "pong"
    await comm.disconnect()
    assert counts["run"] > 100 and counts["error"] > 1500  # both branches were exercised
    problems = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not problems, problems[0].getMessage()


@pytest.mark.parametrize("raw", [
    {"temperature": 100, "top_k": 1_000_000, "seed": 2**63 - 1},
    {"temperature": 1e-4, "top_p": 1e-300, "repetition_penalty": 100},
    {"temperature": 0.7, "min_p": 1.0, "repetition_penalty": 1e-2},
])
def test_the_extremes_the_protocol_accepts_run_in_the_engine(engine, raw):
    from inference.prompts import Prompt
    from playground.protocol import parse_sampling

    params = parse_sampling({**raw, "max_tokens": 6})
    finish = list(engine.generate(Prompt.completion("def f():"), params))[-1]
    assert finish.stats.generated_tokens >= 1 and finish.stats.finish_reason in ("length", "stop")
