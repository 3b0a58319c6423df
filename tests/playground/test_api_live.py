"""The OpenAI-compatible API against live processes, driven by the official `openai` package.

One module-wide deployment in the production layout: a real redis-server on a free loopback
port, `manage.py playground --no-worker` (Daphne, bound to 127.0.0.1) and one
`manage.py playground_worker` serving a tiny random-weight checkpoint whose tokenizer has no
FIM tokens. Content is noise; what is checked is the protocol: shapes, usage, stop strings,
greedy determinism across streamed and whole responses, errors, keys, limits and cancellation.
Tests that create API keys deactivate them again, so every test also runs keyless (loopback).
"""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Write a sort function."}]


@dataclass
class Live:
    base: str
    db: Path
    env: dict
    model: str
    repo: Path

    def client(self, api_key: str = "anything", **kw) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.base}/v1", api_key=api_key, max_retries=0, timeout=20, **kw)

    def sql(self, query: str, *args):
        with sqlite3.connect(self.db, timeout=20) as conn:
            return conn.execute(query, args).fetchall()

    def manage(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "manage.py", *args], cwd=self.repo, env=self.env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def create_key(self, name: str, *options: str) -> str:
        return self.manage("create_api_key", name, *options)

    def deactivate_keys(self):
        self.sql("update playground_apikey set active = 0")

    def run_row(self, run_id: int) -> dict:
        cols = ("status", "source", "finish_reason", "generated_tokens", "mode")
        row = self.sql(f"select {', '.join(cols)} from playground_run where id = ?", run_id)[0]
        return dict(zip(cols, row))


@pytest.fixture(scope="module")
def live(tmp_path_factory, processes_factory, free_tcp_port, module_redis_url, repo_root):
    from inference.synth import SHAPES, write_checkpoint
    from inference.synth_tokenizer import write_tokenizer

    tmp = tmp_path_factory.mktemp("api_live")
    model = write_checkpoint("tiny", tmp / "tiny-nofim", device="cpu")
    write_tokenizer(model, SHAPES["tiny"].vocab_size, fim=False)
    config = json.loads((model / "config.json").read_text())  # room for runs long enough to cancel
    (model / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 16384}))
    port = free_tcp_port()
    procs = processes_factory(tmp, REDIS_URL=module_redis_url)
    procs.start("web", "manage.py", "playground", "--no-worker", "--host", "127.0.0.1", "--port", str(port),
                port=port)
    procs.start("worker", "manage.py", "playground_worker", "--device", "cpu", "--model", str(model),
                "--worker-id", "w1")
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while not httpx.get(f"{base}/v1/models").json()["data"]:
        assert time.monotonic() < deadline, procs.logs()
        time.sleep(0.2)
    yield Live(base, tmp / "db.sqlite3", procs.env, "tiny-nofim", repo_root)
    procs.stop()  # before the module's redis-server goes


def test_models_lists_the_served_model(live):
    models = live.client().models.list()
    assert [m.id for m in models.data] == [live.model]


