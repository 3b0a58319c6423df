"""Who may call the API, and how often.

- A request with `Authorization: Bearer <key>` is checked against the active ApiKeys (hashed).
- Without a key: accepted only while no active key exists AND the server was started bound to
  a loopback address (`manage.py playground --host 127.0.0.1`, the default), as llama-server
  does; otherwise 401. A server whose bind address is unknown (plain `daphne`) counts as public.
- Per key: requests per minute (counted as the key's Runs created in the last 60 s, so every
  Daphne process sees the same count) and runs queued at once; over either -> 429 + Retry-After.
"""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from ..models import ApiKey, Run, hash_api_key
from .errors import ApiError

KEYLESS_SOURCE = "api"


@dataclass(frozen=True)
class Caller:
    source: str  # the key's name, or "api" for a keyless local request
    key: ApiKey | None = None


def bound_to_loopback(host: str | None = None) -> bool:
    host = (settings.PLAYGROUND_BIND_HOST if host is None else host).strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bearer_token(request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


@database_sync_to_async
def authenticate(request) -> Caller:
    token = bearer_token(request)
    if token is not None:
        key = ApiKey.objects.filter(key_hash=hash_api_key(token), active=True).first()
        if key is not None:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
            return Caller(key.name, key)
    if not ApiKey.objects.filter(active=True).exists() and bound_to_loopback():
        return Caller(KEYLESS_SOURCE)  # open local server, as llama-server: any (or no) key is fine
    if token is None:
        raise ApiError(401, "this server needs an API key: send 'Authorization: Bearer <key>' "
                            "(create one with `python manage.py create_api_key NAME` or in the admin)",
                       code="missing_api_key")
    raise ApiError(401, "invalid API key", code="invalid_api_key")


@database_sync_to_async
def check_limits(caller: Caller) -> None:
    """429 when the key is over its requests/minute or queued-runs limit."""
    key = caller.key
    if key is None:
        return
    if key.max_queued_runs and Run.objects.filter(api_key=key, status=Run.QUEUED).count() >= key.max_queued_runs:
        raise ApiError(429, f"API key {key.name!r} already has {key.max_queued_runs} queued run(s), its limit; "
                            f"wait for one to start", code="too_many_queued_runs", retry_after=1)
    if key.requests_per_minute:
        since = timezone.now() - timedelta(seconds=60)
        recent = Run.objects.filter(api_key=key, created_at__gte=since).order_by("created_at")
        if recent.count() >= key.requests_per_minute:
            oldest = recent.values_list("created_at", flat=True)[0]
            wait = max(1, math.ceil((oldest - since).total_seconds()))
            raise ApiError(429, f"API key {key.name!r} is over its limit of {key.requests_per_minute} requests per "
                                f"minute; retry in {wait} s", code="rate_limit_exceeded", retry_after=wait)
