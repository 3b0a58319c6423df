"""The precision a worker serves (engine info "weights", e.g. fp8) is shown on the editor page's model badge
and in the staff dashboard, from the worker's heartbeat."""
from __future__ import annotations

import pytest
from django.utils import timezone

from playground.models import WorkerStatus

pytestmark = pytest.mark.django_db


def heartbeat(weights: str):
    WorkerStatus.objects.create(worker_id="gpu-0", model="qwen-1.5b", device="cuda:0", fast_path=True,
                                last_heartbeat=timezone.now(),
                                info={"weights": weights, "weights_detail": f"{weights} (per-channel scales)"})


def test_editor_badge_shows_the_workers_weights(client):
    heartbeat("fp8")
    html = client.get("/").content.decode()
    assert 'title="fp8 (per-channel scales)">fp8</span>' in html


def test_dashboard_shows_each_workers_weights(admin_client):
    heartbeat("bfloat16")
    html = admin_client.get("/dashboard/").content.decode()
    assert ">bfloat16</span>" in html
