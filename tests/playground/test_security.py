"""Security settings for the TLS-proxy layout, the exact-origin WebSocket check and the admin
login throttle."""
from __future__ import annotations

import importlib
import re

import pytest
from channels.testing import WebsocketCommunicator

from playground.asgi import application


@pytest.mark.parametrize("origin, host, ok", [
    (b"http://127.0.0.1:8000", b"127.0.0.1:8000", True),
    (b"http://127.0.0.1:9999", b"127.0.0.1:8000", False),  # same host, another port: another origin
    (b"https://127.0.0.1:8000", b"127.0.0.1:8000", True),
    (b"http://evil.example", b"evil.example", False),  # not in ALLOWED_HOSTS
    (b"null", b"127.0.0.1", False),
])
async def test_websockets_need_the_pages_exact_origin(origin, host, ok, transactional_db):
    comm = WebsocketCommunicator(application, "/ws/generate/", headers=[(b"origin", origin), (b"host", host)])
    connected, _ = await comm.connect()
    assert connected == ok
    await comm.disconnect()


def test_behind_tls_cookies_are_secure_hsts_is_on_and_csp_forbids_inline_script(monkeypatch):
    import playground.settings as base

    monkeypatch.setenv("PLAYGROUND_TLS", "1")
    tls = importlib.reload(base)
    try:
        assert tls.SESSION_COOKIE_SECURE and tls.CSRF_COOKIE_SECURE and tls.SECURE_HSTS_SECONDS >= 31536000
        assert tls.SECURE_PROXY_SSL_HEADER == ("HTTP_X_FORWARDED_PROTO", "https")
        assert "script-src 'self'" in tls.PLAYGROUND_CSP and "unsafe-inline" not in tls.PLAYGROUND_CSP.split(
            "script-src")[1].split(";")[0]
    finally:
        monkeypatch.delenv("PLAYGROUND_TLS")
        importlib.reload(base)


@pytest.mark.django_db
def test_pages_carry_the_csp_and_have_no_inline_script(client, settings):
    settings.PLAYGROUND_CSP = "default-src 'self'; script-src 'self'"
    response = client.get("/")
    assert response["Content-Security-Policy"] == settings.PLAYGROUND_CSP
    for tag in re.findall(r"<script\b[^>]*>", response.content.decode()):
        assert "src=" in tag or 'type="application/json"' in tag, tag  # code only from files
    assert not re.search(r"\son[a-z]+=", response.content.decode())  # no inline handlers


@pytest.mark.django_db
def test_admin_login_is_throttled_after_repeated_failures(client, settings):
    from playground import security

    settings.PLAYGROUND_LOGIN_FAILURES = 3
    security._failures.clear()
    for _ in range(3):
        response = client.post("/admin/login/", {"username": "admin", "password": "wrong"})
        assert response.status_code == 200  # the form again, with an error
    response = client.post("/admin/login/", {"username": "admin", "password": "wrong"})
    assert response.status_code == 429 and b"try again" in response.content
    security._failures.clear()
