// Page wiring, bundled by esbuild into static/playground/app.js (see build.mjs).
// Editor page: modes, sampling params, Run/Stop/Share, streaming over /ws/generate/.
// Share page: a read-only CodeMirror view of the saved code. Dashboard: htmx only.

import { createEditor } from "./editor.js";
import { Renderer, Socket } from "./stream.js";

const $ = (id) => document.getElementById(id);

const MODE_HINTS = {
  complete: "Continues the code in the editor from its end.",
  infill: "Writes the code that belongs at the cursor, between the text before and after it.",
  instruct: "Describe what you want; the model answers in chat mode (optionally about the code in the editor).",
};

function readInitial() {
  const node = $("initial-data");
  return node ? JSON.parse(node.textContent) : {};
}

function unescapeStop(s) {
  return s.replace(/\\(n|t|\\)/g, (_, c) => ({ n: "\n", t: "\t", "\\": "\\" })[c]);
}

function escapeStop(s) {
  return s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t");
}

function setupEditorPage() {
  const initial = readInitial();
  const params = initial.params || {};
  let mode = initial.mode || "complete";
  let running = false;
  let awaitingAccept = false;
  let runId = null;
  let lastRunId = null;
  let runCursor = null;
  let sentAt = 0;
  let firstFrameAt = 0;

  const editor = createEditor($("editor"), { doc: initial.code || "", cursor: initial.cursor, onRun: () => run() });
  $("instruction").value = initial.instruction || "";

  const renderer = new Renderer({
    output: $("output"),
    tokS: $("c-tok_s"),
    ttft: $("c-ttft"),
    tokens: $("c-tokens"),
    elapsed: $("c-elapsed"),
    sparkline: $("sparkline").querySelector("polyline"),
    substats: $("substats"),
  });

  // -- params ------------------------------------------------------------------------------
  for (const key of ["max_tokens", "temperature", "top_p", "top_k", "seed"]) {
    const v = params[key];
    $(`p-${key}`).value = v === null || v === undefined ? "" : v;
  }
  $("p-stop").value = (params.stop || []).map(escapeStop).join(", ");

  function readParams() {
    const out = {};
    for (const key of ["max_tokens", "temperature", "top_p", "top_k", "seed"]) {
      const raw = $(`p-${key}`).value.trim();
      if (raw !== "") out[key] = Number(raw);
    }
    const stop = $("p-stop").value.split(",").map((s) => unescapeStop(s.trim())).filter((s) => s);
    if (stop.length) out.stop = stop;
    return out;
  }

  // -- mode ----------------------------------------------------------------------------------
  function setMode(next) {
    mode = next;
    for (const input of document.querySelectorAll('input[name="mode"]')) input.checked = input.value === mode;
    $("instruction").hidden = mode !== "instruct";
    $("include-code-box").hidden = mode !== "instruct";
    $("mode-hint").textContent = MODE_HINTS[mode];
  }
  for (const input of document.querySelectorAll('input[name="mode"]')) {
    input.addEventListener("change", () => setMode(input.value));
  }
  setMode(mode);

  // -- status & buttons ---------------------------------------------------------------------
  function setStatus(text, kind) {
    const el = $("status");
    el.textContent = text;
    el.className = `status ${kind}`;
  }
  function setRunning(value) {
    running = value;
    $("run").disabled = value;
    $("stop").disabled = !value;
    $("insert").disabled = value || !renderer.fullText();
    document.body.classList.toggle("is-running", value);
  }

  // -- socket --------------------------------------------------------------------------------
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new Socket(`${scheme}://${location.host}/ws/generate/`, onMessage, (state) => {
    document.body.dataset.socket = state;
    if (state === "closed" && running) {
      setRunning(false);
      awaitingAccept = false;
      setStatus("connection lost", "error");
    }
  });

  function onMessage(msg) {
    switch (msg.type) {
      case "accepted":
        awaitingAccept = false;
        runId = msg.run_id;
        setStatus(msg.queued_ahead ? `queued (${msg.queued_ahead} ahead)` : "queued", "queued");
        break;
      case "started":
        setStatus("running", "running");
        break;
      case "frame":
        if (msg.seq === 0) firstFrameAt = performance.now();
        renderer.push(msg);
        break;
      case "done": {
        const stats = msg.stats || {};
        const problems = renderer.finish(stats);
        lastRunId = msg.run_id;
        runId = null;
        setRunning(false);
        setStatus(msg.finish_reason || "done", msg.finish_reason === "cancelled" ? "cancelled" : "done");
        const parts = [];
        if (stats.prompt_tokens !== undefined) parts.push(`prompt ${stats.prompt_tokens} tok`);
        if (stats.decode_ms !== undefined) parts.push(`decode ${Math.round(stats.decode_ms)} ms`);
        if (firstFrameAt) parts.push(`first text in browser after ${Math.round(firstFrameAt - sentAt)} ms`);
        if (stats.frames !== undefined) parts.push(`${stats.frames} frames`);
        if (stats.model) parts.push(stats.model);
        if (problems.length) parts.push(`⚠ ${problems.join("; ")}`);
        $("substats").textContent = parts.join(" · ");
        document.body.dispatchEvent(new CustomEvent("run-finished", { bubbles: true }));
        break;
      }
      case "error":
        if (msg.run_id !== undefined || awaitingAccept) {
          awaitingAccept = false;
          runId = null;
          renderer.finish({});
          setRunning(false);
          if (msg.run_id !== undefined) document.body.dispatchEvent(new CustomEvent("run-finished", { bubbles: true }));
        }
        setStatus(msg.message, "error");
        break;
      default:
        break;
    }
  }

  // -- actions -------------------------------------------------------------------------------
  function run() {
    if (running) return;
    const code = editor.state.doc.toString();
    const frame = { type: "run", mode, params: readParams() };
    if (mode === "complete") frame.code = code;
    else if (mode === "infill") {
      runCursor = editor.state.selection.main.head;
      frame.prefix = code.slice(0, runCursor);
      frame.suffix = code.slice(runCursor);
    } else {
      const instruction = $("instruction").value;
      frame.instruction = $("include-code").checked && code.trim() && instruction.trim()
        ? `${instruction}\n\n\`\`\`python\n${code}\n\`\`\`` : instruction;
    }
    renderer.reset();
    firstFrameAt = 0;
    sentAt = performance.now();
    awaitingAccept = true;
    setRunning(true);
    setStatus("sending", "queued");
    socket.send(frame);
  }

  function stop() {
    if (!running) return;
    socket.send({ type: "stop" });
    setStatus("stopping", "queued");
  }

  function insertOutput() {
    const text = renderer.fullText();
    if (!text) return;
    const doc = editor.state.doc;
    const at = mode === "complete" ? doc.length : Math.min(runCursor ?? editor.state.selection.main.head, doc.length);
    editor.dispatch({ changes: { from: at, insert: text }, selection: { anchor: at + text.length } });
    editor.focus();
  }

  async function save() {
    const code = editor.state.doc.toString();
    const body = {
      mode, code, instruction: $("instruction").value, params: readParams(),
      cursor: mode === "infill" ? editor.state.selection.main.head : null,
      run_id: lastRunId, forked_from: initial.forked_from || null,
    };
    const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
    const response = await fetch("/save/", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": token },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (!response.ok) {
      setStatus(`save failed: ${await response.text()}`, "error");
      return;
    }
    const { url } = await response.json();
    $("share-result").hidden = false;
    $("share-url").value = url;
    $("share-open").href = url;
    $("share-url").select();
    try { await navigator.clipboard.writeText(url); setStatus("link copied", "done"); } catch { setStatus("saved", "done"); }
  }

  $("run").addEventListener("click", run);
  $("stop").addEventListener("click", stop);
  $("save").addEventListener("click", save);
  $("insert").addEventListener("click", insertOutput);
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter" && !e.defaultPrevented) { e.preventDefault(); run(); }
    if (e.key === "Escape" && running) stop();
  });
  if (navigator.platform && !/Mac|iP/.test(navigator.platform)) {
    for (const kbd of document.querySelectorAll("kbd")) kbd.textContent = "Ctrl↵";
  }
  window.playground = { editor, renderer, socket, run, stop }; // handy from devtools and tests
}

function setupSharePage() {
  const initial = readInitial();
  const host = $("editor");
  host.replaceChildren();
  createEditor(host, { doc: initial.code || "", readOnly: true });
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "editor") setupEditorPage();
  else if (page === "share") setupSharePage();
});
