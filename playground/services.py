"""What a run request means: validate a client "run" frame, build the job for the worker.

The consumer calls `parse_run_request` (pure, no I/O) and gets either a `RunRequest` or an
EngineError whose message goes back to the browser as is. The same request is turned into
a job message (`job_message`) that crosses the channel layer as plain JSON-able data, and
the worker rebuilds the engine's `Prompt` and `SamplingParams` from it (`prompt_from_job`,
`params_from_job`). No database or channel-layer access here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.conf import settings

from inference.errors import ParamsError, PromptError
from inference.prompts import Prompt
from inference.sampling import SamplingParams

MODES = ("complete", "infill", "instruct")
# Client key -> (type, SamplingParams field). Only these are accepted from the browser.
PARAM_TYPES = {
    "max_tokens": int,
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "min_p": float,
    "repetition_penalty": float,
    "seed": int,
}


@dataclass(frozen=True)
class RunRequest:
    mode: str
    code: str = ""  # complete: the code; infill: prefix + suffix
    cursor: int | None = None  # infill: len(prefix)
    instruction: str = ""
    params: dict = field(default_factory=dict)  # validated SamplingParams kwargs, JSON-able
    messages: list = field(default_factory=list)  # instruct from the API: the whole chat ({"role", "content"})
    prompt_ids: list = field(default_factory=list)  # complete from the API: the prompt as token ids

    @property
    def prefix(self) -> str:
        return self.code[: self.cursor or 0]

    @property
    def suffix(self) -> str:
        return self.code[self.cursor or 0 :]


def _text(frame: dict, key: str) -> str:
    value = frame.get(key, "")
    if not isinstance(value, str):
        raise PromptError(f"'{key}' must be a string")
    if len(value) > settings.PLAYGROUND_MAX_INPUT_CHARS:
        raise PromptError(f"'{key}' is too long ({len(value)} characters, at most {settings.PLAYGROUND_MAX_INPUT_CHARS})")
    return value


def parse_params(raw) -> dict:
    """Coerce the browser's params to SamplingParams kwargs; ParamsError on anything odd."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ParamsError("'params' must be an object")
    unknown = sorted(set(raw) - set(PARAM_TYPES) - {"stop"})
    if unknown:
        raise ParamsError(f"unknown parameter(s): {', '.join(unknown)}")
    out: dict = {}
    for key, kind in PARAM_TYPES.items():
        value = raw.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            raise ParamsError(f"{key} must be a number, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ParamsError(f"{key} must be a number, got {value!r}") from None
        if kind is int:
            if number != int(number):
                raise ParamsError(f"{key} must be a whole number, got {value!r}")
            out[key] = int(number)
        else:
            out[key] = number
    stop = raw.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ParamsError("stop must be a list of strings")
    stop = [s for s in stop if s]
    if stop:
        out["stop"] = stop
    cap = settings.PLAYGROUND_MAX_TOKENS
    if out.get("max_tokens", 0) > cap:
        raise ParamsError(f"max_tokens must be at most {cap} on this server, got {out['max_tokens']}")
    sampling_params(out)  # the engine's own range checks (ParamsError with its message)
    return out


def sampling_params(params: dict) -> SamplingParams:
    kwargs = dict(params)
    if "stop" in kwargs:
        kwargs["stop"] = tuple(kwargs["stop"])
    return SamplingParams(**kwargs)


def parse_run_request(frame: dict) -> RunRequest:
    """A client {"type": "run", ...} frame -> RunRequest, or PromptError/ParamsError."""
    mode = frame.get("mode")
    if mode not in MODES:
        raise PromptError(f"'mode' must be one of {', '.join(MODES)}, got {mode!r}")
    params = parse_params(frame.get("params"))
    if mode == "complete":
        code = _text(frame, "code")
        if not code:
            raise PromptError("nothing to complete: the editor is empty")
        return RunRequest(mode, code=code, params=params)
    if mode == "infill":
        prefix, suffix = _text(frame, "prefix"), _text(frame, "suffix")
        return RunRequest(mode, code=prefix + suffix, cursor=len(prefix), params=params)
    instruction = _text(frame, "instruction")
    if not instruction.strip():
        raise PromptError("write an instruction first")
    return RunRequest(mode, instruction=instruction, params=params)


def job_message(run_id: int, request: RunRequest, reply_channel: str) -> dict:
    """The message put on the "inference" queue (plain JSON: it may cross Redis)."""
    return {
        "type": "job.run",
        "run_id": run_id,
        "reply_channel": reply_channel,
        "request": asdict(request),
    }


def request_from_job(job: dict) -> RunRequest:
    return RunRequest(**job["request"])


def build_prompt(request: RunRequest) -> Prompt:
    if request.mode == "complete":
        return Prompt.from_ids(request.prompt_ids) if request.prompt_ids else Prompt.completion(request.code)
    if request.mode == "infill":
        return Prompt.fim(request.prefix, request.suffix)
    return Prompt.chat(request.messages or request.instruction)
