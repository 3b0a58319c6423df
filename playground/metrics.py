"""GET /metrics: Prometheus text format (prometheus_client), read from the database at scrape time.

Every number comes from the Run and WorkerStatus rows, so any Daphne process answers for the
whole deployment (workers are separate processes; an in-process registry would see only its
own). Access: open when the server is bound to loopback, else a staff session or
`Authorization: Bearer $PLAYGROUND_METRICS_TOKEN`.
"""
from __future__ import annotations

import hmac

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import CollectorRegistry

from .api.auth import bearer_token, bound_to_loopback
from .models import Run, WorkerStatus
from .views import _live_workers

DECODE_TOK_S_BUCKETS = (10, 25, 50, 100, 200, 300, 500, 750, 1000, 1250, 1500, 2000, 3000, 5000)
TTFT_S_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
FINISHED = (Run.DONE, Run.CANCELLED)


def _histogram(name: str, doc: str, field: str, buckets, scale: float = 1.0) -> HistogramMetricFamily:
    """Cumulative buckets of a Run column (finished runs with a value), in one query."""
    rows = Run.objects.filter(status__in=FINISHED, **{f"{field}__isnull": False})
    agg = rows.aggregate(count=Count("pk"), total=Sum(field),
                         **{f"le{i}": Count("pk", filter=Q(**{f"{field}__lte": b / scale}))
                            for i, b in enumerate(buckets)})
    cumulative = [(str(b), agg[f"le{i}"]) for i, b in enumerate(buckets)] + [("+Inf", agg["count"])]
    return HistogramMetricFamily(name, doc, buckets=cumulative, sum_value=(agg["total"] or 0.0) * scale)


class DatabaseCollector:
    def collect(self):
        by_source = Run.objects.values("source").annotate(prompt=Sum("prompt_tokens"), generated=Sum("generated_tokens"))
        generated = CounterMetricFamily("playground_generated_tokens", "Tokens generated, all runs", labels=["source"])
        prompt = CounterMetricFamily("playground_prompt_tokens", "Prompt tokens of all runs", labels=["source"])
        for row in by_source:
            generated.add_metric([row["source"]], row["generated"] or 0)
            prompt.add_metric([row["source"]], row["prompt"] or 0)
        yield generated
        yield prompt

        runs = GaugeMetricFamily("playground_runs", "Runs recorded, by status and source", labels=["status", "source"])
        for row in Run.objects.values("status", "source").annotate(n=Count("pk")).order_by("status", "source"):
            runs.add_metric([row["status"], row["source"]], row["n"])
        yield runs
        yield GaugeMetricFamily("playground_queue_depth", "Runs waiting for a worker",
                                value=Run.objects.filter(status=Run.QUEUED).count())
        yield _histogram("playground_decode_tokens_per_second", "Decode speed of finished runs (tokens/s)",
                         "decode_tok_s", DECODE_TOK_S_BUCKETS)
        yield _histogram("playground_ttft_seconds", "Time to first token of finished runs (seconds)", "ttft_ms",
                         TTFT_S_BUCKETS, scale=1e-3)

        live = {w.worker_id for w in _live_workers()}
        now = timezone.now()
        up = GaugeMetricFamily("playground_worker_up", "1 while the worker's heartbeat is recent",
                               labels=["worker_id", "model", "device"])
        age = GaugeMetricFamily("playground_worker_heartbeat_age_seconds", "Seconds since the worker's last heartbeat",
                                labels=["worker_id"])
        busy = GaugeMetricFamily("playground_worker_busy", "1 while the worker runs a job", labels=["worker_id"])
        used = GaugeMetricFamily("playground_worker_gpu_memory_used_bytes", "GPU memory reserved by the worker",
                                 labels=["worker_id"])
        total = GaugeMetricFamily("playground_worker_gpu_memory_total_bytes", "GPU memory of the worker's device",
                                  labels=["worker_id"])
        for w in WorkerStatus.objects.all():
            up.add_metric([w.worker_id, w.model, w.device], 1 if w.worker_id in live else 0)
            age.add_metric([w.worker_id], (now - w.last_heartbeat).total_seconds())
            busy.add_metric([w.worker_id], 1 if w.busy and w.worker_id in live else 0)
            if w.gpu_memory_total_mb is not None:
                used.add_metric([w.worker_id], (w.gpu_memory_used_mb or 0) * 2**20)
                total.add_metric([w.worker_id], w.gpu_memory_total_mb * 2**20)
        yield GaugeMetricFamily("playground_workers_up", "Workers with a recent heartbeat", value=len(live))
        yield from (up, age, busy, used, total)


def _allowed(request) -> bool:
    if bound_to_loopback():
        return True
    if request.user.is_authenticated and request.user.is_staff:
        return True
    token, expected = bearer_token(request), settings.PLAYGROUND_METRICS_TOKEN
    return bool(expected and token and hmac.compare_digest(token.encode(), expected.encode()))


@require_GET
def metrics(request):
    if not _allowed(request):
        return HttpResponse("metrics need a staff login or 'Authorization: Bearer <PLAYGROUND_METRICS_TOKEN>'\n",
                            status=403, content_type="text/plain")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
