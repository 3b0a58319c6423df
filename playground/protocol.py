"""The playground's two wires, named once: browser <-> consumer and consumer <-> worker.

Every message type is a constant here and every message is built by a constructor here, so
consumers.py, worker.py, the HTTP views (and the HTTP API) and frontend/src/main.js speak the
same words. Input from outside (a WebSocket text frame, an HTTP JSON body) enters through
`loads` (bounded nesting) and `parse_run` / `parse_sampling`, which raise `ProtocolError`
(message + the offending parameter's name) and never anything else for bad input.

Sampling parameters: `parse_sampling(dict) -> SamplingParams` is the one parse. The engine's
SamplingParams defaults are the only defaults (`page_params` fills them in for the page); the
protocol adds upper bounds so every accepted value is finite and safe for the sampler.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from inference.errors import ParamsError
from inference.prompts import Prompt
from inference.sampling import MAX_STOP_STRINGS, SamplingParams

# -- browser -> consumer -----------------------------------------------------------------------
RUN, STOP, PING = "run", "stop", "ping"
# -- HTTP API (OpenAI-compatible) -> RunRequest ------------------------------------------------
# Unknown fields are ignored, as OpenAI does; features this server lacks are refused, never dropped.
MAX_TOP_LOGPROBS = 20
MAX_API_TEMPERATURE = 2.0  # OpenAI's range
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True)
class ApiRequest:
    """A validated /v1/completions or /v1/chat/completions body."""

    kind: str  # "chat" | "completion"
    run: RunRequest
    model: str | None = None
    stream: bool = False
    include_usage: bool = False
    logprobs: int | None = None  # None: off; k: each token's logprob and the top k alternatives
    fit_context: bool = False  # no max_tokens given: generate up to the context (within the server cap)


def _api_value(body: dict, key: str, kinds: tuple, what: str):
    value = body.get(key)
    if value is None:
        return None
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise ProtocolError(f"'{key}' must be {what}, got {type(value).__name__}", key)
    return value


def _refuse_unsupported(body: dict) -> None:
    for key in ("n", "best_of"):
        value = _api_value(body, key, (int,), "an integer")
        if value is not None and value != 1:
            raise ProtocolError(f"only {key}=1 is supported (batch size 1): send separate requests for more "
                                f"choices", key)
    if body.get("echo"):
        raise ProtocolError("echo is not supported", "echo")
    for key in ("tools", "functions", "logit_bias"):
        if body.get(key):
            raise ProtocolError(f"'{key}' is not supported by this server", key)
    if body.get("tool_choice") not in (None, "none"):
        raise ProtocolError("tool calling is not supported by this server", "tool_choice")
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise ProtocolError('only response_format {"type": "text"} is supported', "response_format")
    for key in ("presence_penalty", "frequency_penalty"):
        if body.get(key) not in (None, 0, 0.0) or isinstance(body.get(key), bool):
            raise ProtocolError(f"'{key}' is not supported (leave it out or send 0)", key)


def _api_sampling(body: dict, max_tokens_keys: tuple[str, ...], cap: int | None) -> tuple[SamplingParams, bool]:
    """SamplingParams from OpenAI's fields, and whether max_tokens was left to the server."""
    raw: dict = {}
    for key in max_tokens_keys:  # max_completion_tokens wins over the older max_tokens
        if body.get(key) is not None:
            try:
                raw["max_tokens"] = parse_sampling({"max_tokens": body[key]}, max_tokens_cap=cap).max_tokens
            except ProtocolError as e:
                raise ProtocolError(e.message.replace("max_tokens", key), key) from None
            break
    fit = "max_tokens" not in raw
    raw["max_tokens"] = raw.get("max_tokens", cap or _DEFAULTS.max_tokens)
    for key in ("temperature", "top_p", "seed", "stop"):
        if body.get(key) is not None:
            raw[key] = body[key]
    if isinstance(raw.get("temperature"), (int, float)) and not isinstance(raw["temperature"], bool) \
            and raw["temperature"] > MAX_API_TEMPERATURE:
        raise ProtocolError(f"temperature must be between 0 and {MAX_API_TEMPERATURE:g}, got {raw['temperature']}",
                            "temperature")
    if isinstance(raw.get("seed"), int) and not isinstance(raw["seed"], bool) and raw["seed"] < 0:
        raw["seed"] %= 2**63  # OpenAI takes any 64-bit integer
    return parse_sampling(raw, max_tokens_cap=cap), fit


