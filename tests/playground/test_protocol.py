"""The protocol boundary: one parse of run frames and sampling params, refusing bad input with
one clear message that names the parameter, and never raising anything but ProtocolError."""
import json

import pytest

from inference.sampling import SamplingParams
from playground import protocol as p


def test_params_are_coerced_and_empty_values_dropped():
    params = p.parse_sampling({"max_tokens": "64", "temperature": 0.5, "seed": "", "stop": ["\n\n", ""]})
    assert params == SamplingParams(max_tokens=64, temperature=0.5, stop=("\n\n",))
    assert p.sampling_json(params) == {"max_tokens": 64, "temperature": 0.5, "stop": ["\n\n"]}


def test_the_engines_defaults_are_the_only_defaults():
    assert p.parse_sampling({}) == p.parse_sampling(None) == SamplingParams()
    page = p.page_params()
    defaults = SamplingParams()
    assert page == {"max_tokens": defaults.max_tokens, "temperature": defaults.temperature, "top_p": defaults.top_p,
                    "top_k": defaults.top_k, "min_p": defaults.min_p,
                    "repetition_penalty": defaults.repetition_penalty, "seed": None, "stop": [],
                    "speculate": defaults.speculate}
    assert p.page_params({"top_k": 5})["top_k"] == 5


@pytest.mark.parametrize("raw, param, message", [
    ({"temperature": -1}, "temperature", "temperature must be a number >= 0"),
    ({"max_tokens": 1.5}, "max_tokens", "whole number"),
    ({"top_k": "many"}, "top_k", "must be a number"),
    ({"max_tokens": True}, "max_tokens", "must be a number"),
    ({"bogus": 1}, "bogus", "unknown parameter"),
    ({"stop": [1]}, "stop", "list of strings"),
    ({"max_tokens": 10**9}, "max_tokens", "at most 8192"),
    ({"temperature": float("inf")}, "temperature", "finite"),
    ({"top_p": float("nan")}, "top_p", "finite"),
    ({"temperature": 1e308}, "temperature", "at most"),
    ({"temperature": 10**400}, "temperature", "finite"),
    ({"top_k": 10**30}, "top_k", "at most"),
    ({"seed": 2**63}, "seed", "at most"),
    ({"seed": -1}, "seed", "seed"),
    ({"repetition_penalty": 1e300}, "repetition_penalty", "at most"),
    ({"repetition_penalty": 1e-300}, "repetition_penalty", "at least"),
    ({"temperature": 1e-300}, "temperature", "0 \\(greedy\\) or at least"),
    ({"max_tokens": "1e400"}, "max_tokens", "finite"),
    ({"stop": ["ok", "\ud800"]}, "stop", "lone surrogate"),
    ({"stop": ["x"] * 17}, "stop", "at most 16"),
    ("nope", "params", "must be an object"),
])
def test_bad_params_get_one_clear_error_naming_the_param(raw, param, message):
    with pytest.raises(p.ProtocolError, match=message) as err:
        p.parse_sampling(raw, max_tokens_cap=8192)
    assert err.value.param == param
    frame = err.value.frame()
    assert frame["type"] == "error" and frame["param"] == param
    json.dumps(frame).encode("utf-8")  # always sendable


def test_each_mode_builds_its_prompt():
    complete = p.parse_run({"mode": "complete", "code": "def f():"}, max_input_chars=100)
    assert complete.prompt().mode == "completion"
    infill = p.parse_run({"mode": "infill", "prefix": "def f(", "suffix": "):\n"}, max_input_chars=100)
    assert (infill.prefix, infill.suffix) == ("def f(", "):\n")
    prompt = infill.prompt()
    assert (prompt.mode, prompt.prefix, prompt.suffix) == ("fim", "def f(", "):\n")
    assert p.parse_run({"mode": "instruct", "instruction": "sort a list"}, max_input_chars=100).prompt().mode == "chat"


def test_a_request_survives_the_job_message_round_trip():
    request = p.parse_run({"mode": "infill", "prefix": "a", "suffix": "b",
                           "params": {"seed": 3, "stop": ["\n"], "top_k": 4}}, max_input_chars=100)
    job = json.loads(json.dumps(p.job_run(7, request, "reply!x")))
    assert job["type"] == p.JOB_RUN and p.RunRequest.from_json(job["request"]) == request


@pytest.mark.parametrize("frame, param, message", [
    ({"mode": "poem"}, "mode", "mode"),
    ({"mode": ["complete"]}, "mode", "mode"),
    ({"mode": "complete", "code": ""}, "code", "empty"),
    ({"mode": "complete", "code": 42}, "code", "string"),
    ({"mode": "complete", "code": "x" * 101}, "code", "too long"),
    ({"mode": "complete", "code": "def f(\udc00):"}, "code", "lone surrogate at character 6"),
    ({"mode": "instruct", "instruction": "  "}, "instruction", "instruction"),
])
def test_bad_run_requests_are_refused(frame, param, message):
    with pytest.raises(p.ProtocolError, match=message) as err:
        p.parse_run(frame, max_input_chars=100)
    assert err.value.param == param


@pytest.mark.parametrize("text, message", [
    ("not json", "JSON text"),
    ('{"type": "run", "params": {"temperature": NaN}}', "NaN"),
    ('{"a": Infinity}', "Infinity"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"a": ' * 9 + "1" + "}" * 9, "nested too deeply"),
    ("1" * 5000, "JSON text"),  # beyond Python's int-string limit
])
def test_frames_that_are_not_plain_bounded_json_are_refused(text, message):
    with pytest.raises(p.ProtocolError, match=message):
        p.loads(text)


def test_nesting_up_to_the_limit_is_fine():
    assert p.loads('{"a": ' * 7 + "[1]" + "}" * 7)
