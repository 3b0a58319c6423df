"""Instruct follow-ups: a run continues a conversation (earlier turns + an optional system
prompt) through the model's chat template; the Run row, share links and forks keep it."""
from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from inference.prompts import Prompt, build_prompt_ids
from inference.sampling import SamplingParams
from playground.asgi import application
from playground.models import Playground, Run
from playground.protocol import ProtocolError, RunRequest, parse_run

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
XSS = '<script>alert("pwned")</script>'
TURNS = [{"role": "user", "content": "write add(a, b)"}, {"role": "assistant", "content": "def add(a, b):\n    return a + b"}]


def instruct(**fields):
    return {"type": "run", "mode": "instruct", "instruction": "now add type hints", "params": {"max_tokens": 8}, **fields}


def test_a_follow_up_is_the_earlier_turns_then_the_new_instruction_after_the_system_prompt():
    request = parse_run(instruct(turns=TURNS, system="be brief"), max_input_chars=1000)
    assert request.prompt() == Prompt.chat([*TURNS, {"role": "user", "content": "now add type hints"}], system="be brief")
    assert RunRequest.from_json(json.loads(json.dumps(request.to_json()))) == request  # survives the queue
    plain = parse_run(instruct(), max_input_chars=1000)
    assert plain.prompt() == Prompt.chat("now add type hints") and plain.turns == () and plain.system == ""


@pytest.mark.parametrize("turns, message", [
    ("hello", "must be a list"),
    ([TURNS[0]], "must end with the assistant's answer"),
    ([TURNS[1], TURNS[0]], 'turn 0 must be {"role": "user"'),
    ([TURNS[0], {"role": "system", "content": "x"}], 'turn 1 must be {"role": "assistant"'),
    ([TURNS[0], {**TURNS[1], "name": "x"}], "turn 1 must be"),
    ([TURNS[0], {"role": "assistant", "content": 3}], "'turns' must be a string"),
    (TURNS * 40, "at most 64 earlier turns"),
    ([TURNS[0], {"role": "assistant", "content": "x" * 990}], "the conversation is too long"),
])
def test_malformed_turns_are_refused_with_a_message(turns, message):
    with pytest.raises(ProtocolError) as e:
        parse_run(instruct(turns=turns), max_input_chars=1000)
    assert message in e.value.message and e.value.param == "turns"


@pytest.mark.django_db(transaction=True)
async def test_a_follow_up_runs_through_the_chat_template_and_is_recorded(worker, engine):
    comm = WebsocketCommunicator(application, "/ws/generate/", headers=ORIGIN)
    assert (await comm.connect())[0]
    await comm.send_json_to(instruct(turns=TURNS, system="be brief"))
    while (msg := json.loads(await comm.receive_from(timeout=60)))["type"] not in ("done", "error"):
        pass
    assert msg["type"] == "done", msg
    expected = Prompt.chat([*TURNS, {"role": "user", "content": "now add type hints"}], system="be brief")
    assert msg["stats"]["prompt_tokens"] == len(build_prompt_ids(expected, engine.tokenizer))
    final = list(engine.generate(expected, SamplingParams(max_tokens=8)))[-1]
    run = await database_sync_to_async(Run.objects.get)(pk=msg["run_id"])
    assert (run.turns, run.system_prompt, run.instruction) == (TURNS, "be brief", "now add type hints")
    assert run.output == final.text
    await comm.disconnect()


@pytest.mark.django_db
def test_share_and_fork_keep_the_whole_conversation_escaped(client):
    client.get("/")
    key = client.cookies["playground_visitor"].value  # the visitor key the page hands out
    turns = [{"role": "user", "content": XSS}, {"role": "assistant", "content": f"ok {XSS}"}]
    run = Run.objects.create(session_key=key, mode="instruct", instruction="and tests?", turns=turns,
                             system_prompt=f"sys {XSS}", status="done", output="```python\nassert 1\n```",
                             stats={"finish_reason": "stop"})
    # The saved conversation is the run's own, whatever the page sends along.
    body = {"mode": "instruct", "code": "", "instruction": "", "turns": [], "system": "", "run_id": run.pk}
    slug = client.post("/save/", data=json.dumps(body), content_type="application/json").json()["slug"]
    saved = Playground.objects.get(slug=slug)
    assert (saved.turns, saved.system_prompt, saved.instruction) == (turns, f"sys {XSS}", "and tests?")

    html = client.get(f"/p/{slug}/").content.decode()
    assert XSS not in html
    blob = json.loads(html.split('id="initial-data" type="application/json">')[1].split("</script>")[0])
    assert (blob["turns"], blob["system"], blob["instruction"]) == (turns, f"sys {XSS}", "and tests?")
    assert blob["transcript"]["output"] == run.output

    fork = client.get(f"/?fork={slug}").content.decode()
    blob = json.loads(fork.split('id="initial-data" type="application/json">')[1].split("</script>")[0])
    assert blob["turns"] == turns and blob["system"] == f"sys {XSS}" and blob["transcript"]["output"] == run.output


@pytest.mark.django_db
def test_save_refuses_malformed_turns(client):
    body = {"mode": "instruct", "instruction": "x", "turns": [{"role": "assistant", "content": "x"}]}
    response = client.post("/save/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 400 and "must end with" in response.content.decode()


@pytest.mark.django_db
def test_history_marks_follow_ups(client):
    client.get("/")
    key = client.cookies["playground_visitor"].value  # the visitor key the page hands out
    Run.objects.create(session_key=key, mode="instruct", instruction="first", status="done")
    Run.objects.create(session_key=key, mode="instruct", instruction="second", turns=TURNS, status="done")
    html = client.get("/history/").content.decode()
    assert html.count("h-thread") == 1 and "a follow-up after 2 earlier turns" in html
