"""Async views for /v1/models, /v1/completions and /v1/chat/completions (served by Daphne).

A generation request: authenticate -> parse -> check the model can do it -> check the key's
limits -> record + enqueue (runs.ApiRun) -> a JSON response, or an SSE stream of OpenAI chunks
(queue position as SSE comments while queued, `data: [DONE]` last). A client that disconnects
cancels its run: Django cancels the view (or closes the stream), and ApiRun.events() stops the run.
"""
from __future__ import annotations

import time
from contextlib import aclosing
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from .. import protocol as p
from ..protocol import ApiRequest
from ..services import parse_api_request
from ..views import _live_workers as live_workers  # the dashboard's rule for "online"
from .auth import authenticate, check_limits
from .errors import ApiError
from .format import DONE, ChunkWriter, completion_response, sse, sse_comment
from .runs import ApiRun


def _check_origin(request) -> None:
    """Browsers send Origin on cross-site requests: refuse them (a web page must not drive a local
    keyless server). Programs send no Origin; the playground's own pages share our host."""
    origin = request.headers.get("Origin")
    if origin and urlsplit(origin).netloc != request.get_host():
        raise ApiError(403, "cross-origin requests are not allowed", code="forbidden_origin")


@database_sync_to_async
def _workers() -> list[dict]:
    return [{"model": w.model, "info": w.info or {}, "created": int(w.last_heartbeat.timestamp())}
            for w in live_workers()]


async def _resolve_model(api: ApiRequest) -> str:
    """The model that will serve the request; 404 for a model no live worker serves, 400 for a
    feature the served model lacks. With no live worker yet, the request waits in the queue."""
    workers = await _workers()
    if not workers:
        return api.model or ""
    names = sorted({w["model"] for w in workers})
    if api.model and api.model not in names:
        raise ApiError(404, f"the model {api.model!r} is not served here; available: {', '.join(names)}",
                       param="model", code="model_not_found")
    model = api.model or names[0]
    infos = [w["info"] for w in workers if w["model"] == model]
    if api.run.mode == "infill" and not any(i.get("fim", True) for i in infos):
        raise ApiError(400, f"the model {model!r} has no fill-in-the-middle tokens (<|fim_prefix|>, "
                            "<|fim_suffix|>, <|fim_middle|>): 'suffix' cannot be used with it",
                       param="suffix", code="fim_not_supported")
    if api.kind == "chat" and not any(i.get("chat_template", True) for i in infos):
        raise ApiError(400, f"the model {model!r} has no chat template: use /v1/completions",
                       param="messages", code="chat_not_supported")
    return model


def _parse(kind: str, request) -> ApiRequest:
    """The body through protocol.py's one parse; ProtocolError -> 400 naming the parameter."""
    try:
        body = p.loads(request.body or b"")
    except p.ProtocolError as e:
        raise ApiError(400, f"the request body must be JSON ({e.message})", code="invalid_json") from None
    try:
        return parse_api_request(kind, body)
    except p.ProtocolError as e:
        raise ApiError(400, e.message, param=e.param, code="invalid_value") from None


@csrf_exempt
async def models(request):
    try:
        if request.method != "GET":
            raise ApiError(405, "use GET", code="method_not_allowed")
        _check_origin(request)
        await authenticate(request)
    except ApiError as e:
        return e.response()
    seen, data = set(), []
    for w in await _workers():
        if w["model"] not in seen:
            seen.add(w["model"])
            info = w["info"]
            data.append({"id": w["model"], "object": "model", "created": w["created"], "owned_by": "playground",
                         "meta": {k: info.get(k) for k in ("max_context", "params", "device", "dtype", "fast_path",
                                                            "random_weights", "fim", "chat_template", "weights",
                                                            "weights_detail") if k in info}})
    return JsonResponse({"object": "list", "data": data})


@csrf_exempt
async def completions(request):
    return await _generate(request, "completion")


@csrf_exempt
async def chat_completions(request):
    return await _generate(request, "chat")


async def _generate(request, kind: str):
    try:
        if request.method != "POST":
            raise ApiError(405, "use POST", code="method_not_allowed")
        _check_origin(request)
        caller = await authenticate(request)
        api = _parse(kind, request)
        model = await _resolve_model(api)
        await check_limits(caller)
    except ApiError as e:
        return e.response()
    run = await ApiRun.submit(api, caller)
    headers = {"X-Run-Id": str(run.run_id)}
    if api.stream:
        return StreamingHttpResponse(_stream(run, api, model), content_type="text/event-stream",
                                     headers=headers | {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response = await _whole(run, api, model)
    for k, v in headers.items():
        response[k] = v
    return response


def _error_from_worker(message: dict) -> ApiError:
    if message.get("code") == "invalid_request":  # the engine refused the request (too long, bad ids, ...)
        return ApiError(400, message.get("message", "invalid request"), code="invalid_request")
    return ApiError(500, message.get("message", "the worker failed"), code="worker_error")


async def _whole(run: ApiRun, api: ApiRequest, model: str):
    t0, queue_ms = time.perf_counter(), None
    texts, logprobs = [], ([] if api.logprobs is not None else None)
    async with aclosing(run.events()) as events:
        async for ev in events:
            if ev.kind == "started":
                queue_ms = (time.perf_counter() - t0) * 1000
                model = ev.message.get("model") or model
            elif ev.kind == "frame":
                texts.append(ev.message.get("text", ""))
                if logprobs is not None:
                    logprobs.extend(ev.message.get("logprobs") or [])
            elif ev.kind == "error":
                return _error_from_worker(ev.message).response()
            elif ev.kind == "done":
                stats = ev.message.get("stats") or {}
                stats.setdefault("finish_reason", ev.message.get("finish_reason"))
                return JsonResponse(completion_response(api.kind, run.run_id, model, "".join(texts), stats,
                                                        queue_ms, logprobs))
    return ApiError(500, "the run ended without a result", code="worker_error").response()


async def _stream(run: ApiRun, api: ApiRequest, model: str):
    t0, queue_ms = time.perf_counter(), None
    writer = ChunkWriter(api.kind, run.run_id, model, api.include_usage)
    if api.kind == "chat":
        yield writer.role()
    async with aclosing(run.events()) as events:
        async for ev in events:
            if ev.kind == "queued":
                yield sse_comment(f"queued, {ev.ahead} run(s) ahead")
            elif ev.kind == "started":
                queue_ms = (time.perf_counter() - t0) * 1000
                yield sse_comment("started")
            elif ev.kind == "frame":
                text, logprobs = ev.message.get("text", ""), ev.message.get("logprobs")
                if text or logprobs:
                    yield writer.delta(text, logprobs if api.logprobs is not None else None)
            elif ev.kind == "error":
                yield sse(_error_from_worker(ev.message).body())
                break
            elif ev.kind == "done":
                stats = ev.message.get("stats") or {}
                yield writer.finish(ev.message.get("finish_reason"))
                if api.include_usage:
                    yield writer.usage(stats, queue_ms)
                break
    yield DONE
