"""HTTP views: the editor page (also a reopened run's transcript), save -> share link,
read-only share page, the session's run history (an htmx partial, filtered by mode or
text), and the staff-only dashboard.

Everything user- or model-written reaches templates as plain strings (autoescaped) or
through `json_script`; nothing is marked safe. Generation itself happens over the
WebSocket (consumers.py), never here.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import Q
from django.http import HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from . import sessions
from .models import Playground, Run, WorkerStatus
from .protocol import MODES, ProtocolError, loads, page_params, parse_turns, sampling_json, text
from .records import live_workers_since
from .services import parse_params
from .sparkline import sparkline_points

DEFAULT_CODE = 'def fibonacci(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n'
HISTORY_LENGTH = 20


def _live_workers():
    """Workers whose heartbeat is within the lease (the same rule that fails their runs)."""
    return list(live_workers_since(settings.PLAYGROUND_RELIABILITY.lease_s))


def _snapshot(obj) -> dict:
    return {
        "mode": obj.mode,
        "code": obj.code,
        "cursor": obj.cursor,
        "instruction": obj.instruction,
        "turns": obj.turns if isinstance(obj.turns, list) else [],
        "system": obj.system_prompt,
        "params": page_params(obj.params if isinstance(obj.params, dict) else None),
    }


def _transcript(run: Run) -> dict:
    """What the page needs to show a finished run as it ended (the editor's ?run=N)."""
    return {
        "run_id": run.pk,
        "mode": run.mode,
        "status": run.status,
        "output": run.output,
        "finish_reason": run.finish_reason,
        "error": run.error,
        "stats": run.stats or {},
    }


@require_GET
def editor(request):
    session_key = sessions.visitor_key(request.COOKIES)  # reading the page stores nothing (sessions.py)
    # origin "new" lets the page restore the browser's unsaved draft instead of the default code.
    initial = {"mode": "complete", "code": DEFAULT_CODE, "cursor": None, "instruction": "",
               "params": page_params(), "forked_from": None, "origin": "new"}
    fork = request.GET.get("fork")
    if fork:
        source = get_object_or_404(Playground, slug=fork)
        initial = {**_snapshot(source), "forked_from": source.slug, "origin": "fork",
                   "transcript": {"run_id": None, "mode": source.mode, "status": Run.DONE, "output": source.output,
                                  "finish_reason": (source.stats or {}).get("finish_reason", ""), "error": "",
                                  "stats": source.stats or {}}}
    elif (run_pk := _pk(request.GET.get("run"))) is not None:
        run = get_object_or_404(Run, pk=run_pk, session_key=session_key)
        initial = {**_snapshot(run), "forked_from": None, "origin": "run", "transcript": _transcript(run)}
    workers = _live_workers()
    response = render(request, "playground/editor.html", {
        "initial": initial,
        "workers": workers,
        "random_weights": any(w.random_weights for w in workers),
        # Infill needs fill-in-the-middle tokens: offered unless every live worker's model lacks them.
        "infill": not workers or any(((w.info or {}).get("card") or {}).get("fim", True) for w in workers),
        "fork": initial["forked_from"],
    })
    sessions.issue_key(request, response)
    return response


def _pk(value) -> int | None:
    """A positive decimal id from a query string, else None ("²".isdigit() is True)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


@require_POST
def save(request):
    """JSON body from the editor -> a new Playground; answers {"slug", "url"}."""
    try:
        body = loads(request.body or b"{}")
        if not isinstance(body, dict) or body.get("mode") not in MODES:
            raise ProtocolError(f"mode must be one of {', '.join(MODES)}", "mode")
        limit = settings.PLAYGROUND_MAX_INPUT_CHARS
        code, instruction = text(body.get("code", ""), "code", limit), text(body.get("instruction", ""),
                                                                            "instruction", limit)
        if len(code) + len(instruction) > limit:
            raise ProtocolError("too long to save", "code")
        params = sampling_json(parse_params(body.get("params")))
        turns, system = parse_turns(body.get("turns"), limit), text(body.get("system", ""), "system", limit)
    except ProtocolError as e:
        return HttpResponseBadRequest(e.message, content_type="text/plain; charset=utf-8")
    cursor = body.get("cursor")
    cursor = cursor if isinstance(cursor, int) and 0 <= cursor <= len(code) else None
    session_key = sessions.visitor_key(request.COOKIES) or ""
    run = None
    run_id = body.get("run_id")
    if session_key and isinstance(run_id, int) and 0 < run_id < 2**63:  # output and stats from our own record
        run = Run.objects.filter(pk=run_id, session_key=session_key).first()
    forked_from, slug = None, body.get("forked_from")
    if isinstance(slug, str) and len(slug) <= 32 and slug.isascii():
        forked_from = Playground.objects.filter(slug=slug).first()
    if run and run.mode == body["mode"] == "instruct":  # the conversation the answer belongs to
        instruction, turns, system = run.instruction, run.turns, run.system_prompt
    playground = Playground.objects.create(
        mode=body["mode"], code=code, cursor=cursor, instruction=instruction, params=params,
        turns=list(turns), system_prompt=system,
        output=run.output if run else "", stats=run.stats if run else {}, model=run.model if run else "",
        run=run, forked_from=forked_from, session_key=session_key,
    )
    return JsonResponse({"slug": playground.slug, "url": request.build_absolute_uri(playground.get_absolute_url())})


@require_GET
def share(request, slug):
    playground = get_object_or_404(Playground, slug=slug)
    snapshot = {**_snapshot(playground), "transcript": {"output": playground.output, "stats": playground.stats or {}}}
    return render(request, "playground/share.html", {
        "playground": playground,
        "snapshot": snapshot,
        "stats": playground.stats or {},
        "spark_points": sparkline_points((playground.stats or {}).get("tok_s_series") or [], width=160, height=40),
    })


@require_GET
def history(request):
    """The session's latest runs, optionally of one mode (?mode=) and containing a text (?q=)."""
    key = sessions.visitor_key(request.COOKIES)  # no key, no runs; nothing is stored
    runs = Run.objects.filter(session_key=key) if key else Run.objects.none()
    mode = request.GET.get("mode", "")
    if mode in MODES:
        runs = runs.filter(mode=mode)
    query = request.GET.get("q", "").strip()[:200]
    if query:
        runs = runs.filter(Q(code__icontains=query) | Q(instruction__icontains=query) | Q(output__icontains=query))
    return render(request, "playground/_history.html", {"runs": runs[:HISTORY_LENGTH], "filtered": bool(mode in MODES or query)})


def _dashboard_context() -> dict:
    recent = list(Run.objects.all()[:25])
    finished = list(
        Run.objects.filter(decode_tok_s__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at")[:120]
        .values_list("finished_at", "decode_tok_s")
    )[::-1]
    values = [v for _, v in finished]
    return {
        "workers": WorkerStatus.objects.all(),
        "live_ids": {w.worker_id for w in _live_workers()},
        "queue_depth": Run.objects.filter(status=Run.QUEUED).count(),
        "running": Run.objects.filter(status=Run.RUNNING).count(),
        "recent": recent,
        "chart": sparkline_points(values, width=600, height=120),
        "chart_max": max(values, default=0),
        "chart_last": values[-1] if values else None,
        "chart_from": finished[0][0] if finished else None,
        "chart_to": finished[-1][0] if finished else None,
        "now": timezone.now(),
    }


@staff_member_required
def dashboard(request):
    return render(request, "playground/dashboard.html", _dashboard_context())


@staff_member_required
def dashboard_live(request):
    return render(request, "playground/_dashboard_live.html", _dashboard_context())
