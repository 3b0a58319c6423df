"""The precision a worker serves (engine info "weights", e.g. fp8) is shown on the editor page's model badge,
in the staff dashboard and in the API's model list, from the worker's heartbeat."""
from __future__ import annotations

import pytest
from django.utils import timezone

from playground.models import WorkerStatus

pytestmark = pytest.mark.django_db


def heartbeat(weights: str):
    """A live worker's row (live: within the 3.5 s lease, so call it right before the request)."""
    WorkerStatus.objects.create(worker_id="gpu-0", model="qwen-1.5b", device="cuda:0", fast_path=True,
                                last_heartbeat=timezone.now(),
                                info={"weights": weights, "weights_detail": f"{weights} (per-channel scales)"})


def test_editor_badge_shows_the_workers_weights(client):
    client.get("/")  # the first request compiles the templates: not inside the lease
    heartbeat("fp8")
    html = client.get("/").content.decode()
    assert 'title="fp8 (per-channel scales)">fp8</span>' in html


def test_dashboard_shows_each_workers_weights(admin_client):
    admin_client.get("/dashboard/")
    heartbeat("bfloat16")
    html = admin_client.get("/dashboard/").content.decode()
    assert ">bfloat16</span>" in html


def test_api_model_list_carries_the_workers_weights(client, settings):
    settings.PLAYGROUND_BIND_HOST = "127.0.0.1"
    client.get("/v1/models")
    heartbeat("fp8")
    meta = client.get("/v1/models").json()["data"][0]["meta"]
    assert meta["weights"] == "fp8" and meta["weights_detail"] == "fp8 (per-channel scales)"