def _api_stream(body: dict) -> tuple[bool, bool]:
    stream = bool(_api_value(body, "stream", (bool,), "a boolean"))
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ProtocolError("'stream_options' must be an object", "stream_options")
    include_usage = bool((options or {}).get("include_usage"))
    if include_usage and not stream:
        raise ProtocolError("'stream_options' is only allowed with stream=true", "stream_options")
    return stream, include_usage


def _api_model(body: dict) -> str | None:
    return _api_value(body, "model", (str,), "a string") or None


def parse_completion(body, *, max_input_chars: int, max_tokens_cap: int | None = None) -> ApiRequest:
    """A /v1/completions body: prompt (text, token ids, or a batch of one), suffix (FIM), logprobs (int)."""
    if not isinstance(body, dict):
        raise ProtocolError("the request body must be a JSON object")
    _refuse_unsupported(body)
    params, fit = _api_sampling(body, ("max_tokens",), max_tokens_cap)
    stream, include_usage = _api_stream(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    suffix = body.get("suffix")
    if suffix is not None:
        suffix = text(suffix, "suffix", max_input_chars)
    if isinstance(prompt, str):
        prompt = text(prompt, "prompt", max_input_chars)
        if suffix is None:
            if not prompt:
                raise ProtocolError("'prompt' is empty", "prompt")
            run = RunRequest("complete", code=prompt, params=params)
        else:
            if not (prompt or suffix):
                raise ProtocolError("fill-in-the-middle needs a prompt or a suffix (both are empty)", "suffix")
            if len(prompt) + len(suffix) > max_input_chars:
                raise ProtocolError(f"prompt + suffix is too long (at most {max_input_chars} characters)", "suffix")
            run = RunRequest("infill", code=prompt + suffix, cursor=len(prompt), params=params)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        if suffix is not None:
            raise ProtocolError("'suffix' needs a text prompt, not token ids", "suffix")
        if any(t < 0 or t >= 2**31 for t in prompt):
            raise ProtocolError("token ids must be integers in [0, 2^31)", "prompt")
        if len(prompt) > max_input_chars:
            raise ProtocolError(f"too many prompt tokens ({len(prompt)}, at most {max_input_chars})", "prompt")
        run = RunRequest("complete", prompt_ids=tuple(prompt), params=params)
    elif isinstance(prompt, list):
        raise ProtocolError("'prompt' must be a string, a list of token ids, or a list holding one of those "
                            "(batches of several prompts are not supported)", "prompt")
    else:
        raise ProtocolError("'prompt' is required (a string or a list of token ids)", "prompt")
    logprobs = _api_value(body, "logprobs", (int,), "an integer")
    if logprobs is not None and not 0 <= logprobs <= MAX_TOP_LOGPROBS:
        raise ProtocolError(f"'logprobs' must be between 0 and {MAX_TOP_LOGPROBS}", "logprobs")
    return ApiRequest("completion", run, _api_model(body), stream, include_usage, logprobs, fit)


def _chat_content(n: int, message: dict) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text only
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ProtocolError("only text content parts are supported", f"messages[{n}].content")
            texts.append(part["text"])
        return "".join(texts)
    raise ProtocolError("message content must be a string or a list of text parts", f"messages[{n}].content")


def _chat_turns(raw, max_input_chars: int) -> tuple[str, tuple, str]:
    """OpenAI messages -> (system prompt, earlier turns, last user message), the shape of a browser
    follow-up: leading system/developer messages become the system prompt; consecutive messages of
    one role are joined; the conversation must then alternate user/assistant and end with the user."""
    if not isinstance(raw, list) or not raw:
        raise ProtocolError("'messages' must be a non-empty list of {role, content} objects", "messages")
    merged: list[dict] = []
    total = 0
    for n, message in enumerate(raw):
        if not isinstance(message, dict):
            raise ProtocolError("each message must be an object with 'role' and 'content'", f"messages[{n}]")
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise ProtocolError(f"role must be one of {', '.join(CHAT_ROLES)}, got {_short(role)}",
                                f"messages[{n}].role")
        if message.get("tool_calls"):
            raise ProtocolError("tool calls are not supported by this server", f"messages[{n}].tool_calls")
        role, content = CHAT_ROLES[role], text(_chat_content(n, message), f"messages[{n}].content", max_input_chars)
        total += len(content)
        if role == "system" and any(m["role"] != "system" for m in merged):
            raise ProtocolError("system messages must come before the conversation", f"messages[{n}].role")
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"] += "\n\n" + content
        else:
            merged.append({"role": role, "content": content})
    if total > max_input_chars:
        raise ProtocolError(f"the messages are too long ({total} characters, at most {max_input_chars})", "messages")
    system = merged.pop(0)["content"] if merged[0]["role"] == "system" else ""
    if not merged or merged[-1]["role"] != "user":
        raise ProtocolError("the last message must be from the user", "messages")
    if merged[0]["role"] != "user":
        raise ProtocolError("the conversation must start with a user message (after any system message)",
                            "messages")
    return system, tuple(merged[:-1]), merged[-1]["content"]


def parse_chat(body, *, max_input_chars: int, max_tokens_cap: int | None = None) -> ApiRequest:
    """A /v1/chat/completions body: messages (system/developer/user/assistant, text), logprobs + top_logprobs."""
    if not isinstance(body, dict):
        raise ProtocolError("the request body must be a JSON object")
    _refuse_unsupported(body)
    params, fit = _api_sampling(body, ("max_completion_tokens", "max_tokens"), max_tokens_cap)
    stream, include_usage = _api_stream(body)
    system, turns, instruction = _chat_turns(body.get("messages"), max_input_chars)
    logprobs = None
    if _api_value(body, "logprobs", (bool,), "a boolean"):
        top = _api_value(body, "top_logprobs", (int,), "an integer") or 0
        if not 0 <= top <= MAX_TOP_LOGPROBS:
            raise ProtocolError(f"'top_logprobs' must be between 0 and {MAX_TOP_LOGPROBS}", "top_logprobs")
        logprobs = top
    elif body.get("top_logprobs") is not None:
        raise ProtocolError("'top_logprobs' needs logprobs=true", "top_logprobs")
    run = RunRequest("instruct", instruction=instruction, turns=turns, system=system, params=params)
    return ApiRequest("chat", run, _api_model(body), stream, include_usage, logprobs, fit)


# -- consumer -> browser -----------------------------------------------------------------------
ACCEPTED, QUEUED, STARTED, FRAME, DONE, ERROR, PONG = "accepted", "queued", "started", "frame", "done", "error", "pong"
# -- consumer -> worker (the "inference" queue and each worker's control channel) ---------------
JOB_RUN, JOB_CANCEL = "job.run", "job.cancel"
# -- worker -> consumer (the consumer's reply channel; Channels maps "gen.x" to gen_x) ----------
GEN_STARTED, GEN_FRAME, GEN_DONE, GEN_ERROR = "gen.started", "gen.frame", "gen.done", "gen.error"
LAYER_PROBE = "layer.probe"  # a consumer to itself: arrives once the channel layer is back

MODES = ("complete", "infill", "instruct")
MAX_DEPTH = 8  # JSON nesting of a frame or body: {"params": {"stop": [...]}} needs 3
MAX_STOP_CHARS = 200
MAX_TURNS = 64  # earlier turns of an instruct conversation (32 exchanges)

# Upper bounds beyond the engine's own range checks: every accepted value is finite and
# harmless for the sampler (temperature 1e308 would turn logits into inf/NaN).
MAX_TEMPERATURE = 100.0
MAX_TOP_K = 1_000_000  # larger than any vocabulary; top_k >= vocab is the same as off
MAX_REPETITION_PENALTY = 100.0
MAX_SEED = 2**63 - 1
# Lower bounds where a tiny divisor would push fp32 logits to inf (0 = greedy stays allowed).
MIN_TEMPERATURE = 1e-4
MIN_REPETITION_PENALTY = 1e-2
MAX_TOKENS_LIMIT = 1_000_000  # when the caller gives no server cap

# The sampling fields a client may set, and their JSON types.
SAMPLING_FIELDS = {
    "max_tokens": int,
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "min_p": float,
    "repetition_penalty": float,
    "seed": int,
    "stop": list,
    "speculate": bool,  # prompt-lookup speculation for greedy runs (default off: see SamplingParams)
}
_DEFAULTS = SamplingParams()


class ProtocolError(ValueError):
    """Input that breaks the protocol: `message` for the user, `param` the field (or None)."""

    def __init__(self, message: str, param: str | None = None):
        message, param = _encodable(message), None if param is None else _encodable(str(param)[:100])
        super().__init__(message)
        self.message, self.param = message, param

    def frame(self) -> dict:
        return error(self.message, param=self.param)


def _encodable(s: str) -> str:
    """Text that encodes as UTF-8 (lone surrogates from the input shown as escapes)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


# -- input ---------------------------------------------------------------------------------------
def loads(text: str | bytes) -> object:
    """JSON text -> value; ProtocolError for non-JSON, NaN/Infinity or nesting over MAX_DEPTH."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ProtocolError(f"JSON nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ProtocolError:
        raise
    except (ValueError, TypeError):  # JSONDecodeError, UnicodeDecodeError, >4300-digit ints
        raise ProtocolError("frames must be JSON text") from None
    if _depth(value) > MAX_DEPTH:
        raise ProtocolError(f"JSON nested too deeply (at most {MAX_DEPTH} levels)")
    return value


def _reject_constant(name: str):
    raise ProtocolError(f"{name} is not a number this server accepts (JSON has no {name})")


def _depth(value) -> int:
    """Nesting depth of dicts/lists without recursion (0 for a scalar)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        stack.extend((child, level + 1) for child in node)
    return deepest


def text(value, param: str, max_chars: int) -> str:
    """A string that is valid Unicode (no lone surrogates) and at most max_chars long."""
    if not isinstance(value, str):
        raise ProtocolError(f"'{param}' must be a string", param)
    if len(value) > max_chars:
        raise ProtocolError(f"'{param}' is too long ({len(value)} characters, at most {max_chars})", param)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ProtocolError(f"'{param}' is not valid Unicode text (a lone surrogate at character {e.start})",
                            param) from None
    return value


def _short(value) -> str:
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    r = repr(value)
    return r if len(r) <= 40 else r[:37] + "..."


def _number(key: str, value, kind: type):
    if isinstance(value, str):  # form fields and query strings send numbers as text
        try:
            value = int(value) if kind is int and value.strip().lstrip("+-").isdigit() else float(value)
        except ValueError:
            raise ProtocolError(f"{key} must be a number, got {_short(value)}", key) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"{key} must be a number, got {_short(value)}", key)
    if isinstance(value, float) and not math.isfinite(value):
        raise ProtocolError(f"{key} must be a finite number, got {_short(value)}", key)
    if kind is int:
        if isinstance(value, float):
            if value != int(value):
                raise ProtocolError(f"{key} must be a whole number, got {_short(value)}", key)
            value = int(value)
        return value
    try:
        return float(value)
    except OverflowError:  # an int beyond float range
        raise ProtocolError(f"{key} must be a finite number, got a {len(str(value))}-digit integer", key) from None


def _flag(key: str, value) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "on", "off", "1", "0"):
        return value.strip().lower() in ("true", "on", "1")  # form fields and query strings send text
    if not isinstance(value, bool):
        raise ProtocolError(f"{key} must be true or false, got {_short(value)}", key)
    return value


def parse_sampling(raw, *, max_tokens_cap: int | None = None) -> SamplingParams:
    """The client's sampling params (a dict; absent, None or "" = default) -> SamplingParams.

    Raises ProtocolError(message, param) for unknown keys, wrong types, non-finite or
    out-of-range values; the engine's own range checks give the message where they apply.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ProtocolError("'params' must be an object", "params")
    unknown = sorted(str(k)[:40] for k in set(raw) - set(SAMPLING_FIELDS))
    if unknown:
        raise ProtocolError(f"unknown parameter(s): {', '.join(unknown[:5])}", unknown[0])
    kwargs: dict = {}
    for key, kind in SAMPLING_FIELDS.items():
        value = raw.get(key)
        if value is None or value == "" or key == "stop":
            continue
        kwargs[key] = _flag(key, value) if kind is bool else _number(key, value, kind)
    if "stop" in raw:
        kwargs["stop"] = _stop(raw["stop"])
    caps = {"temperature": MAX_TEMPERATURE, "top_k": MAX_TOP_K, "repetition_penalty": MAX_REPETITION_PENALTY,
            "seed": MAX_SEED, "max_tokens": MAX_TOKENS_LIMIT if max_tokens_cap is None else max_tokens_cap}
    for key, upper in caps.items():
        if key in kwargs and kwargs[key] > upper:
            where = " on this server" if key == "max_tokens" else ""
            raise ProtocolError(f"{key} must be at most {upper}{where}, got {_short(kwargs[key])}", key)
    if 0 < kwargs.get("temperature", 1) < MIN_TEMPERATURE:
        raise ProtocolError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE}, "
                            f"got {_short(kwargs['temperature'])}", "temperature")
    if 0 < kwargs.get("repetition_penalty", 1) < MIN_REPETITION_PENALTY:
        raise ProtocolError(f"repetition_penalty must be at least {MIN_REPETITION_PENALTY}, "
                            f"got {_short(kwargs['repetition_penalty'])}", "repetition_penalty")
    for key, value in kwargs.items():  # the engine's checks, one field at a time: the message names it
        try:
            SamplingParams(**{key: tuple(value) if key == "stop" else value})
        except ParamsError as e:
            raise ProtocolError(str(e), key) from None
    return SamplingParams(**kwargs)


