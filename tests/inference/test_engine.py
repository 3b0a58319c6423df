"""The Engine API the web worker and the CLI use: streaming events, stats, stop conditions,
cancellation, clear errors before any device work, and the `inference.generate` CLI."""

import json
import subprocess
import sys

import pytest

from inference.engine import Engine, FinishEvent, TokenEvent
from inference.errors import CheckpointError, EngineError, ParamsError, PromptError
from inference.prompts import Prompt
from inference.sampling import SamplingParams


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from inference.synth import write_checkpoint

    path = write_checkpoint("tiny", tmp_path_factory.mktemp("engine") / "tiny", device="cpu")
    return Engine.from_pretrained(path, device="cpu", max_context=256)


def run(engine, prompt, **params):
    events = list(engine.generate(prompt, SamplingParams(**params)))
    assert isinstance(events[-1], FinishEvent) and all(isinstance(e, TokenEvent) for e in events[:-1])
    ids = [t for e in events[:-1] for t in e.token_ids]
    return ids, "".join(e.text for e in events[:-1]), events[-1]


def test_generate_streams_tokens_then_one_finish_event_with_stats(engine):
    ids, text, fin = run(engine, Prompt.completion("def fib(n):"), max_tokens=20, ignore_eos=True)
    assert len(ids) == 20
    assert text == fin.text == engine.tokenizer.decode(ids, skip_special_tokens=True)
    s = fin.stats
    assert (s.generated_tokens, s.finish_reason) == (20, "length")
    assert s.prompt_tokens == len(engine.tokenizer.encode("def fib(n):"))
    assert s.ttft_ms > 0 and s.decode_tok_s > 0 and s.decode_ms > 0


def test_engine_info_says_what_runs(engine):
    info = engine.info
    assert info["runner"] == "reference" and info["fast_path"] is False
    assert info["device"] == "cpu" and info["dtype"] == "float32"
    assert info["random_weights"] is True and info["max_context"] == 256


def test_greedy_is_deterministic_and_seeded_sampling_repeats(engine):
    p = Prompt.completion("import os\n")
    assert run(engine, p, max_tokens=16)[0] == run(engine, p, max_tokens=16)[0]
    kw = dict(max_tokens=16, temperature=1.0, top_p=0.95, seed=11, ignore_eos=True)
    assert run(engine, p, **kw)[0] == run(engine, p, **kw)[0]
    assert run(engine, p, **kw)[0] != run(engine, p, **{**kw, "seed": 12})[0]


def test_stop_string_is_not_emitted_and_text_before_it_is(engine):
    p = Prompt.completion("class A:\n")
    _, full, _ = run(engine, p, max_tokens=40, ignore_eos=True)
    stop = full[10:13]
    assert stop and stop in full
    _, text, fin = run(engine, p, max_tokens=40, ignore_eos=True, stop=[stop])
    assert text == full[:full.index(stop)]
    assert fin.stats.finish_reason == "stop"


def test_stop_token_id_ends_generation(engine):
    p = Prompt.completion("for i in range(10):")
    ids, _, _ = run(engine, p, max_tokens=30, ignore_eos=True)
    stop_id = ids[7]
    first = ids.index(stop_id)
    got, _, fin = run(engine, p, max_tokens=30, stop_token_ids=[stop_id])
    assert got == ids[:first + 1]  # the stop token itself is reported, nothing after it
    assert fin.stats.finish_reason == "stop"


def test_cancel_stops_between_steps(engine):
    class CancelAfter:
        def __init__(self, n):
            self.n = n

        def is_set(self):
            self.n -= 1
            return self.n < 0

    events = list(engine.generate(Prompt.completion("x = "), SamplingParams(max_tokens=200, ignore_eos=True),
                                  cancel=CancelAfter(30)))
    fin = events[-1]
    assert fin.stats.finish_reason == "cancelled"
    assert 0 < fin.stats.generated_tokens < 200


def test_over_long_prompt_is_refused_before_any_work(engine):
    with pytest.raises(PromptError, match="exceeds the context of 256 tokens"):
        next(engine.generate(Prompt.from_ids([5] * 200), SamplingParams(max_tokens=100)))


def test_chat_and_fim_prompts_generate(engine):
    assert run(engine, Prompt.chat("write a sort"), max_tokens=5, ignore_eos=True)[2].stats.generated_tokens == 5
    assert run(engine, Prompt.fim("def f(x):\n    ", "\n    return y"), max_tokens=5,
               ignore_eos=True)[2].stats.generated_tokens == 5


def test_bad_device_and_dtype_are_clear_errors(engine):
    path = engine.info["path"]
    with pytest.raises(EngineError, match="dtype"):
        Engine.from_pretrained(path, dtype="int8")
    with pytest.raises(EngineError, match="device"):
        Engine.from_pretrained(path, device="tpu")


def test_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError):
        Engine.from_pretrained(tmp_path / "nope")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "inference.generate", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_json_prints_exactly_one_object(engine):
    r = cli("--model", engine.info["path"], "--prompt", "def add(a, b):", "--max-tokens", "8", "--ignore-eos",
            "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"token_ids", "text", "finish_reason", "prompt_tokens", "ttft_ms", "decode_tok_s"}
    assert len(out["token_ids"]) == 8 and out["finish_reason"] == "length"
    ids, text, _ = run(engine, Prompt.completion("def add(a, b):"), max_tokens=8, ignore_eos=True)
    assert out["token_ids"] == ids and out["text"] == text


def test_cli_streams_text_and_prints_stats_to_stderr(engine):
    r = cli("--model", engine.info["path"], "--prompt-ids", "10,11,12", "--max-tokens", "5", "--ignore-eos",
            "--temperature", "0.7", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert "5 tokens, length" in r.stderr and "tok/s" in r.stderr


def test_cli_bad_input_is_one_line_error(engine):
    r = cli("--model", engine.info["path"], "--prompt", "x", "--max-tokens", "5", "--top-p", "3")
    assert r.returncode == 2 and r.stderr.strip() == "error: top_p must be in (0, 1], got 3.0"
    r = cli("--model", "/definitely/not/here", "--prompt", "x", "--max-tokens", "5")
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr


def test_params_errors_are_engine_errors():
    assert issubclass(ParamsError, EngineError)


def test_on_cpu_one_step_is_in_flight_so_nothing_runs_after_a_stop(engine):
    ids, _, _ = run(engine, Prompt.completion("def fib(n):"), max_tokens=8, ignore_eos=True)
    stop_at = next(i for i in range(1, 8) if ids[i] not in ids[:i])
    steps = []
    real_step = engine.runner.step
    engine.runner.step = lambda: steps.append(1) or real_step()
    try:
        got, _, fin = run(engine, Prompt.completion("def fib(n):"), max_tokens=8, stop_token_ids=[ids[stop_at]],
                          speculate=False)  # the plain loop: one runner.step per token
    finally:
        del engine.runner.step
    assert got == ids[:stop_at + 1] and fin.stats.finish_reason == "stop"
    assert len(steps) == stop_at  # prefill gave token 0; one step per later token, none beyond the stop
