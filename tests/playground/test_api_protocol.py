"""The API's bodies through protocol.py: OpenAI fields become the same RunRequest the browser
sends (a chat maps onto system prompt + earlier turns + last user message), and every bad or
unsupported field is a ProtocolError naming it. Pure functions: no server, no database."""
from __future__ import annotations

import pytest

from playground.protocol import ProtocolError, RunRequest, parse_chat, parse_completion

LIMITS = {"max_input_chars": 1000, "max_tokens_cap": 512}


def chat(**body):
    return parse_chat({"messages": [{"role": "user", "content": "hi"}], **body}, **LIMITS)


def completion(**body):
    return parse_completion({"prompt": "def f():", **body}, **LIMITS)


def test_a_chat_maps_onto_system_turns_and_instruction_and_round_trips_the_job():
    api = parse_chat({"model": "m", "messages": [
        {"role": "developer", "content": "Be terse."},
        {"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
        {"role": "user", "content": "c"}, {"role": "user", "content": "d"}]}, **LIMITS)
    run = api.run
    assert (run.mode, run.system, run.instruction) == ("instruct", "Be terse.", "c\n\nd")
    assert run.turns == ({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    assert RunRequest.from_json(run.to_json()) == run
    messages = run.prompt().messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]


def test_sampling_fields_and_defaults():
    api = chat(max_completion_tokens=7, max_tokens=99, temperature=0.5, top_p=0.9, seed=-1, stop="\n\n")
    params = api.run.params
    assert (params.max_tokens, params.temperature, params.top_p, params.stop) == (7, 0.5, 0.9, ("\n\n",))
    assert 0 <= params.seed < 2**63 and not api.fit_context
    fit = chat()
    assert fit.fit_context and fit.run.params.max_tokens == 512  # up to the context, within the server cap
    assert chat(stream=True, stream_options={"include_usage": True}).include_usage
    assert chat(logprobs=True, top_logprobs=3).logprobs == 3 and chat().logprobs is None


def test_completion_prompts_text_ids_batch_of_one_and_suffix():
    assert completion().run.code == "def f():"
    assert parse_completion({"prompt": [[1, 2, 3]]}, **LIMITS).run.prompt_ids == (1, 2, 3)
    fim = completion(suffix="\n    return 1\n")
    assert fim.run.mode == "infill" and (fim.run.prefix, fim.run.suffix) == ("def f():", "\n    return 1\n")
    assert completion(logprobs=2).logprobs == 2


@pytest.mark.parametrize("body, param", [
    ({"n": 2}, "n"), ({"best_of": 3}, "best_of"), ({"echo": True}, "echo"),
    ({"tools": [{"type": "function"}]}, "tools"), ({"tool_choice": "auto"}, "tool_choice"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"presence_penalty": 0.5}, "presence_penalty"), ({"logit_bias": {"1": 5}}, "logit_bias"),
    ({"temperature": 2.5}, "temperature"), ({"temperature": "hot"}, "temperature"), ({"top_p": 0}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": 513}, "max_tokens"), ({"stop": [1]}, "stop"),
    ({"stream": "yes"}, "stream"), ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"top_logprobs": 2}, "top_logprobs"), ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"messages": []}, "messages"), ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}, "messages"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"},
                   {"role": "user", "content": "c"}]}, "messages[1].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content"),
])
def test_chat_refusals_name_the_parameter(body, param):
    with pytest.raises(ProtocolError) as e:
        chat(**body)
    assert e.value.param == param and e.value.message


@pytest.mark.parametrize("body, param", [
    ({"prompt": None}, "prompt"), ({"prompt": ""}, "prompt"), ({"prompt": ["a", "b"]}, "prompt"),
    ({"prompt": [1, -2]}, "prompt"), ({"prompt": [1, 2], "suffix": "x"}, "suffix"),
    ({"prompt": "x" * 1001}, "prompt"), ({"prompt": "x", "logprobs": 21}, "logprobs"), ({"prompt": "x", "logprobs": True}, "logprobs"),
])
def test_completion_refusals_name_the_parameter(body, param):
    with pytest.raises(ProtocolError) as e:
        parse_completion(body, **LIMITS)
    assert e.value.param == param


def test_unknown_fields_are_ignored():
    assert chat(user="me", metadata={"a": 1}, store=False, parallel_tool_calls=False).run.instruction == "hi"
