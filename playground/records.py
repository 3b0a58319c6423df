"""Small database functions the async code awaits (each one query or one transaction).

Consumers and the worker never touch the ORM directly from the event loop: they await
these `database_sync_to_async` wrappers. No business rules beyond status transitions.
"""
from __future__ import annotations

from datetime import timedelta

from channels.db import database_sync_to_async
from django.db.models import F
from django.utils import timezone

from .models import Run, WorkerStatus
from .protocol import RunRequest, parse_sampling, sampling_json


@database_sync_to_async
def create_run(request: RunRequest, session_key: str, source: str = "browser", api_key_id: int | None = None) -> int:
    run = Run.objects.create(
        session_key=session_key or "",
        mode=request.mode,
        code=request.code,
        cursor=request.cursor,
        instruction=request.instruction,
        turns=[dict(t) for t in request.turns],
        system_prompt=request.system,
        params=sampling_json(request.params),
        prompt_ids=list(request.prompt_ids),
        source=source,
        api_key_id=api_key_id,
    )
    return run.pk


@database_sync_to_async
def queued_ahead(run_id: int) -> int:
    """How many queued runs were created before this one (all workers together)."""
    return Run.objects.filter(status=Run.QUEUED, pk__lt=run_id).count()


def live_workers_since(lease_s: float):
    return WorkerStatus.objects.filter(last_heartbeat__gte=timezone.now() - timedelta(seconds=lease_s))


@database_sync_to_async
def run_state(run_id: int, lease_s: float) -> dict | None:
    """What a waiting consumer needs: the row's status and outcome, the live queue position,
    workers online, and the age of the heartbeat of the worker that holds the run."""
    run = Run.objects.filter(pk=run_id).values("status", "error", "finish_reason", "stats", "worker_id",
                                               "created_at").first()
    if run is None:
        return None
    now = timezone.now()
    state = dict(run, waited_s=(now - run["created_at"]).total_seconds(), queued_ahead=0, workers=0,
                 idle_workers=0, worker_age_s=None)
    if run["status"] == Run.QUEUED:
        state["queued_ahead"] = Run.objects.filter(status=Run.QUEUED, pk__lt=run_id).count()
        live = live_workers_since(lease_s)
        state["workers"] = live.count()
        state["idle_workers"] = live.filter(busy=False).count()
    elif run["status"] == Run.RUNNING:
        beat = WorkerStatus.objects.filter(worker_id=run["worker_id"]).values_list("last_heartbeat", flat=True).first()
        state["worker_age_s"] = None if beat is None else (now - beat).total_seconds()
    return state


@database_sync_to_async
def fail_if(run_id: int, status: str, message: str) -> bool:
    """status -> error with `message`, only if the row is still in `status` (one winner)."""
    return bool(Run.objects.filter(pk=run_id, status=status).update(
        status=Run.ERROR, error=message, finished_at=timezone.now()))


@database_sync_to_async
def worker_channel_of(run_id: int) -> str | None:
    """The control channel of the worker that claimed this run (from its heartbeat row)."""
    worker_id = Run.objects.filter(pk=run_id, status=Run.RUNNING).values_list("worker_id", flat=True).first()
    if not worker_id:
        return None
    info = WorkerStatus.objects.filter(worker_id=worker_id).values_list("info", flat=True).first() or {}
    return info.get("control_channel")


@database_sync_to_async
def sweep(lease_s: float, queue_expiry_s: float, forget_s: float, own_worker_id: str | None = None) -> dict:
    """Terminal states for orphans: running rows of workers without a recent heartbeat (or of
    this worker's previous life), queued rows older than the queue's expiry; stale worker rows
    deleted. Returns the counts."""
    now = timezone.now()
    live = set(live_workers_since(lease_s).values_list("worker_id", flat=True)) - {own_worker_id}
    stale_running = Run.objects.filter(status=Run.RUNNING).exclude(worker_id__in=live)
    running = stale_running.update(status=Run.ERROR, finished_at=now,
                                   error="the worker serving this run stopped (no heartbeat)")
    expired = Run.objects.filter(status=Run.QUEUED, created_at__lt=now - timedelta(seconds=queue_expiry_s)).update(
        status=Run.ERROR, finished_at=now, error=f"expired in the queue after {queue_expiry_s:.0f} s")
    forgotten, _ = WorkerStatus.objects.filter(last_heartbeat__lt=now - timedelta(seconds=forget_s)).delete()
    return {"running": running, "expired": expired, "workers": forgotten}


