"""The protocol's parses bound to this server's settings (input caps), for the consumer and
the views: `parse_run_request` for a run frame, `parse_params` for saved params, and
`parse_api_request` for the OpenAI-compatible API's bodies.

Pure functions, no database or channel-layer access; errors are protocol.ProtocolError.
"""
from __future__ import annotations

from django.conf import settings

from inference.sampling import SamplingParams

from .protocol import ApiRequest, RunRequest, parse_chat, parse_completion, parse_run, parse_sampling


def parse_params(raw) -> SamplingParams:
    return parse_sampling(raw, max_tokens_cap=settings.PLAYGROUND_MAX_TOKENS)


def parse_run_request(frame: dict) -> RunRequest:
    return parse_run(frame, max_input_chars=settings.PLAYGROUND_MAX_INPUT_CHARS,
                     max_tokens_cap=settings.PLAYGROUND_MAX_TOKENS)


def parse_api_request(kind: str, body) -> ApiRequest:
    """kind "chat" or "completion"; the body already decoded from JSON."""
    parse = parse_chat if kind == "chat" else parse_completion
    return parse(body, max_input_chars=settings.PLAYGROUND_MAX_INPUT_CHARS,
                 max_tokens_cap=settings.PLAYGROUND_MAX_TOKENS)
