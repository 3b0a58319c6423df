"""OpenAI's response shapes: whole responses, SSE chunks, usage and llama-server-style timings.

Pure functions of the gen.* messages; nothing here touches the queue or the database.
"""
from __future__ import annotations

import json
import time


def response_id(kind: str, run_id: int) -> str:
    return f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{run_id}"


def usage(stats: dict) -> dict:
    prompt, completion = stats.get("prompt_tokens") or 0, stats.get("generated_tokens") or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def timings(stats: dict, queue_ms: float | None) -> dict:
    """As llama-server's `timings` (prompt_* / predicted_*), plus TTFT and the time spent queued.

    prompt_ms is the time to the first token (tokenize + prefill + first sample); predicted_ms
    and predicted_per_second are the decode after the first token, timed on the device (on the host
    clock for speculative runs); draft_n / draft_n_accepted (llama-server's names) and
    accepted_per_verify are the prompt-lookup speculation's."""
    prompt_n, predicted_n = stats.get("prompt_tokens") or 0, stats.get("generated_tokens") or 0
    prompt_ms, decode_ms = stats.get("ttft_ms") or 0.0, stats.get("decode_ms") or 0.0
    return {
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_second": round(prompt_n / prompt_ms * 1000, 2) if prompt_ms else 0.0,
        "predicted_n": predicted_n,
        "predicted_ms": decode_ms,
        "predicted_per_second": stats.get("decode_tok_s") or 0.0,
        "ttft_ms": prompt_ms,
        "queue_ms": None if queue_ms is None else round(queue_ms, 1),
        "speculative": bool(stats.get("speculative")),
        "draft_n": stats.get("drafted") or 0,
        "draft_n_accepted": stats.get("accepted") or 0,
        "verify_steps": stats.get("verify_steps") or 0,
        "accepted_per_verify": stats.get("accepted_per_verify") or 0.0,
    }


def finish_reason(reason: str | None) -> str:
    return "length" if reason == "length" else "stop"


# -- logprobs ------------------------------------------------------------------------------------

def chat_logprobs(entries: list[dict]) -> dict:
    """Frame entries {"token", "logprob", "top": [[token, logprob], ...]} -> chat's logprobs object."""
    def item(token, logprob):
        return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}

    return {"content": [{**item(e["token"], e["logprob"]), "top_logprobs": [item(t, lp) for t, lp in e["top"]]}
                        for e in entries]}


def completion_logprobs(entries: list[dict], offset: int = 0) -> dict:
    """The legacy completions shape: parallel lists (text_offset counts characters from `offset`)."""
    offsets, at = [], offset
    for e in entries:
        offsets.append(at)
        at += len(e["token"])
    return {"tokens": [e["token"] for e in entries], "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [dict(e["top"]) for e in entries], "text_offset": offsets}


# -- whole responses -----------------------------------------------------------------------------

def completion_response(kind: str, run_id: int, model: str, text: str, stats: dict, queue_ms: float | None,
                        logprobs: list[dict] | None) -> dict:
    choice: dict = {"index": 0, "finish_reason": finish_reason(stats.get("finish_reason"))}
    if kind == "chat":
        choice["message"] = {"role": "assistant", "content": text}
        choice["logprobs"] = None if logprobs is None else chat_logprobs(logprobs)
    else:
        choice["text"] = text
        choice["logprobs"] = None if logprobs is None else completion_logprobs(logprobs)
    return {
        "id": response_id(kind, run_id),
        "object": "chat.completion" if kind == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(stats),
        "timings": timings(stats, queue_ms),
    }


# -- streaming -----------------------------------------------------------------------------------

def sse(data) -> bytes:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def sse_comment(text: str) -> bytes:
    return f": {text}\n\n".encode()


DONE = b"data: [DONE]\n\n"


class ChunkWriter:
    """Builds the SSE chunks of one streamed response (same id, created and model on each)."""

    def __init__(self, kind: str, run_id: int, model: str, include_usage: bool):
        self.kind, self.include_usage = kind, include_usage
        self.base = {"id": response_id(kind, run_id),
                     "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
                     "created": int(time.time()), "model": model}
        self.text_offset = 0

    def _chunk(self, choice: dict) -> bytes:
        data = {**self.base, "choices": [choice]}
        if self.include_usage:
            data["usage"] = None
        return sse(data)

    def role(self) -> bytes:
        """Chat's first chunk: the assistant role with empty content."""
        return self._chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                            "finish_reason": None})

    def delta(self, text: str, logprobs: list[dict] | None = None) -> bytes:
        if self.kind == "chat":
            choice = {"index": 0, "delta": {"content": text},
                      "logprobs": None if logprobs is None else chat_logprobs(logprobs), "finish_reason": None}
        else:
            choice = {"index": 0, "text": text, "finish_reason": None,
                      "logprobs": None if logprobs is None else completion_logprobs(logprobs, self.text_offset)}
            self.text_offset += len(text)
        return self._chunk(choice)

    def finish(self, reason: str | None) -> bytes:
        if self.kind == "chat":
            choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason(reason)}
        else:
            choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish_reason(reason)}
        return self._chunk(choice)

    def usage(self, stats: dict, queue_ms: float | None) -> bytes:
        """The last chunk with include_usage: no choices, the usage (and our timings)."""
        return sse({**self.base, "choices": [], "usage": usage(stats), "timings": timings(stats, queue_ms)})
