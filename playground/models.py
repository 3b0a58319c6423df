"""Database rows: one Run per generation, Playground snapshots behind share links,
one WorkerStatus heartbeat row per GPU worker, and the ApiKeys of the HTTP API.

A Run is also its transcript: what was asked (code, instruction, earlier conversation turns,
system prompt, params) and how it ended (output, finish reason, error, stats).
Rows only; who writes what: the consumer creates Runs (status "queued"), the worker
moves them through running -> done/cancelled/error and writes output and stats,
the save view creates Playgrounds. No model code here.
"""
from __future__ import annotations

import hashlib
import secrets

from django.db import models

MODES = [("complete", "Complete"), ("infill", "Infill"), ("instruct", "Instruct")]


def new_slug() -> str:
    """Unguessable share slug (~96 bits)."""
    return secrets.token_urlsafe(12)


class Run(models.Model):
    QUEUED, RUNNING, DONE, CANCELLED, ERROR = "queued", "running", "done", "cancelled", "error"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, CANCELLED, ERROR)]

    session_key = models.CharField(max_length=64, blank=True, db_index=True)
    mode = models.CharField(max_length=16, choices=MODES)
    code = models.TextField(blank=True)  # complete: the code; infill: prefix + suffix
    cursor = models.IntegerField(null=True, blank=True)  # infill: split point in `code`
    instruction = models.TextField(blank=True)  # instruct mode
    # instruct follow-ups: the earlier turns ([{"role", "content"}, ...]) and the system prompt
    turns = models.JSONField(default=list, blank=True)
    system_prompt = models.TextField(blank=True)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=STATUSES, default=QUEUED, db_index=True)
    output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=16, blank=True)
    model = models.CharField(max_length=200, blank=True, db_index=True)
    worker_id = models.CharField(max_length=100, blank=True)
    prompt_tokens = models.IntegerField(null=True, blank=True)
    generated_tokens = models.IntegerField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    decode_tok_s = models.FloatField(null=True, blank=True)
    stats = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Who asked: "browser" (the WebSocket), else the API key's name ("api" for a keyless local request).
    source = models.CharField(max_length=100, default="browser", db_index=True)
    api_key = models.ForeignKey("ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    prompt_ids = models.JSONField(default=list, blank=True)  # API completion given as token ids

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.mode}, {self.status})"

    @property
    def title(self) -> str:
        """First non-empty line of what the user typed, for lists."""
        source = self.instruction if self.mode == "instruct" else self.code
        for line in source.splitlines():
            if line.strip():
                return line.strip()[:80]
        return "(empty)"


class Playground(models.Model):
    """A saved, read-only snapshot behind /p/<slug>/; forking copies it into the editor."""

    slug = models.CharField(max_length=32, unique=True, default=new_slug, editable=False)
    mode = models.CharField(max_length=16, choices=MODES)
    code = models.TextField(blank=True)
    cursor = models.IntegerField(null=True, blank=True)
    instruction = models.TextField(blank=True)
    turns = models.JSONField(default=list, blank=True)  # the conversation before `instruction`
    system_prompt = models.TextField(blank=True)
    params = models.JSONField(default=dict)
    output = models.TextField(blank=True)
    stats = models.JSONField(default=dict, blank=True)
    model = models.CharField(max_length=200, blank=True)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL)
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    session_key = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Playground {self.slug} ({self.mode})"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("playground:share", args=[self.slug])


class WorkerStatus(models.Model):
    """Heartbeat of one GPU worker, rewritten every few seconds (dashboard, page banner)."""

    worker_id = models.CharField(max_length=100, unique=True)
    model = models.CharField(max_length=200, blank=True)
    device = models.CharField(max_length=100, blank=True)
    random_weights = models.BooleanField(default=False)
    fast_path = models.BooleanField(default=False)
    busy = models.BooleanField(default=False)
    current_run = models.IntegerField(null=True, blank=True)
    gpu_memory_used_mb = models.FloatField(null=True, blank=True)
    gpu_memory_total_mb = models.FloatField(null=True, blank=True)
    jobs_done = models.IntegerField(default=0)
    info = models.JSONField(default=dict, blank=True)
    last_heartbeat = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-last_heartbeat"]
        verbose_name_plural = "worker statuses"

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.model} on {self.device})"


def hash_api_key(secret: str) -> str:
    """SHA-256 hex of a bearer key: keys are random 256-bit strings, so no salt or KDF is needed."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKey(models.Model):
    """A bearer key for /v1/ (stored hashed; the secret is shown once, at creation) and its limits."""

    PREFIX = "pk-"

    name = models.CharField(max_length=100, unique=True, help_text="shown as the source of this key's runs")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_hint = models.CharField(max_length=16, blank=True, editable=False, help_text="the key's first characters")
    active = models.BooleanField(default=True)
    requests_per_minute = models.PositiveIntegerField(default=60, help_text="0 = no limit")
    max_queued_runs = models.PositiveIntegerField(default=4, help_text="queued runs at once; 0 = no limit")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.key_hint}…)"

    @classmethod
    def create_key(cls, name: str, **limits) -> tuple["ApiKey", str]:
        """A new key row and its secret (the only time the secret exists in clear)."""
        secret = cls.PREFIX + secrets.token_urlsafe(32)
        key = cls.objects.create(name=name, key_hash=hash_api_key(secret), key_hint=secret[:8], **limits)
        return key, secret
