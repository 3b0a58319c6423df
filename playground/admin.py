"""Django admin for runs, saved playgrounds, worker heartbeats (read-mostly) and API keys."""
import secrets

from django.contrib import admin, messages

from .models import ApiKey, Playground, Run, WorkerStatus, hash_api_key


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "source", "mode", "status", "model", "generated_tokens", "decode_tok_s",
                    "ttft_ms", "finish_reason", "worker_id", "short_session")
    list_filter = ("source", "model", "status", "mode", ("created_at", admin.DateFieldListFilter))
    search_fields = ("code", "instruction", "output", "session_key")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "finished_at", "stats")

    actions = ["share"]

    @admin.action(description="Create share links (read-only /p/<slug>/ pages)")
    def share(self, request, queryset):
        """Any run (browser or API) -> a Playground snapshot, as the editor's Share button makes."""
        links = []
        for run in queryset:
            playground = Playground.objects.create(
                mode=run.mode, code=run.code, cursor=run.cursor, instruction=run.instruction, turns=run.turns,
                system_prompt=run.system_prompt, params=run.params, output=run.output, stats=run.stats,
                model=run.model, run=run, session_key=run.session_key)
            links.append(f"run {run.pk}: {request.build_absolute_uri(playground.get_absolute_url())}")
        messages.success(request, "; ".join(links))

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


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "key_hint", "active", "requests_per_minute", "max_queued_runs", "created_at",
                    "last_used_at")
    list_filter = ("active",)
    search_fields = ("name",)
    readonly_fields = ("key_hint", "created_at", "last_used_at")

    def save_model(self, request, obj, form, change):
        if not change:  # a new key: make the secret, store its hash, show it once
            secret = ApiKey.PREFIX + secrets.token_urlsafe(32)
            obj.key_hash, obj.key_hint = hash_api_key(secret), secret[:8]
            messages.warning(request, f"API key for {obj.name!r}: {secret}  (copy it now: it is stored hashed "
                                      f"and cannot be shown again)")
        super().save_model(request, obj, form, change)