@database_sync_to_async
def fail_unfinished(message: str) -> int:
    """Every queued or running row -> error (a single-process server starting: its in-memory
    queue is gone)."""
    return Run.objects.filter(status__in=(Run.QUEUED, Run.RUNNING)).update(
        status=Run.ERROR, error=message, finished_at=timezone.now())


@database_sync_to_async
def request_if_queued(run_id: int) -> RunRequest | None:
    """The RunRequest of a still-queued run (to queue its job again after a layer outage)."""
    run = Run.objects.filter(pk=run_id, status=Run.QUEUED).first()
    if run is None:
        return None
    return RunRequest(mode=run.mode, code=run.code, cursor=run.cursor, instruction=run.instruction,
                      params=parse_sampling(run.params), turns=tuple(run.turns or ()), system=run.system_prompt)


@database_sync_to_async
def run_status(run_id: int) -> str | None:
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first()


@database_sync_to_async
def cancel_if_queued(run_id: int) -> bool:
    """Stop before a worker took the job: the worker will skip it."""
    return bool(
        Run.objects.filter(pk=run_id, status=Run.QUEUED).update(
            status=Run.CANCELLED, finish_reason="cancelled", finished_at=timezone.now()
        )
    )


@database_sync_to_async
def claim_run(run_id: int, worker_id: str, model: str) -> bool:
    """queued -> running; False when the run was cancelled (or claimed) meanwhile."""
    return bool(
        Run.objects.filter(pk=run_id, status=Run.QUEUED).update(
            status=Run.RUNNING, worker_id=worker_id, model=model
        )
    )


@database_sync_to_async
def finish_run(run_id: int, output: str, stats: dict) -> None:
    reason = stats.get("finish_reason", "")
    Run.objects.filter(pk=run_id, status=Run.RUNNING).update(  # not a run already failed elsewhere
        status=Run.CANCELLED if reason == "cancelled" else Run.DONE,
        output=output,
        finish_reason=reason,
        prompt_tokens=stats.get("prompt_tokens"),
        generated_tokens=stats.get("generated_tokens"),
        ttft_ms=stats.get("ttft_ms"),
        decode_tok_s=stats.get("decode_tok_s"),
        stats=stats,
        finished_at=timezone.now(),
    )


@database_sync_to_async
def fail_run(run_id: int, message: str, output: str = "") -> None:
    Run.objects.filter(pk=run_id, status__in=(Run.QUEUED, Run.RUNNING)).update(
        status=Run.ERROR, error=message, output=output, finished_at=timezone.now()
    )


@database_sync_to_async
def write_heartbeat(worker_id: str, fields: dict, job_finished: bool = False) -> str | None:
    """Upsert the worker's row; returns the status of its current run (None if none), so a
    worker notices a run that was cancelled or failed elsewhere."""
    values = dict(fields, last_heartbeat=timezone.now())
    WorkerStatus.objects.update_or_create(worker_id=worker_id, defaults=values)
    if job_finished:
        WorkerStatus.objects.filter(worker_id=worker_id).update(jobs_done=F("jobs_done") + 1)
    current = fields.get("current_run")
    return None if current is None else Run.objects.filter(pk=current).values_list("status", flat=True).first()


@database_sync_to_async
def remove_worker(worker_id: str) -> None:
    WorkerStatus.objects.filter(worker_id=worker_id).delete()