def _stop(value) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ProtocolError("stop must be a list of strings", "stop")
    stop = tuple(text(s, "stop", MAX_STOP_CHARS) for s in value if s)
    if len(stop) > MAX_STOP_STRINGS:
        raise ProtocolError(f"at most {MAX_STOP_STRINGS} stop strings, got {len(stop)}", "stop")
    return stop


def sampling_json(params: SamplingParams) -> dict:
    """The client-settable fields that differ from the defaults, as JSON (Run rows, jobs)."""
    out = {}
    for key in SAMPLING_FIELDS:
        value = getattr(params, key)
        if value != getattr(_DEFAULTS, key):
            out[key] = list(value) if key == "stop" else value
    return out


def page_params(saved: dict | None = None) -> dict:
    """Every client-settable field with its engine default, overlaid with `saved` (the page)."""
    out = {key: list(v) if key == "stop" else v for key in SAMPLING_FIELDS for v in [getattr(_DEFAULTS, key)]}
    return {**out, **(saved or {})}


@dataclass(frozen=True)
class RunRequest:
    """A validated {"type": "run"} frame, or an API request (a chat maps onto system + turns +
    instruction; a completion may give token ids)."""

    mode: str
    code: str = ""  # complete: the code; infill: prefix + suffix
    cursor: int | None = None  # infill: len(prefix)
    instruction: str = ""
    params: SamplingParams = field(default_factory=SamplingParams)
    # instruct follow-ups: the conversation before `instruction` ({"role", "content"} dicts,
    # user/assistant alternating, starting with user) and an optional system prompt.
    turns: tuple = ()
    system: str = ""
    prompt_ids: tuple[int, ...] = ()  # API completion: the prompt as token ids

    @property
    def prefix(self) -> str:
        return self.code[: self.cursor or 0]

    @property
    def suffix(self) -> str:
        return self.code[self.cursor or 0 :]

    def prompt(self) -> Prompt:
        if self.mode == "complete":
            return Prompt.from_ids(self.prompt_ids) if self.prompt_ids else Prompt.completion(self.code)
        if self.mode == "infill":
            return Prompt.fim(self.prefix, self.suffix)
        return Prompt.chat([*self.turns, {"role": "user", "content": self.instruction}], system=self.system or None)

    def to_json(self) -> dict:
        out = {"mode": self.mode, "code": self.code, "cursor": self.cursor, "instruction": self.instruction,
               "params": sampling_json(self.params), "turns": [dict(t) for t in self.turns], "system": self.system}
        if self.prompt_ids:
            out["prompt_ids"] = list(self.prompt_ids)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "RunRequest":
        """The job's copy (already validated once; parsed again so the worker holds real params)."""
        return cls(mode=data["mode"], code=data["code"], cursor=data["cursor"], instruction=data["instruction"],
                   params=parse_sampling(data.get("params")), turns=tuple(data.get("turns") or ()),
                   system=data.get("system") or "", prompt_ids=tuple(data.get("prompt_ids") or ()))


