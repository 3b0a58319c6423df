"""The page and the dashboard say how many GPUs (or CPU processes) a tensor-parallel worker spans."""
from __future__ import annotations

import pytest
from django.utils import timezone

from playground.models import WorkerStatus

pytestmark = pytest.mark.django_db


def worker(device: str, tp: int | None):
    info = {"runner": "tp-reference", "tp": tp} if tp is not None else {"runner": "reference"}
    WorkerStatus.objects.create(worker_id="w0", model="qwen-1.5b", device=device, info=info,
                                last_heartbeat=timezone.now())


def test_a_worker_over_four_gpus_shows_4_gpus_on_the_page_and_the_dashboard(client, admin_client):
    worker("cuda:0", 4)
    assert "cuda:0 · 4 GPUs" in client.get("/").content.decode()
    assert "cuda:0 · 4 GPUs" in admin_client.get("/dashboard/").content.decode()


def test_a_cpu_group_counts_processes_and_a_single_device_worker_shows_no_count(client, admin_client):
    worker("cpu", 2)
    assert "cpu · 2 processes" in client.get("/").content.decode()
    WorkerStatus.objects.all().delete()
    for tp in (1, None):  # tp 1, and a heartbeat from before the field existed
        worker("cuda:0", tp)
        for html in (client.get("/").content.decode(), admin_client.get("/dashboard/").content.decode()):
            assert "GPUs" not in html and "processes" not in html
        WorkerStatus.objects.all().delete()
