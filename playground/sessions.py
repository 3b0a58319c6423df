"""Who a visitor is, without storing a session for every page view.

A visitor's runs and saves are tagged with a *visitor key* kept in its own cookie, handed out
by the editor page. Nothing is stored for it: reading `/` or `/history/` writes no row (crawlers
and probes used to leave a Django session row per request, kept 30 days). What the visitor keeps
(runs over the WebSocket, which carries the cookie, and saved playgrounds) holds the key itself.
Django sessions remain for what needs them (staff logins); a browser that still has one from
before keeps its history (its session key becomes its visitor key). Expired session rows are
deleted by the worker's periodic sweep (`clear_expired`).
Not here: who may see what (views.py filters runs by this key).
"""
from __future__ import annotations

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.utils.crypto import get_random_string

VISITOR_COOKIE = "playground_visitor"
KEY_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"  # Django's own session-key alphabet
KEY_LENGTH = 32


def well_formed(key) -> bool:
    return isinstance(key, str) and len(key) == KEY_LENGTH and all(c in KEY_CHARS for c in key)


def visitor_key(cookies) -> str | None:
    """The visitor key from a request's (or a WebSocket scope's) cookies, if well formed."""
    for name in (VISITOR_COOKIE, settings.SESSION_COOKIE_NAME):
        if well_formed(key := cookies.get(name)):
            return key
    return None


def issue_key(request, response) -> str:
    """The visitor's key; a visitor without one gets it in a cookie (and nothing is stored)."""
    key = request.COOKIES.get(VISITOR_COOKIE)
    if not well_formed(key):
        key = visitor_key(request.COOKIES) or get_random_string(KEY_LENGTH, KEY_CHARS)
        response.set_cookie(
            VISITOR_COOKIE, key, max_age=settings.SESSION_COOKIE_AGE, path=settings.SESSION_COOKIE_PATH,
            domain=settings.SESSION_COOKIE_DOMAIN, secure=settings.SESSION_COOKIE_SECURE, httponly=True,
            samesite=settings.SESSION_COOKIE_SAMESITE)
    return key


def clear_expired() -> None:
    """Delete expired session rows (what `manage.py clearsessions` does)."""
    SessionStore.clear_expired()


clear_expired_async = database_sync_to_async(clear_expired)
