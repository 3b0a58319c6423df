"""HTTP pages: editor, save -> share link (escaped, read-only), fork, history, and the
staff-only admin and dashboard."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from playground.models import Playground, Run, WorkerStatus

pytestmark = pytest.mark.django_db

XSS = '<script>alert("pwned")</script>'


def session_key(client):
    """The visitor key the editor page hands out (playground/sessions.py)."""
    client.get("/")
    return client.cookies["playground_visitor"].value


def save(client, **body):
    body = {"mode": "complete", "code": "print(1)", "params": {"max_tokens": 16}, **body}
    return client.post("/save/", data=json.dumps(body), content_type="application/json")


def test_editor_page_has_the_editor_bundle_and_no_cdn(client):
    html = client.get("/").content.decode()
    assert 'id="editor"' in html and "/static/playground/app.js" in html and "/static/playground/htmx.min.js" in html
    assert "https://" not in html and "http://" not in html  # works offline


def test_random_weights_banner_shows_when_the_worker_serves_random_weights(client):
    assert "random weights" not in client.get("/").content.decode()
    WorkerStatus.objects.create(worker_id="w", model="tiny", device="cpu", random_weights=True,
                                last_heartbeat=timezone.now())
    assert "random weights — speed demo only" in client.get("/").content.decode()


SMOL_CARD = {"name": "SmolLM2-135M-Instruct", "params": 134515008, "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
             "quantization": "Q4_1 (+F32, Q8_0)", "license": "apache-2.0", "context_length": 8192, "fim": False}


def test_the_page_and_dashboard_show_the_model_card_and_infill_needs_fim_tokens(client, admin_client):
    assert 'value="infill" disabled' not in client.get("/").content.decode()  # no worker yet: nothing known
    WorkerStatus.objects.create(worker_id="w", model="SmolLM2-135M-Instruct", device="cpu",
                                info={"card": SMOL_CARD}, last_heartbeat=timezone.now())
    html = client.get("/").content.decode()
    card = ("SmolLM2-135M-Instruct · 135M params · SmolLM2-135M-Instruct.Q4_1.gguf · dequantized from "
            "Q4_1 (+F32, Q8_0) · apache-2.0 · 8192 context")
    assert card in html and 'value="infill" disabled' in html
    assert card in admin_client.get("/dashboard/").content.decode()
    WorkerStatus.objects.filter(worker_id="w").update(info={"card": {**SMOL_CARD, "fim": True}})
    assert 'value="infill" disabled' not in client.get("/").content.decode()


def test_save_stores_the_runs_output_and_stats_under_an_unguessable_slug(client):
    key = session_key(client)
    run = Run.objects.create(session_key=key, mode="complete", code="def f():", output="    return 1",
                             status="done", stats={"decode_tok_s": 512.5, "generated_tokens": 4}, model="tiny")
    response = save(client, code="def f():", run_id=run.pk, params={"temperature": 0.7, "stop": ["\n\n"]})
    assert response.status_code == 200
    slug = response.json()["slug"]
    assert len(slug) >= 16 and response.json()["url"].endswith(f"/p/{slug}/")
    saved = Playground.objects.get(slug=slug)
    assert (saved.output, saved.stats["decode_tok_s"], saved.params) == (
        "    return 1", 512.5, {"temperature": 0.7, "stop": ["\n\n"]})


def test_save_ignores_runs_of_other_sessions(client):
    other = Run.objects.create(session_key="someone-else", mode="complete", code="x", output="secret")
    slug = save(client, run_id=other.pk).json()["slug"]
    assert Playground.objects.get(slug=slug).output == ""


def test_save_refuses_bad_params(client):
    response = save(client, params={"temperature": -1})
    assert response.status_code == 400 and b"temperature" in response.content


def test_share_page_renders_code_and_output_inert(client):
    playground = Playground.objects.create(mode="complete", code=f"# {XSS}\nx = 1", output=f"{XSS}</pre>",
                                           instruction=XSS, stats={"decode_tok_s": 321.0, "finish_reason": "length"})
    html = client.get(f"/p/{playground.slug}/").content.decode()
    assert XSS not in html and "</script></pre>" not in html
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in html  # escaped text is there
    assert "read-only" in html and "321" in html
    # The code for the read-only editor travels in a json_script block: no raw "<" inside.
    blob = html.split('id="initial-data" type="application/json">')[1].split("</script>")[0]
    assert "<" not in blob and json.loads(blob)["code"].startswith("# <script>")


def test_unknown_slug_is_404(client):
    assert client.get("/p/not-a-real-slug/").status_code == 404


def test_fork_opens_an_editable_copy_and_saving_links_back(client):
    source = Playground.objects.create(mode="infill", code="def f(): pass", cursor=9,
                                       params={"max_tokens": 99, "top_k": 5})
    share_html = client.get(f"/p/{source.slug}/").content.decode()
    assert f'href="/?fork={source.slug}"' in share_html
    html = client.get(f"/?fork={source.slug}").content.decode()
    blob = json.loads(html.split('id="initial-data" type="application/json">')[1].split("</script>")[0])
    assert (blob["mode"], blob["code"], blob["cursor"], blob["forked_from"]) == ("infill", "def f(): pass", 9, source.slug)
    assert blob["params"]["max_tokens"] == 99 and blob["params"]["top_k"] == 5
    child = save(client, mode="infill", code="def f(): return 2", forked_from=source.slug).json()["slug"]
    assert Playground.objects.get(slug=child).forked_from == source
    assert source.slug != child


def test_history_lists_only_this_sessions_runs_escaped(client):
    key = session_key(client)
    Run.objects.create(session_key=key, mode="complete", code=f"{XSS}\n", decode_tok_s=777.0, status="done")
    Run.objects.create(session_key="other", mode="complete", code="not mine")
    html = client.get("/history/").content.decode()
    assert "777 tok/s" in html and "not mine" not in html and XSS not in html


def test_a_run_from_history_opens_in_the_editor_only_for_its_session(client):
    key = session_key(client)
    mine = Run.objects.create(session_key=key, mode="instruct", instruction="sort a list")
    theirs = Run.objects.create(session_key="other", mode="complete", code="x")
    assert "sort a list" in client.get(f"/?run={mine.pk}").content.decode()
    assert client.get(f"/?run={theirs.pk}").status_code == 404


@pytest.mark.parametrize("url", ["/dashboard/", "/dashboard/live/", "/admin/", "/admin/playground/run/"])
def test_staff_pages_refuse_anonymous_and_non_staff_users(client, django_user_model, url):
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    user = django_user_model.objects.create_user("alice", password="pw")
    client.force_login(user)
    response = client.get(url)
    assert response.status_code in (302, 403)
    assert response.status_code == 403 or "/admin/login/" in response["Location"]


def test_staff_see_the_dashboard_with_workers_queue_and_chart(admin_client):
    now = timezone.now()
    WorkerStatus.objects.create(worker_id="gpu-0", model="qwen-1.5b", device="cuda:0", busy=True, current_run=3,
                                gpu_memory_used_mb=4096, gpu_memory_total_mb=143000, last_heartbeat=now)
    for i in range(3):
        Run.objects.create(mode="complete", code=XSS, status="done", decode_tok_s=900 + i, generated_tokens=10,
                           finished_at=now - timedelta(seconds=10 - i), model="qwen-1.5b")
    Run.objects.create(mode="complete", code="q", status="queued")
    html = admin_client.get("/dashboard/").content.decode()
    assert "gpu-0" in html and "cuda:0" in html and "4096 / 143000 MiB" in html and "busy" in html
    assert 'id="queue-depth">1<' in html
    assert "<polyline points=" in html and "902" in html
    assert XSS not in html


def test_staff_see_runs_in_the_admin_with_filters(admin_client):
    Run.objects.create(mode="complete", code="x", status="done", decode_tok_s=123.0, model="tiny")
    html = admin_client.get("/admin/playground/run/").content.decode()
    assert "123.0" in html and "By model" in html and "By status" in html and "By created at" in html
    assert admin_client.get("/admin/playground/playground/").status_code == 200
    assert admin_client.get("/admin/playground/workerstatus/").status_code == 200


def initial_data(html: str) -> dict:
    return json.loads(html.split('id="initial-data" type="application/json">')[1].split("</script>")[0])


def test_a_reopened_run_carries_its_transcript_as_json_not_html(client):
    key = session_key(client)
    stats = {"decode_tok_s": 812.5, "ttft_ms": 4.2, "finish_reason": "length", "tok_s_series": [800.0, 812.5]}
    done = Run.objects.create(session_key=key, mode="instruct", instruction="sort", status="done",
                              output=f"```python\n{XSS}\n```", finish_reason="length", stats=stats)
    failed = Run.objects.create(session_key=key, mode="complete", code="x", status="error",
                                error=f"prompt too long {XSS}")
    html = client.get(f"/?run={done.pk}").content.decode()
    assert XSS not in html
    transcript = initial_data(html)["transcript"]
    assert transcript == {"run_id": done.pk, "mode": "instruct", "status": "done", "output": done.output,
                          "finish_reason": "length", "error": "", "stats": stats}
    failed_transcript = initial_data(client.get(f"/?run={failed.pk}").content.decode())["transcript"]
    assert failed_transcript["status"] == "error" and failed_transcript["error"] == f"prompt too long {XSS}"
    assert initial_data(client.get("/").content.decode())["origin"] == "new"  # the page may restore a draft


def test_history_filters_by_mode_and_text_and_shows_state_and_speed(client):
    key = session_key(client)
    Run.objects.create(session_key=key, mode="complete", code="def parse():\n", status="done",
                       finish_reason="length", decode_tok_s=950.0)
    Run.objects.create(session_key=key, mode="instruct", instruction="write a parser", status="error",
                       error="prompt too long")
    Run.objects.create(session_key=key, mode="instruct", instruction="sort a list", status="cancelled")
    everything = client.get("/history/").content.decode()
    assert everything.count("<li") == 3 and "950 tok/s" in everything and ">length<" in everything
    assert 'title="prompt too long"' in everything  # an error run says why on hover
    instruct = client.get("/history/?mode=instruct").content.decode()
    assert instruct.count("<li") == 2 and "def parse" not in instruct
    parser = client.get("/history/?mode=instruct&q=PARSER").content.decode()
    assert parser.count("<li") == 1 and "write a parser" in parser
    assert "No run matches" in client.get("/history/?q=nothing-like-this").content.decode()
    assert client.get("/history/?mode=bogus").content.decode().count("<li") == 3  # unknown mode: no filter


@pytest.mark.parametrize("body, message", [
    ('{"mode": "complete", "code": "x", "params": {"temperature": NaN}}', "NaN"),
    ('{"mode": "complete", "code": "x", "params": {"temperature": Infinity}}', "Infinity"),
    ('{"mode": "complete", "code": "x", "params": {"temperature": 1e400}}', "finite"),
    ('{"mode": "complete", "code": "x", "params": {"top_k": 1000000000000000000000000000000}}', "at most"),
    ('{"mode": "complete", "code": "\\ud800"}', "lone surrogate"),
    ('{"mode": "complete", "code": "x", "params": {"stop": ["\\udfff"]}}', "lone surrogate"),
    ('{"mode": "complete", "code": "x", "params": {"\\ud800": 1}}', "unknown parameter"),
    ('{"mode": "complete", "code": "x", "run_id": 100000000000000000000000, "forked_from": "\\ud800"}', None),
    ('{"mode": "complete", "code": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
])
def test_save_answers_hostile_bodies_with_400_not_500(client, body, message):
    response = client.post("/save/", data=body, content_type="application/json")
    if message is None:
        assert response.status_code == 200
    else:
        assert response.status_code == 400 and message in response.content.decode()


@pytest.mark.parametrize("value", ["²", "١٢", "99999999999999999999999999", "-1", "abc"])
def test_odd_run_ids_in_the_editor_url_are_ignored_or_404(client, value):
    assert client.get("/", {"run": value}).status_code in (200, 404)
