"""Run-request validation: bad input is refused where it enters, with the engine's message."""
import pytest

from inference.errors import ParamsError, PromptError
from playground.services import build_prompt, parse_params, parse_run_request


def test_negative_temperature_is_refused_with_the_engines_message():
    with pytest.raises(ParamsError, match="temperature"):
        parse_params({"temperature": -1})


def test_params_are_coerced_and_empty_values_dropped():
    assert parse_params({"max_tokens": "64", "temperature": 0.5, "seed": "", "stop": ["\n\n", ""]}) == {
        "max_tokens": 64, "temperature": 0.5, "stop": ["\n\n"]}


@pytest.mark.parametrize("raw, message", [
    ({"max_tokens": 1.5}, "whole number"),
    ({"top_k": "many"}, "must be a number"),
    ({"max_tokens": True}, "must be a number"),
    ({"bogus": 1}, "unknown parameter"),
    ({"stop": [1]}, "list of strings"),
    ({"max_tokens": 10**9}, "at most"),
    ("nope", "must be an object"),
])
def test_malformed_params_get_one_clear_error(raw, message):
    with pytest.raises(ParamsError, match=message):
        parse_params(raw)


def test_each_mode_builds_its_prompt():
    complete = parse_run_request({"mode": "complete", "code": "def f():"})
    assert build_prompt(complete).mode == "completion"
    infill = parse_run_request({"mode": "infill", "prefix": "def f(", "suffix": "):\n"})
    assert (infill.prefix, infill.suffix) == ("def f(", "):\n")
    prompt = build_prompt(infill)
    assert (prompt.mode, prompt.prefix, prompt.suffix) == ("fim", "def f(", "):\n")
    assert build_prompt(parse_run_request({"mode": "instruct", "instruction": "sort a list"})).mode == "chat"


@pytest.mark.parametrize("frame, message", [
    ({"mode": "poem"}, "mode"),
    ({"mode": "complete", "code": ""}, "empty"),
    ({"mode": "complete", "code": 42}, "string"),
    ({"mode": "instruct", "instruction": "  "}, "instruction"),
])
def test_bad_run_requests_are_refused(frame, message):
    with pytest.raises(PromptError, match=message):
        parse_run_request(frame)