def test_chat_whole_and_streamed_agree_and_report_usage(live):
    client = live.client()
    whole = client.chat.completions.create(model=live.model, messages=CHAT, max_tokens=24, temperature=0)
    choice = whole.choices[0]
    assert whole.object == "chat.completion" and choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length") and choice.message.content
    usage = whole.usage
    assert usage.completion_tokens <= 24 and usage.prompt_tokens > 10
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    timings = whole.model_extra["timings"]
    assert timings["prompt_n"] == usage.prompt_tokens and timings["predicted_n"] == usage.completion_tokens
    assert timings["ttft_ms"] > 0

    chunks = list(client.chat.completions.create(model=live.model, messages=CHAT, max_tokens=24, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content  # greedy: the same tokens either way
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [choice.finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")

    run_id = int(chunks[0].id.removeprefix("chatcmpl-"))
    row = live.run_row(run_id)
    assert row["status"] == "done" and row["source"] == "api" and row["mode"] == "instruct"
    assert row["generated_tokens"] == usage.completion_tokens


def test_completions_text_and_token_ids_streamed_and_not(live):
    client = live.client()
    whole = client.completions.create(model=live.model, prompt="def add(a, b):", max_tokens=16, temperature=0)
    assert whole.object == "text_completion" and whole.usage.completion_tokens <= 16
    stream = list(client.completions.create(model=live.model, prompt="def add(a, b):", max_tokens=16,
                                            temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in stream) == whole.choices[0].text
    assert stream[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.usage is None for c in stream)  # no include_usage: no usage chunk

    by_ids = client.completions.create(model=live.model, prompt=[5, 6, 7, 8], max_tokens=4)
    assert by_ids.usage.prompt_tokens == 4 and by_ids.usage.completion_tokens <= 4


def test_stop_strings_cut_the_output_before_the_stop(live):
    client = live.client()
    free = client.completions.create(model=live.model, prompt="x = ", max_tokens=40, temperature=0).choices[0].text
    assert len(free) > 8
    stop = free[5:8]
    cut = client.completions.create(model=live.model, prompt="x = ", max_tokens=40, temperature=0, stop=[stop])
    assert cut.choices[0].text == free[:free.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    streamed = client.completions.create(model=live.model, prompt="x = ", max_tokens=40, temperature=0, stop=stop,
                                         stream=True)
    assert "".join(c.choices[0].text for c in streamed) == free[:free.index(stop)]


def test_logprobs_per_token_with_top_alternatives(live):
    client = live.client()
    whole = client.chat.completions.create(model=live.model, messages=CHAT, max_tokens=12, temperature=0,
                                           logprobs=True, top_logprobs=3)
    content = whole.choices[0].logprobs.content
    assert len(content) == whole.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 3 and entry.logprob <= 0
        assert entry.top_logprobs[0].token == entry.token  # greedy: the most likely token was chosen
        assert entry.top_logprobs[0].logprob == entry.logprob
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob >= entry.top_logprobs[2].logprob
    streamed = [c for c in client.chat.completions.create(model=live.model, messages=CHAT, max_tokens=12,
                                                           temperature=0, logprobs=True, top_logprobs=3, stream=True)
                if c.choices and c.choices[0].logprobs]
    assert [e.logprob for c in streamed for e in c.choices[0].logprobs.content] == [e.logprob for e in content]

    legacy = client.completions.create(model=live.model, prompt="def f():", max_tokens=6, temperature=0, logprobs=2)
    lp = legacy.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == legacy.usage.completion_tokens
    assert all(len(top) <= 2 and max(top.values()) == chosen for top, chosen in zip(lp.top_logprobs, lp.token_logprobs))
    assert lp.text_offset[0] == 0
    plain = client.chat.completions.create(model=live.model, messages=CHAT, max_tokens=2)
    assert plain.choices[0].logprobs is None


def test_fill_in_the_middle_is_refused_on_a_model_without_fim_tokens(live):
    with pytest.raises(openai.BadRequestError) as e:
        live.client().completions.create(model=live.model, prompt="def f(", suffix="\n    return x\n", max_tokens=8)
    error = e.value.body
    assert error["param"] == "suffix" and "fill-in-the-middle" in error["message"]


@pytest.mark.parametrize("kwargs, param", [
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": 5}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"n": 2}, "n"),
    ({"stop": [1, 2]}, "stop"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
])
def test_bad_input_is_a_400_with_an_openai_error_object(live, kwargs, param):
    with pytest.raises(openai.BadRequestError) as e:
        live.client().chat.completions.create(model=live.model, messages=CHAT, **kwargs)
    assert e.value.status_code == 400
    assert e.value.body["param"] == param and e.value.body["type"] == "invalid_request_error"
    assert e.value.body["message"]


def test_bad_bodies_and_unknown_models(live):
    r = httpx.post(f"{live.base}/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = httpx.post(f"{live.base}/v1/chat/completions", json={"messages": []})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    r = httpx.post(f"{live.base}/v1/completions", json={"prompt": "x", "some_future_field": 1, "max_tokens": 2})
    assert r.status_code == 200  # unknown fields are ignored, as OpenAI does
    with pytest.raises(openai.NotFoundError):
        live.client().chat.completions.create(model="no-such-model", messages=CHAT, max_tokens=2)
    r = httpx.post(f"{live.base}/v1/completions", json={"prompt": "x"}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403


def test_keys_are_required_once_one_exists(live):
    secret = live.create_key("ci-bot")
    try:
        with pytest.raises(openai.AuthenticationError):
            live.client(api_key="not-the-key").chat.completions.create(model=live.model, messages=CHAT, max_tokens=2)
        r = httpx.get(f"{live.base}/v1/models")
        assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
        ok = live.client(api_key=secret).chat.completions.create(model=live.model, messages=CHAT, max_tokens=2)
        assert live.run_row(int(ok.id.removeprefix("chatcmpl-")))["source"] == "ci-bot"
        stored = live.sql("select key_hash from playground_apikey where name = 'ci-bot'")[0][0]
        assert secret not in stored  # hashed
    finally:
        live.deactivate_keys()


def test_requests_over_the_key_limits_get_429_with_retry_after(live):
    secret = live.create_key("limited", "--rpm", "2", "--max-queued", "0")
    try:
        client = live.client(api_key=secret)
        for _ in range(2):
            client.completions.create(model=live.model, prompt="a", max_tokens=1)
        with pytest.raises(openai.RateLimitError) as e:
            client.completions.create(model=live.model, prompt="a", max_tokens=1)
        assert 1 <= int(e.value.response.headers["Retry-After"]) <= 60
        assert e.value.body["code"] == "rate_limit_exceeded"

        queued = live.client(api_key=live.create_key("one-queued", "--rpm", "0", "--max-queued", "1"))
        queued.completions.create(model=live.model, prompt="a", max_tokens=1)  # nothing queued yet: fine
        live.manage("shell", "-c", "from playground.models import ApiKey, Run; "
                    "key = ApiKey.objects.get(name='one-queued'); "
                    "Run.objects.create(mode='complete', code='x', api_key=key, source=key.name)")  # a run waiting
        try:
            with pytest.raises(openai.RateLimitError) as e:
                queued.chat.completions.create(model=live.model, messages=CHAT, max_tokens=4)
            assert e.value.body["code"] == "too_many_queued_runs" and e.value.response.headers["Retry-After"]
        finally:
            live.sql("update playground_run set status = 'cancelled' where status = 'queued'")
    finally:
        live.deactivate_keys()


def test_a_client_that_disconnects_cancels_its_run_and_frees_the_worker(live):
    client = live.client()
    stream = client.chat.completions.create(model=live.model, messages=CHAT, max_tokens=8000, stream=True)
    chunks = iter(stream)
    first = next(chunks)
    run_id = int(first.id.removeprefix("chatcmpl-"))
    while not (next(chunks).choices[0].delta.content):  # tokens are flowing
        pass
    assert live.run_row(run_id)["status"] == "running"
    stream.close()
    t0 = time.monotonic()
    while live.run_row(run_id)["status"] == "running":
        assert time.monotonic() - t0 < 1.0, "the run was not cancelled within a second"
        time.sleep(0.02)
    row = live.run_row(run_id)
    assert row["status"] == "cancelled" and row["generated_tokens"] < 8000
    t1 = time.monotonic()
    nxt = client.completions.create(model=live.model, prompt="a", max_tokens=1)
    assert nxt.model_extra["timings"]["queue_ms"] < 1000 and time.monotonic() - t1 < 2.0


def test_metrics_scrape_parses_and_agrees_with_the_run_records(live):
    from prometheus_client.parser import text_string_to_metric_families

    live.client().completions.create(model=live.model, prompt="def f():", max_tokens=8)
    response = httpx.get(f"{live.base}/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def total(name):
        return sum(v for (n, _), v in samples.items() if n == name)

    assert total("playground_generated_tokens_total") == live.sql("select sum(generated_tokens) from playground_run")[0][0]
    assert total("playground_runs") == live.sql("select count(*) from playground_run")[0][0]
    assert samples[("playground_runs", (("source", "api"), ("status", "done")))] >= 1
    timed = live.sql("select count(*) from playground_run where status in ('done', 'cancelled') "
                     "and ttft_ms is not null")[0][0]
    assert samples[("playground_ttft_seconds_count", ())] == timed
    assert samples[("playground_ttft_seconds_bucket", (("le", "+Inf"),))] == timed
    assert samples[("playground_decode_tokens_per_second_count", ())] >= 1
    assert samples[("playground_queue_depth", ())] == 0
    assert samples[("playground_workers_up", ())] == 1
    assert samples[("playground_worker_up", (("device", "cpu"), ("model", live.model), ("worker_id", "w1")))] == 1
    assert 0 <= samples[("playground_worker_heartbeat_age_seconds", (("worker_id", "w1"),))] < 10


def test_a_waiting_stream_shows_its_queue_position_and_a_disconnect_while_queued_cancels_it(live):
    body = {"model": live.model, "messages": CHAT, "max_tokens": 8000, "stream": True}
    with httpx.Client(base_url=live.base, timeout=30) as http:
        with http.stream("POST", "/v1/chat/completions", json=body) as busy:
            busy_id = int(busy.headers["X-Run-Id"])
            lines = busy.iter_lines()
            while not next(lines).startswith('data: {"id"') or live.run_row(busy_id)["status"] != "running":
                pass  # the worker is generating for the first stream
            with http.stream("POST", "/v1/chat/completions", json=body) as waiting:
                waiting_id = int(waiting.headers["X-Run-Id"])
                comments = []
                waiting_lines = waiting.iter_lines()  # held: a generator dropped at `break` closes the connection
                for line in waiting_lines:
                    if line.startswith(":"):
                        comments.append(line)
                    if len(comments) == 2:
                        break
                assert comments == [": queued, 0 run(s) ahead"] * 2  # next in line, told every second
                assert live.run_row(waiting_id)["status"] == "queued"
            deadline = time.monotonic() + 5  # (the 1 s bound is the disconnect test's)
            while live.run_row(waiting_id)["status"] == "queued":
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert live.run_row(waiting_id)["status"] == "cancelled"  # never ran
            assert live.run_row(waiting_id)["generated_tokens"] is None
            assert live.run_row(busy_id)["status"] == "running"
    deadline = time.monotonic() + 5  # the busy stream is gone too: its run ends, cancelled (or done if it
    while live.run_row(busy_id)["status"] == "running":  # ended on its own first: the random model's EOS
        assert time.monotonic() < deadline  # can come any time; cancelling a streaming run is the test above)
        time.sleep(0.02)
    assert live.run_row(busy_id)["status"] in ("cancelled", "done")
