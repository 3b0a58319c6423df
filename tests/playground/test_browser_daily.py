"""The playground as a daily tool, in a real browser (headless Debian Chromium via Playwright,
never `playwright install`) against a live `manage.py playground` on the tiny synthetic model:

- Python triple quotes typed key by key come out as typed;
- instruct answers render as sanitised Markdown with highlighted code, a copy button per code
  block and for the whole output, and "apply to editor";
- a run reopened from "Your runs" shows its output, finish reason or error and its stats;
  the list filters by mode;
- the unsaved code survives a reload; the keymap help; Ctrl/Cmd-S shares;
- no horizontal scroll at 360 px; errors in a readable block; the sparkline replays;
- the queue position (and a missing worker) shown live while a run waits.

Screenshots at desktop and phone widths go to test-artifacts/browser/ (gitignored).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 360, "height": 780}
FINISHED = "['length','stop','cancelled','error'].includes(document.querySelector('#status').textContent)"


@pytest.fixture(scope="module")
def server(tmp_path_factory, processes_factory, free_tcp_port, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("live_daily")
    port = free_tcp_port()
    procs = processes_factory(tmp)
    procs.start("playground", "manage.py", "playground", "--port", str(port), "--device", "cpu",
                "--model", str(tiny_model_dir), port=port)
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def context(browser):
    """A fresh context (own cookies and localStorage) that may use the clipboard."""
    context = browser.new_context(viewport=DESKTOP, permissions=["clipboard-read", "clipboard-write"])
    yield context
    context.close()


@pytest.fixture
def page(context):
    """A page that fails the test on any uncaught JS error or console error."""
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    assert not errors, errors


def shoot(page, name: str) -> None:
    """Screenshot at desktop and phone widths (the viewport is put back after)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.wait_for_timeout(100)
        page.screenshot(path=str(ARTIFACTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(size)


def open_editor(page, server, query: str = "") -> None:
    page.goto(f"{server}/{query}")
    page.wait_for_selector(".cm-editor .cm-content")
    page.wait_for_function("document.body.dataset.socket === 'open'")


def clear_editor(page) -> None:
    page.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")


def editor_text(page) -> str:
    return page.evaluate("window.playground.editor.state.doc.toString()")


def run_and_wait(page, mode: str, max_tokens: int) -> None:
    page.check(f'input[name="mode"][value="{mode}"]', force=True)
    page.fill("#p-max_tokens", str(max_tokens))
    page.click("#run")
    page.wait_for_function(FINISHED, timeout=60000)


@pytest.mark.parametrize("typed", [
    'x = """doc"""',
    "y = '''doc'''",
    'def f():\n"""Return one."""\nreturn 1',
    's = "a" + \'b\' + f"{x}"',
    'e = """"""',
])
def test_python_quotes_type_key_by_key_as_typed(server, page, typed):
    open_editor(page, server)
    clear_editor(page)
    for line_no, line in enumerate(typed.split("\n")):
        if line_no:
            page.keyboard.press("Enter")
            page.keyboard.press("Home")  # auto-indent is not what this test is about
            page.keyboard.press("Shift+Home")
            page.keyboard.press("Delete")
        page.keyboard.type(line, delay=5)  # one key event per character
    assert editor_text(page) == typed


MARKDOWN_ANSWER = """Here is a **fast** version:

```python
def add(a, b):
    return a + b
```

Avoid `eval`. <script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">
[click me](javascript:window.__pwned=3) and [docs](https://docs.python.org/3/)

<a href="#" onclick="window.__pwned = 4">raw html link</a> <svg onload="window.__pwned = 5"></svg>
![leak](https://example.invalid/pixel.png?text=secret) [data](data:text/html,<script>window.__pwned=6</script>)

```
LONG = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
```
"""


def feed_answer(page, text: str, run_id: int = 999999) -> None:
    """The server's messages for an instruct run, fed to the page's own message handler."""
    chunks = [text[i:i + 17] for i in range(0, len(text), 17)]
    messages = [{"type": "accepted", "run_id": run_id, "queued_ahead": 0},
                {"type": "started", "run_id": run_id, "model": "test", "worker_id": "w"}]
    messages += [{"type": "frame", "seq": i, "text": c, "tokens": i + 1, "tok_s": 500.0 + i, "ttft_ms": 3.0,
                  "elapsed_ms": 2.0 * i} for i, c in enumerate(chunks)]
    messages.append({"type": "done", "run_id": run_id, "finish_reason": "stop",
                     "stats": {"finish_reason": "stop", "generated_tokens": len(chunks), "decode_tok_s": 512.0,
                               "ttft_ms": 3.0, "frames": len(chunks), "elapsed_ms": 80.0,
                               "tok_s_series": [500.0, 505.0, 510.0, 512.0]}})
    page.evaluate("""async (messages) => {
      window.playground.prepareRun("instruct");
      for (const m of messages) { window.playground.onMessage(m); await new Promise((ok) => setTimeout(ok, 5)); }
    }""", messages)


def test_instruct_answer_renders_markdown_sanitised_with_copy_and_apply(server, page):
    open_editor(page, server)
    page.check('input[name="mode"][value="instruct"]', force=True)
    feed_answer(page, MARKDOWN_ANSWER)
    page.wait_for_selector("#output .md .code-block")
    out = page.locator("#output")
    assert out.locator("strong").inner_text() == "fast"
    assert out.locator("pre code .hljs-keyword").first.inner_text() == "def"  # highlighted
    # Nothing the model wrote runs or becomes live HTML.
    assert page.evaluate("window.__pwned") is None
    assert out.locator("script, img, svg, iframe, [onerror], [onclick], [onload], a[href^='javascript'], "
                       "a[href^='data']").count() == 0
    assert "<script>" in out.inner_text()  # shown as text instead
    image = out.locator("a[href='https://example.invalid/pixel.png?text=secret']")  # a link, never fetched
    assert image.inner_text() == "image: leak"
    link = out.locator("a[href='https://docs.python.org/3/']")
    assert link.get_attribute("target") == "_blank" and "noopener" in link.get_attribute("rel")

    code = "def add(a, b):\n    return a + b"
    out.locator(".copy-code").first.click()
    page.wait_for_function("document.querySelector('.copy-code').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == code
    page.click("#copy-output")
    page.wait_for_function("document.querySelector('#status').textContent === 'output copied'")
    assert page.evaluate("navigator.clipboard.readText()") == MARKDOWN_ANSWER
    out.locator(".apply-code").first.click()
    assert editor_text(page) == code
    page.locator(".cm-content").click()
    page.keyboard.press("Control+z")
    assert editor_text(page) != code  # one undo brings the old code back
    shoot(page, "markdown-answer")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # long code scrolls in its box


REPLAY = """async () => {
  const r = window.playground.renderer;
  r.showStats({decode_tok_s: 900, tok_s_series: Array.from({length: 60}, (_, i) => 800 + i)});
  const line = document.querySelector('#sparkline polyline');
  const counts = [];
  const started = performance.now();
  while (performance.now() - started < 2500) {
    await new Promise((ok) => requestAnimationFrame(ok));
    counts.push(line.getAttribute('points').split(' ').length);
  }
  return counts;
}"""


def test_the_sparkline_replays_the_runs_curve_after_it_ended(server, page):
    open_editor(page, server)
    counts = page.evaluate(REPLAY)
    assert counts == sorted(counts) and counts[-1] == 60  # drawn left to right, then all of it
    assert counts[0] < 60  # over several frames, not at once
    assert page.locator("#c-tok_s").inner_text() == "900"  # the final rate stays


def test_a_reopened_run_shows_its_output_stats_or_error_and_history_filters(server, page):
    open_editor(page, server)
    clear_editor(page)
    page.keyboard.type("def greet(name):\n")
    run_and_wait(page, "complete", 24)
    finished = {sel: page.locator(sel).inner_text() for sel in ("#c-tok_s", "#c-ttft", "#c-tokens", "#status")}
    output = page.evaluate("window.playground.renderer.fullText()")
    assert output and finished["#status"] in ("length", "stop")

    # An error run: more tokens than the tiny model's context (2,048) holds.
    page.check('input[name="mode"][value="instruct"]', force=True)
    page.fill("#instruction", "write a function")
    page.fill("#p-max_tokens", "4000")
    page.click("#run")
    page.wait_for_function("document.querySelector('#status').textContent === 'error'", timeout=30000)
    error = page.locator("#error-box").inner_text()
    assert "context" in error and page.locator("#error-box").is_visible()

    page.wait_for_selector("#history li:nth-child(2)")
    assert page.locator("#history li").first.locator(".h-status").inner_text() == "error"
    assert re.search(r"\d tok/s", page.locator("#history li").nth(1).inner_text())
    page.select_option("#history-mode", "complete")
    page.wait_for_function("document.querySelectorAll('#history li').length === 1")
    assert page.locator("#history .h-mode").inner_text() == "complete"

    # Reopen the finished run: same output, finish reason and numbers; the sparkline replays.
    page.locator("#history li a").first.click()
    page.wait_for_selector(".cm-editor .cm-content")
    assert page.evaluate("window.playground.renderer.fullText()") == output
    assert page.locator("#output").evaluate("el => el.textContent") == output
    for sel, text in finished.items():
        assert page.locator(sel).inner_text() == text, sel
    page.wait_for_function("document.querySelector('#sparkline polyline').getAttribute('points').split(' ').length > 1")
    assert "def greet(name):" in editor_text(page)

    # Reopen the failed run: its message in the error block.
    page.goto(server + "/")
    page.wait_for_selector("#history li")
    page.locator("#history li a").first.click()
    page.wait_for_selector("#error-box:not([hidden])")
    assert page.locator("#error-box").inner_text() == error
    assert page.locator("#status").inner_text() == "error"
    shoot(page, "reopened-error")


def test_unsaved_code_survives_a_reload_and_the_keymap_help(server, page):
    open_editor(page, server)
    clear_editor(page)
    page.keyboard.type("print('kept')", delay=5)
    page.wait_for_timeout(400)  # the draft is written at most every 300 ms
    page.reload()
    page.wait_for_selector(".cm-editor .cm-content")
    assert editor_text(page) == "print('kept')"

    page.locator("body").press("?")
    assert page.locator("#keymap").is_visible()
    assert "Run" in page.locator("#keymap").inner_text() and "Stop" in page.locator("#keymap").inner_text()
    assert "Share" in page.locator("#keymap").inner_text()
    page.keyboard.press("Escape")
    assert page.locator("#keymap").is_hidden()
    page.click("#keys")
    assert page.locator("#keymap").is_visible()
    page.click("#keys")

    page.locator(".cm-content").click()
    page.keyboard.press("Control+s")
    page.wait_for_selector("#share-result:not([hidden])")
    assert re.search(r"/p/[\w-]{16,}/$", page.input_value("#share-url"))


@pytest.mark.parametrize("path", ["/", "share"])
def test_no_horizontal_scroll_at_360_px(server, browser, path):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    open_editor(page, server)
    page.fill("#p-max_tokens", "12")
    page.click("#run")
    page.wait_for_function(FINISHED, timeout=60000)
    # A long unbroken error message must wrap inside its block.
    page.evaluate("window.playground.onMessage({type: 'error', message: 'x'.repeat(300) + ' must wrap'})")
    page.wait_for_selector("#history li")
    if path == "share":
        page.click("#save")
        page.wait_for_selector("#share-result:not([hidden])")
        page.goto(page.input_value("#share-url"))
        page.wait_for_selector(".cm-editor")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"page is {width}px wide at {PHONE['width']}px"
    shoot(page, "phone-" + ("editor" if path == "/" else "share"))
    context.close()


def test_the_queue_position_updates_while_waiting(server, page):
    open_editor(page, server)
    page.evaluate("""() => {
      window.playground.prepareRun("complete");
      window.playground.onMessage({type: "accepted", run_id: 424242, queued_ahead: 3});
    }""")
    assert page.locator("#status").inner_text() == "queued · 3 ahead"
    page.evaluate("window.playground.onMessage({type: 'queued', run_id: 424242, queued_ahead: 1, waited_s: 4.2, workers: 1})")
    assert page.locator("#status").inner_text() == "queued · 1 ahead · 4 s"
    page.evaluate("window.playground.onMessage({type: 'queued', run_id: 7, queued_ahead: 0, waited_s: 5, workers: 1})")
    assert page.locator("#status").inner_text() == "queued · 1 ahead · 4 s"  # another run's position: ignored
    page.evaluate("window.playground.onMessage({type: 'started', run_id: 424242, model: 'm', worker_id: 'w'})")
    assert page.locator("#status").inner_text() == "running"


def test_a_run_waiting_without_a_worker_says_so_live_and_can_be_stopped(processes_factory, free_tcp_port, browser,
                                                                         tmp_path):
    port = free_tcp_port()
    processes_factory(tmp_path).start("web", "manage.py", "playground", "--no-worker", "--port", str(port), port=port)
    page = browser.new_page()
    open_editor(page, f"http://127.0.0.1:{port}")
    page.click("#run")
    # The consumer's "queued" updates: the position, that no worker is online, the wait so far.
    page.wait_for_function("/^queued · next · no worker online · [1-9]\\d* s$/.test(document.querySelector('#status').textContent)",
                           timeout=20000)
    page.click("#stop")
    page.wait_for_function("document.querySelector('#status').textContent === 'cancelled'", timeout=10000)
    page.close()


def turn_roles(page) -> list[str]:
    return page.evaluate("[...document.querySelectorAll('#conversation .turn')].map((t) => t.classList[1])")


def test_follow_ups_continue_the_conversation_and_share_and_fork_keep_it(server, page):
    open_editor(page, server)
    page.check('input[name="mode"][value="instruct"]', force=True)
    page.uncheck("#include-code")
    page.click("#system-box summary")
    page.fill("#system", "You answer in Python.")
    page.fill("#instruction", "write add(a, b)")
    run_and_wait(page, "instruct", 8)
    assert turn_roles(page) == ["system", "user"]
    first_answer = page.evaluate("window.playground.renderer.fullText()")
    assert first_answer and page.locator("#follow-up-box").is_visible() and page.is_checked("#follow-up")
    assert page.input_value("#instruction") == "" and "1 earlier exchange" in page.inner_text("#follow-up-box")

    page.fill("#instruction", "now add type hints")
    run_and_wait(page, "instruct", 8)
    assert turn_roles(page) == ["system", "user", "assistant", "user"]
    assert page.locator("#conversation .turn.assistant").inner_text().endswith(first_answer.strip()[-10:])
    assert "2 earlier exchanges" in page.inner_text("#follow-up-box")
    shoot(page, "follow-up")

    # Reopened from history, the run shows the conversation it continued.
    page.wait_for_function("document.querySelector('#history li .h-title')?.textContent === '↳ now add type hints'")
    page.locator("#history li a").first.click()
    page.wait_for_selector("#conversation .turn")
    assert turn_roles(page) == ["system", "user", "assistant", "user"]

    # The share link shows the whole conversation; a fork can go on with it.
    page.click("#save")
    page.wait_for_selector("#share-result:not([hidden])")
    page.goto(page.input_value("#share-url"))
    page.wait_for_selector("#conversation .turn")
    assert turn_roles(page) == ["system", "user", "assistant", "user"]
    assert "now add type hints" in page.locator("#conversation").inner_text()
    page.click("#fork")
    page.wait_for_selector(".cm-editor .cm-content")
    assert turn_roles(page) == ["system", "user", "assistant", "user"]
    assert "2 earlier exchanges" in page.inner_text("#follow-up-box") and page.is_checked("#follow-up")
    page.click("#new-chat")
    assert turn_roles(page) == [] and page.input_value("#instruction") == "now add type hints"
