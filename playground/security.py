"""Security pieces the settings switch on: an exact-origin check for WebSockets, a Content
Security Policy header (no inline script), and a throttle on admin login failures.

Origin: a WebSocket's Origin must be exactly the page's own origin (scheme, host and port of the
Host header, the host in ALLOWED_HOSTS) or one of CSRF_TRUSTED_ORIGINS; another port of the same
host is another origin.
"""
from __future__ import annotations

import time
from collections import defaultdict, deque
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpResponse
from django.http.request import split_domain_port, validate_host


class ExactOriginValidator:
    """ASGI middleware: refuse a WebSocket whose Origin is not this site's exact origin."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not self.allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

    @staticmethod
    def allowed(scope) -> bool:
        headers = dict(scope.get("headers") or [])
        origin = headers.get(b"origin", b"").decode("latin-1")
        host = headers.get(b"host", b"").decode("latin-1")
        if not origin or not host:
            return False
        if origin in settings.CSRF_TRUSTED_ORIGINS:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
            return False
        domain, _ = split_domain_port(host)
        return validate_host(domain, settings.ALLOWED_HOSTS)


class ContentSecurityPolicyMiddleware:
    """Adds the CSP header (settings.PLAYGROUND_CSP; empty = off). Scripts only from our origin."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        policy = settings.PLAYGROUND_CSP
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response


_failures: dict[str, deque] = defaultdict(deque)


def _client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR", "?")


@receiver(user_login_failed)
def _count_failure(sender, credentials=None, request=None, **kwargs):
    if request is not None:
        _failures[_client_ip(request)].append(time.monotonic())


class AdminLoginThrottleMiddleware:
    """Too many failed admin logins from one IP (settings.PLAYGROUND_LOGIN_FAILURES per
    PLAYGROUND_LOGIN_WINDOW_S): further login POSTs get 429 until the window passes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST" and request.path.startswith("/admin/login"):
            window, limit = settings.PLAYGROUND_LOGIN_WINDOW_S, settings.PLAYGROUND_LOGIN_FAILURES
            times, now = _failures[_client_ip(request)], time.monotonic()
            while times and now - times[0] > window:
                times.popleft()
            if len(times) >= limit:
                wait = window - (now - times[0])
                return HttpResponse(f"Too many failed logins; try again in {wait:.0f} s.", status=429,
                                    content_type="text/plain")
        return self.get_response(request)
