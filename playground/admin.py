"""Django admin for runs, saved playgrounds and worker heartbeats (read-mostly)."""
from django.contrib import admin

from .models import Playground, Run, WorkerStatus


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "mode", "status", "model", "generated_tokens", "decode_tok_s",
                    "ttft_ms", "finish_reason", "worker_id", "short_session")
    list_filter = ("model", "status", "mode", ("created_at", admin.DateFieldListFilter))
    search_fields = ("code", "instruction", "output", "session_key")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "finished_at", "stats")

    @admin.display(description="session")
    def short_session(self, obj):
        return obj.session_key[:8]


@admin.register(Playground)
class PlaygroundAdmin(admin.ModelAdmin):
    list_display = ("slug", "created_at", "mode", "model", "tok_s", "forked_from")
    list_filter = ("model", "mode", ("created_at", admin.DateFieldListFilter))
    search_fields = ("slug", "code", "instruction", "output")
    date_hierarchy = "created_at"
    raw_id_fields = ("run", "forked_from")

    @admin.display(description="tok/s")
    def tok_s(self, obj):
        return (obj.stats or {}).get("decode_tok_s")


@admin.register(WorkerStatus)
class WorkerStatusAdmin(admin.ModelAdmin):
    list_display = ("worker_id", "model", "device", "busy", "current_run", "jobs_done",
                    "gpu_memory_used_mb", "last_heartbeat")
    list_filter = ("model", "device", "busy")