def parse_mode(value) -> str:
    if value not in MODES:
        raise ProtocolError(f"'mode' must be one of {', '.join(MODES)}, got {_short(value)}", "mode")
    return value


def parse_run(frame: dict, *, max_input_chars: int, max_tokens_cap: int | None = None) -> RunRequest:
    """A browser {"type": "run", ...} frame -> RunRequest, or ProtocolError."""
    mode = parse_mode(frame.get("mode"))
    params = parse_sampling(frame.get("params"), max_tokens_cap=max_tokens_cap)

    def field_text(key: str) -> str:
        return text(frame.get(key, ""), key, max_input_chars)

    if mode == "complete":
        code = field_text("code")
        if not code:
            raise ProtocolError("nothing to complete: the editor is empty", "code")
        return RunRequest(mode, code=code, params=params)
    if mode == "infill":
        prefix, suffix = field_text("prefix"), field_text("suffix")
        if len(prefix) + len(suffix) > max_input_chars:
            raise ProtocolError(f"prefix + suffix is too long (at most {max_input_chars} characters)", "prefix")
        return RunRequest(mode, code=prefix + suffix, cursor=len(prefix), params=params)
    instruction = field_text("instruction")
    if not instruction.strip():
        raise ProtocolError("write an instruction first", "instruction")
    turns, system = parse_turns(frame.get("turns"), max_input_chars), field_text("system")
    if len(instruction) + len(system) + sum(len(t["content"]) for t in turns) > max_input_chars:
        raise ProtocolError(f"the conversation is too long (at most {max_input_chars} characters in all); "
                            "start a new chat", "turns")
    return RunRequest(mode, instruction=instruction, params=params, turns=turns, system=system)


