"""Small database functions the async code awaits (each one query or one transaction).

Consumers and the worker never touch the ORM directly from the event loop: they await
these `database_sync_to_async` wrappers. No business rules beyond status transitions.
"""
from __future__ import annotations

from channels.db import database_sync_to_async
from django.db.models import F
from django.utils import timezone

from .models import Run, WorkerStatus
from .protocol import RunRequest, sampling_json


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
    Run.objects.filter(pk=run_id).update(
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
    Run.objects.filter(pk=run_id).update(
        status=Run.ERROR, error=message, output=output, finished_at=timezone.now()
    )


@database_sync_to_async
def write_heartbeat(worker_id: str, fields: dict, job_finished: bool = False) -> None:
    values = dict(fields, last_heartbeat=timezone.now())
    WorkerStatus.objects.update_or_create(worker_id=worker_id, defaults=values)
    if job_finished:
        WorkerStatus.objects.filter(worker_id=worker_id).update(jobs_done=F("jobs_done") + 1)


@database_sync_to_async
def remove_worker(worker_id: str) -> None:
    WorkerStatus.objects.filter(worker_id=worker_id).delete()
