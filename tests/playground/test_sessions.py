"""Reading pages stores no session: a visitor is known by a key in its own cookie that its runs
and saves carry; expired Django sessions (staff logins) are deleted by the worker's sweep."""
from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.sessions.models import Session
from django.utils import timezone

from playground.asgi import application
from playground.models import Playground, Run
from playground.sessions import VISITOR_COOKIE as VISITOR

COOKIE = settings.SESSION_COOKIE_NAME


@pytest.mark.django_db
def test_anonymous_page_views_store_no_session(client):
    for _ in range(5):
        assert client.get("/").status_code == 200
        assert client.get("/history/").status_code == 200
        client.cookies.clear()  # a crawler: a fresh visitor every time
    assert Session.objects.count() == 0


@pytest.mark.django_db
def test_the_page_hands_out_a_visitor_key_that_tags_saves_and_stores_no_session(client):
    client.get("/")
    key = client.cookies[VISITOR].value
    client.get("/history/")
    client.get("/")
    assert client.cookies[VISITOR].value == key
    run = Run.objects.create(session_key=key, mode="complete", code="def f():", output="    pass", status="done")
    response = client.post("/save/", data=json.dumps({"mode": "complete", "code": "print(1)", "run_id": run.pk}),
                           content_type="application/json")
    assert response.status_code == 200
    saved = Playground.objects.get()
    assert saved.session_key == key and saved.output == "    pass"  # the visitor's own run
    assert Session.objects.count() == 0


@pytest.mark.django_db
def test_history_shows_the_runs_of_the_visitor_only(client):
    client.get("/")
    key = client.cookies[VISITOR].value
    Run.objects.create(session_key=key, mode="complete", code="def mine():\n", status="done")
    Run.objects.create(session_key="", mode="complete", code="def nobodys():\n", status="done")
    html = client.get("/history/").content.decode()
    assert "mine" in html and "nobodys" not in html
    client.cookies.clear()
    assert "mine" not in client.get("/history/").content.decode()


@pytest.mark.django_db
def test_without_a_visitor_key_a_save_attaches_no_run(client):
    anonymous = Run.objects.create(session_key="", mode="complete", code="x", output="an API run's output")
    client.post("/save/", data=json.dumps({"mode": "complete", "code": "x", "run_id": anonymous.pk}),
                content_type="application/json")
    assert Playground.objects.get().output == ""


@pytest.mark.django_db
def test_a_malformed_visitor_cookie_is_replaced(client):
    client.cookies[VISITOR] = "../../etc"
    client.get("/")
    key = client.cookies[VISITOR].value
    assert len(key) == 32 and key.isalnum() and key.islower()


@pytest.mark.django_db
def test_a_browser_with_an_old_session_keeps_its_history(client):
    client.session.save()  # a session row from before visitor keys
    old = client.cookies[COOKIE].value
    Run.objects.create(session_key=old, mode="complete", code="def before():\n", status="done")
    client.get("/")
    assert client.cookies[VISITOR].value == old and "before" in client.get("/history/").content.decode()


@pytest.mark.django_db(transaction=True)
async def test_a_run_over_the_websocket_carries_the_pages_visitor_key(layer):
    key = "a" * 16 + "0123456789abcdef"
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", f"{VISITOR}={key}".encode())]
    comm = WebsocketCommunicator(application, "/ws/generate/", headers=headers)
    assert (await comm.connect())[0]
    await comm.send_json_to({"type": "run", "mode": "complete", "code": "def f():", "params": {"max_tokens": 4}})
    accepted = json.loads(await comm.receive_from(timeout=10))
    assert accepted["type"] == "accepted"
    run = await database_sync_to_async(Run.objects.get)(pk=accepted["run_id"])
    assert run.session_key == key
    assert await database_sync_to_async(Session.objects.count)() == 0
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_the_worker_deletes_expired_sessions(engine, layer, start_worker):
    now = timezone.now()

    @database_sync_to_async
    def make():
        Session.objects.create(session_key="expired" + "0" * 25, session_data="", expire_date=now - timedelta(days=1))
        Session.objects.create(session_key="current" + "0" * 25, session_data="", expire_date=now + timedelta(days=1))

    await make()
    async with start_worker(engine, layer, heartbeat_s=0.05):
        keys = None
        for _ in range(100):
            await asyncio.sleep(0.05)
            keys = await database_sync_to_async(lambda: list(Session.objects.values_list("session_key", flat=True)))()
            if len(keys) == 1:
                break
    assert keys == ["current" + "0" * 25]
