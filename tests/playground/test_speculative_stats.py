"""Speculative decoding's numbers on the wire: frames carry the accepted drafted tokens so far, the
OpenAI API's timings carry the run's drafted / accepted counts (llama-server's draft_n names)."""
from __future__ import annotations

import asyncio
import time

from playground.api.format import timings
from playground.worker import FrameStream


async def test_frames_carry_the_accepted_drafted_tokens_so_far():
    stream = FrameStream(asyncio.get_running_loop(), time.perf_counter())
    stream.push([1], "a", time.perf_counter(), accepted=0)
    stream.push([2, 3], "bc", time.perf_counter(), accepted=4)
    stream.close(stats={})
    frames = [f async for f in stream.frames(0.0)]
    assert frames[-1]["accepted"] == 4 and frames[-1]["tokens"] == 3


def test_api_timings_report_speculation():
    stats = {"prompt_tokens": 10, "generated_tokens": 50, "ttft_ms": 5.0, "decode_ms": 20.0, "decode_tok_s": 2450.0,
             "speculative": True, "drafted": 40, "accepted": 30, "verify_steps": 10, "accepted_per_verify": 3.0}
    t = timings(stats, None)
    assert (t["speculative"], t["draft_n"], t["draft_n_accepted"], t["verify_steps"], t["accepted_per_verify"]) == (
        True, 40, 30, 10, 3.0)
    plain = timings({"prompt_tokens": 1, "generated_tokens": 2}, 1.0)
    assert (plain["speculative"], plain["draft_n"], plain["draft_n_accepted"]) == (False, 0, 0)


def test_speculate_is_a_sampling_field_on_both_doors():
    import pytest

    from playground.protocol import ProtocolError, page_params, parse_sampling, sampling_json

    assert parse_sampling({}).speculate is None  # the engine decides (Engine.speculates_by_default)
    assert parse_sampling({"speculate": True}).speculate is True
    assert parse_sampling({"speculate": "off"}).speculate is False
    assert sampling_json(parse_sampling({"speculate": True})) == {"speculate": True}
    assert sampling_json(parse_sampling({"speculate": False})) == {"speculate": False}
    assert page_params()["speculate"] is None  # the page's box starts ticked: "when it keeps the kernels"
    with pytest.raises(ProtocolError, match="speculate must be true or false"):
        parse_sampling({"speculate": 3})
