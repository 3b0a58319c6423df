"""Who may use the API and /metrics, decided by the bind address, API keys and the metrics token
(Django's test client; the live tests cover the same rules through a real server on loopback)."""
from __future__ import annotations

import pytest

from playground.api.auth import bound_to_loopback
from playground.models import ApiKey

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                            ("[::1]", True), ("127.0.0.2", True), ("0.0.0.0", False),
                                            ("", False), ("192.168.1.5", False), ("example.com", False)])
def test_loopback_binds(host, loopback):
    assert bound_to_loopback(host) is loopback


def test_a_public_server_without_keys_refuses_keyless_requests(client, settings):
    settings.PLAYGROUND_BIND_HOST = "0.0.0.0"
    response = client.get("/v1/models")
    assert response.status_code == 401 and response.json()["error"]["code"] == "missing_api_key"
    settings.PLAYGROUND_BIND_HOST = "127.0.0.1"
    assert client.get("/v1/models").status_code == 200


def test_keys_are_checked_by_hash_and_inactive_keys_do_not_count(client, settings):
    settings.PLAYGROUND_BIND_HOST = "127.0.0.1"
    key, secret = ApiKey.create_key("editor")
    assert key.key_hash != secret and secret.startswith(ApiKey.PREFIX) and key.key_hint == secret[:8]
    assert client.get("/v1/models").status_code == 401
    assert client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    assert client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {secret}x").status_code == 401
    ApiKey.objects.update(active=False)
    assert client.get("/v1/models").status_code == 200  # no active key + loopback: open again


def test_metrics_need_staff_or_the_token_off_loopback(client, settings, admin_user):
    settings.PLAYGROUND_BIND_HOST = "0.0.0.0"
    settings.PLAYGROUND_METRICS_TOKEN = "s3cret"
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200
    settings.PLAYGROUND_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403
    client.force_login(admin_user)
    assert client.get("/metrics").status_code == 200


def test_cross_origin_browser_requests_are_refused(client, settings):
    settings.PLAYGROUND_BIND_HOST = "127.0.0.1"
    response = client.post("/v1/completions", data="{}", content_type="application/json",
                           HTTP_ORIGIN="http://evil.example")
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden_origin"


def test_api_runs_show_their_source_and_can_be_shared_from_the_admin(admin_client):
    from playground.models import Playground, Run

    run = Run.objects.create(mode="instruct", instruction="sort a list", source="ci-bot", status=Run.DONE,
                             output="sorted(xs)", turns=[{"role": "user", "content": "hi"},
                                                         {"role": "assistant", "content": "hello"}])
    assert "ci-bot" in admin_client.get("/dashboard/live/").content.decode()
    assert "ci-bot" in admin_client.get("/admin/playground/run/").content.decode()
    response = admin_client.post("/admin/playground/run/", {"action": "share", "_selected_action": [run.pk]},
                                 follow=True)
    assert response.status_code == 200
    playground = Playground.objects.get(run=run)
    assert (playground.instruction, playground.output, playground.turns) == ("sort a list", "sorted(xs)", run.turns)
    assert "sorted(xs)" in admin_client.get(playground.get_absolute_url()).content.decode()
