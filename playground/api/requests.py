"""Parse an OpenAI request body into a RunRequest (the same job the browser sends) plus the
response options; every problem is an ApiError(400) naming the offending parameter.

Unknown fields are ignored, as OpenAI does; features this server does not have (n > 1, tools,
JSON mode, penalties, echo, ...) are refused rather than silently dropped.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from django.conf import settings

from inference.errors import EngineError
from inference.sampling import MAX_STOP_STRINGS

from ..services import RunRequest, sampling_params
from .errors import ApiError

MAX_TOP_LOGPROBS = 20
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True)
class ApiRequest:
    kind: str  # "chat" | "completion"
    run: RunRequest
    model: str | None
    stream: bool = False
    include_usage: bool = False
    logprobs: int | None = None  # None: off; k: the chosen token's logprob and the top k
    fit_context: bool = False  # no max_tokens given: generate up to the context (capped by the server)


def _bad(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value")


def _get(body: dict, key: str, kinds: tuple, what: str):
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        raise _bad(key, f"'{key}' must be {what}, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(key, f"'{key}' must be a finite number")
    return value


def _number(body, key, lo, hi):
    value = _get(body, key, (int, float), "a number")
    if value is not None and not lo <= value <= hi:
        raise _bad(key, f"'{key}' must be between {lo} and {hi}, got {value}")
    return value


def _refuse_unsupported(body: dict) -> None:
    n = _get(body, "n", (int,), "an integer")
    if n is not None and n != 1:
        raise _bad("n", "only n=1 is supported (batch size 1): send separate requests for more choices")
    best_of = _get(body, "best_of", (int,), "an integer")
    if best_of is not None and best_of != 1:
        raise _bad("best_of", "best_of is not supported")
    if body.get("echo"):
        raise _bad("echo", "echo is not supported")
    for key in ("tools", "functions", "logit_bias"):
        if body.get(key):
            raise _bad(key, f"'{key}' is not supported by this server")
    if body.get("tool_choice") not in (None, "none"):
        raise _bad("tool_choice", "tool calling is not supported by this server")
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise _bad("response_format", "only response_format {\"type\": \"text\"} is supported")
    for key in ("presence_penalty", "frequency_penalty"):
        value = _number(body, key, -2, 2)
        if value:
            raise _bad(key, f"'{key}' is not supported (use 0)")


def _params(body: dict, max_tokens_keys: tuple[str, ...]) -> tuple[dict, bool]:
    """SamplingParams kwargs (JSON-able) and whether max_tokens was left to the server."""
    params: dict = {}
    cap = settings.PLAYGROUND_MAX_TOKENS
    max_tokens = None
    for key in max_tokens_keys:
        value = _get(body, key, (int,), "an integer")
        if value is not None:
            if not 1 <= value <= cap:
                raise _bad(key, f"'{key}' must be between 1 and {cap} on this server, got {value}")
            max_tokens = value
            break
    params["max_tokens"] = max_tokens or cap
    temperature = _number(body, "temperature", 0, 2)
    if temperature is not None:
        params["temperature"] = float(temperature)
    top_p = _number(body, "top_p", 0, 1)
    if top_p is not None:
        if top_p == 0:
            raise _bad("top_p", "'top_p' must be greater than 0")
        params["top_p"] = float(top_p)
    seed = _get(body, "seed", (int,), "an integer")
    if seed is not None:
        if seed < 0:
            seed %= 2**63  # OpenAI accepts any 64-bit integer
        params["seed"] = seed
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise _bad("stop", "'stop' must be a string or a list of strings")
        stop = [s for s in stop if s]
        if len(stop) > MAX_STOP_STRINGS:
            raise _bad("stop", f"at most {MAX_STOP_STRINGS} stop strings, got {len(stop)}")
        if stop:
            params["stop"] = stop
    try:
        sampling_params(params)  # the engine's own checks, one message each
    except EngineError as e:
        raise ApiError(400, str(e), code="invalid_value") from None
    return params, max_tokens is None


def _stream_options(body: dict) -> tuple[bool, bool]:
    stream = _get(body, "stream", (bool,), "a boolean") or False
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _bad("stream_options", "'stream_options' must be an object")
    include_usage = bool((options or {}).get("include_usage"))
    if include_usage and not stream:
        raise _bad("stream_options", "'stream_options' is only allowed with stream=true")
    return stream, include_usage


def _model(body: dict) -> str | None:
    return _get(body, "model", (str,), "a string") or None


def _text_limit(param: str, text: str) -> str:
    if len(text) > settings.PLAYGROUND_MAX_INPUT_CHARS:
        raise _bad(param, f"'{param}' is too long ({len(text)} characters, at most "
                          f"{settings.PLAYGROUND_MAX_INPUT_CHARS})")
    return text


def parse_completion(body) -> ApiRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    _refuse_unsupported(body)
    params, fit = _params(body, ("max_tokens",))
    stream, include_usage = _stream_options(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    suffix = _get(body, "suffix", (str,), "a string")
    if isinstance(prompt, str):
        if not prompt and suffix is None:
            raise _bad("prompt", "'prompt' is empty")
        _text_limit("prompt", prompt)
        if suffix is not None:
            _text_limit("suffix", suffix)
            if not (prompt or suffix):
                raise _bad("suffix", "fill-in-the-middle needs a prompt or a suffix (both are empty)")
            run = RunRequest("infill", code=prompt + suffix, cursor=len(prompt), params=params)
        else:
            run = RunRequest("complete", code=prompt, params=params)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        if suffix is not None:
            raise _bad("suffix", "'suffix' needs a text prompt, not token ids")
        if any(t < 0 for t in prompt):
            raise _bad("prompt", "token ids must be non-negative")
        run = RunRequest("complete", prompt_ids=list(prompt), params=params)
    elif isinstance(prompt, list):
        raise _bad("prompt", "'prompt' must be a string, a list of token ids, or a list holding one of those "
                             "(batches of several prompts are not supported)")
    else:
        raise _bad("prompt", "'prompt' is required (a string or a list of token ids)")
    logprobs = _get(body, "logprobs", (int,), "an integer")
    if logprobs is not None and not 0 <= logprobs <= MAX_TOP_LOGPROBS:
        raise _bad("logprobs", f"'logprobs' must be between 0 and {MAX_TOP_LOGPROBS}")
    return ApiRequest("completion", run, _model(body), stream, include_usage, logprobs, fit)


def _content(n: int, message: dict) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text only
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad(f"messages[{n}].content", "only text content parts are supported")
            texts.append(part["text"])
        return "".join(texts)
    raise _bad(f"messages[{n}].content", "message content must be a string or a list of text parts")


def parse_chat(body) -> ApiRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    _refuse_unsupported(body)
    params, fit = _params(body, ("max_completion_tokens", "max_tokens"))
    stream, include_usage = _stream_options(body)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("messages", "'messages' must be a non-empty list of {role, content} objects")
    messages = []
    for n, message in enumerate(raw):
        if not isinstance(message, dict):
            raise _bad(f"messages[{n}]", "each message must be an object with 'role' and 'content'")
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise _bad(f"messages[{n}].role", f"role must be one of {', '.join(CHAT_ROLES)}, got {role!r}")
        if message.get("tool_calls"):
            raise _bad(f"messages[{n}].tool_calls", "tool calls are not supported by this server")
        messages.append({"role": CHAT_ROLES[role], "content": _content(n, message)})
    _text_limit("messages", "".join(m["content"] for m in messages))
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), messages[-1]["content"])
    logprobs = None
    if _get(body, "logprobs", (bool,), "a boolean"):
        top = _get(body, "top_logprobs", (int,), "an integer") or 0
        if not 0 <= top <= MAX_TOP_LOGPROBS:
            raise _bad("top_logprobs", f"'top_logprobs' must be between 0 and {MAX_TOP_LOGPROBS}")
        logprobs = top
    elif body.get("top_logprobs") is not None:
        raise _bad("top_logprobs", "'top_logprobs' needs logprobs=true")
    run = RunRequest("instruct", instruction=last_user, messages=messages, params=params)
    return ApiRequest("chat", run, _model(body), stream, include_usage, logprobs, fit)