def parse_turns(value, max_input_chars: int) -> tuple:
    """An instruct run's earlier turns: [{"role": "user"|"assistant", "content": str}, ...],
    alternating from "user" to a last "assistant" (absent or [] = a new conversation)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ProtocolError("'turns' must be a list of {role, content} objects", "turns")
    if len(value) > MAX_TURNS:
        raise ProtocolError(f"at most {MAX_TURNS} earlier turns, got {len(value)}; start a new chat", "turns")
    if len(value) % 2:
        raise ProtocolError("'turns' must end with the assistant's answer (pairs of user, assistant)", "turns")
    turns = []
    for n, turn in enumerate(value):
        role = "user" if n % 2 == 0 else "assistant"
        if not isinstance(turn, dict) or set(turn) != {"role", "content"} or turn["role"] != role:
            raise ProtocolError(f"turn {n} must be {{\"role\": \"{role}\", \"content\": \"...\"}}", "turns")
        turns.append({"role": role, "content": text(turn["content"], "turns", max_input_chars)})
    return tuple(turns)


# -- consumer -> browser -------------------------------------------------------------------------
def error(message: str, *, run_id: int | None = None, param: str | None = None, code: str | None = None) -> dict:
    """Without run_id: the frame was refused, nothing queued. With run_id: that run ended in error.
    `code` names a refusal a client may want to act on (e.g. "rate_limited", "no_worker")."""
    msg = {"type": ERROR, "message": message}
    if run_id is not None:
        msg["run_id"] = run_id
    if param is not None:
        msg["param"] = param
    if code is not None:
        msg["code"] = code
    return msg


def accepted(run_id: int, queued_ahead: int) -> dict:
    return {"type": ACCEPTED, "run_id": run_id, "queued_ahead": queued_ahead}


def queued(run_id: int, queued_ahead: int, waited_s: float, workers: int) -> dict:
    """Sent while a run waits: its live position, how long it has waited, workers online."""
    return {"type": QUEUED, "run_id": run_id, "queued_ahead": queued_ahead, "waited_s": round(waited_s, 1),
            "workers": workers}


def started(run_id: int, model: str | None, worker_id: str | None) -> dict:
    return {"type": STARTED, "run_id": run_id, "model": model, "worker_id": worker_id}


def frame(seq: int, text: str, tokens: int, tok_s: float, ttft_ms: float | None, elapsed_ms: float) -> dict:
    return {"type": FRAME, "seq": seq, "text": text, "tokens": tokens, "tok_s": tok_s, "ttft_ms": ttft_ms,
            "elapsed_ms": elapsed_ms}


def done(run_id: int, finish_reason: str, stats: dict) -> dict:
    return {"type": DONE, "run_id": run_id, "finish_reason": finish_reason, "stats": stats}


def pong() -> dict:
    return {"type": PONG}


def dumps(message: dict) -> str:
    """One outgoing text frame (ASCII JSON: any text the server echoes stays encodable)."""
    return json.dumps(message)


# -- consumer <-> worker -------------------------------------------------------------------------
def job_run(run_id: int, request: RunRequest, reply_channel: str) -> dict:
    """The message put on the "inference" queue (plain JSON: it may cross Redis)."""
    return {"type": JOB_RUN, "run_id": run_id, "reply_channel": reply_channel, "request": request.to_json()}


def job_cancel(run_id: int) -> dict:
    return {"type": JOB_CANCEL, "run_id": run_id}


def gen_started(run_id: int, worker_channel: str, worker_id: str, model: str) -> dict:
    return {"type": GEN_STARTED, "run_id": run_id, "worker_channel": worker_channel, "worker_id": worker_id,
            "model": model}


def gen_frame(run_id: int, seq: int, **frame_fields) -> dict:
    """frame_fields: text, tokens, tok_s, ttft_ms, elapsed_ms (see `frame`)."""
    return {"type": GEN_FRAME, "run_id": run_id, "seq": seq, **frame_fields}


def gen_done(run_id: int, finish_reason: str, stats: dict) -> dict:
    return {"type": GEN_DONE, "run_id": run_id, "finish_reason": finish_reason, "stats": stats}


def gen_error(run_id: int, message: str, code: str | None = None) -> dict:
    """code "invalid_request": the engine refused the request itself (too long for the context,
    bad token ids); else the worker failed."""
    msg = {"type": GEN_ERROR, "run_id": run_id, "message": message}
    if code is not None:
        msg["code"] = code
    return msg


def layer_probe() -> dict:
    return {"type": LAYER_PROBE}


def frame_from_gen(message: dict) -> dict:
    """A worker's gen.frame -> the browser's frame (same fields, no run_id)."""
    return frame(message["seq"], message["text"], message["tokens"], message["tok_s"], message["ttft_ms"],
                 message["elapsed_ms"])

