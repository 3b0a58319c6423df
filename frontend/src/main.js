// Page wiring, bundled by esbuild into static/playground/app.js (see build.mjs).
// Editor page: modes, sampling params, Run/Stop/Share, streaming over /ws/generate/,
// reopened runs as transcripts, instruct follow-ups (a conversation with an optional system
// prompt, sent as "turns" + "system"), the draft kept across reloads, the keymap help.
// Share page: a read-only CodeMirror view of the saved code and the rendered answer.
// Dashboard: htmx only.

import { createEditor, replaceDoc } from "./editor.js";
import { showConversation } from "./conversation.js";
import { copyText } from "./markdown.js";
import { draftSaver, loadDraft } from "./drafts.js";
import { Renderer, Socket } from "./stream.js";

const $ = (id) => document.getElementById(id);

const MODE_HINTS = {
  complete: "Continues the code in the editor from its end.",
  infill: "Writes the code that belongs at the cursor, between the text before and after it.",
  instruct: "Describe what you want; the model answers in chat mode (optionally about the code in the editor).",
};
const FINISHED = new Set(["done", "cancelled", "error"]);

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

function isTyping(target) {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

function counterEls() {
  return {
    output: $("output"),
    answer: $("answer"),
    tokS: $("c-tok_s"),
    ttft: $("c-ttft"),
    tokens: $("c-tokens"),
    elapsed: $("c-elapsed"),
    accepted: $("c-accepted"),
    sparkline: $("sparkline").querySelector("polyline"),
    substats: $("substats"),
  };
}

function substatsLine(stats, extra = []) {
  const parts = [];
  if (stats.finish_reason) parts.push(`finish: ${stats.finish_reason}`);
  if (stats.prompt_tokens !== undefined && stats.prompt_tokens !== null) parts.push(`prompt ${stats.prompt_tokens} tok`);
  if (stats.decode_ms !== undefined && stats.decode_ms !== null) parts.push(`decode ${Math.round(stats.decode_ms)} ms`);
  if (stats.speculative) {
    parts.push(`speculation ${stats.accepted}/${stats.drafted} drafted accepted, ${Number(stats.accepted_per_verify || 0).toFixed(2)} per verify step`);
  }
  parts.push(...extra);
  if (stats.frames !== undefined) parts.push(`${stats.frames} frames`);
  if (stats.model) parts.push(stats.model);
  return parts.join(" · ");
}

function setupEditorPage() {
  const initial = readInitial();
  const draft = initial.origin === "new" ? loadDraft() : null;
  const start = draft ? { ...initial, ...draft, params: initial.params } : initial;
  const params = start.params || {};
  let mode = start.mode || "complete";
  let running = false;
  let awaitingAccept = false;
  let runId = null;
  let lastRunId = null;
  let runCursor = null;
  let sentAt = 0;
  let firstFrameAt = 0;
  let thread = []; // the turns a follow-up continues: [{role, content}, ...] ending with an answer
  let sent = { mode, turns: [], question: "", system: "" }; // what the latest run asked
  let lastQuestion = "";

  const saveDraft = draftSaver();
  const remember = () => saveDraft({ code: editor.state.doc.toString(), mode, instruction: $("instruction").value,
    system: $("system").value });
  const editor = createEditor($("editor"), {
    doc: start.code || "", cursor: draft ? null : start.cursor, onRun: () => run(), onChange: () => remember(),
  });
  $("instruction").value = start.instruction || "";
  $("instruction").dataset.placeholder = $("instruction").placeholder;
  $("system").value = start.system || "";
  if (start.system) $("system-box").open = true;
  $("instruction").addEventListener("input", remember);
  $("system").addEventListener("input", remember);

  const onApply = (code) => { replaceDoc(editor, code); setStatus("applied to the editor (Ctrl/Cmd-Z undoes it)", "done"); };
  const renderer = new Renderer(counterEls(), { onApply });

  // -- instruct conversation ---------------------------------------------------------------
  function showThread(turns, question, system) {
    showConversation($("conversation"), { system, turns, question }, { onApply });
  }
  function setThread(turns) {
    thread = turns;
    $("follow-up").checked = thread.length > 0;
    $("follow-up-count").textContent = `${thread.length / 2} earlier exchange${thread.length === 2 ? "" : "s"}`;
    updateFollowUp();
  }
  function updateFollowUp() {
    const on = mode === "instruct" && thread.length > 0;
    $("follow-up-box").hidden = !on;
    $("instruction").placeholder = on && $("follow-up").checked ? "Follow up on the answer, e.g. 'add type hints'"
      : $("instruction").dataset.placeholder;
  }
  function newChat() {
    setThread([]);
    showThread([], "", "");
    if (!$("instruction").value.trim() && lastQuestion) $("instruction").value = lastQuestion;
    $("instruction").focus();
  }
  // A finished answer: the next instruct run may follow up on it.
  function continueAfter(question, answer, turns) {
    lastQuestion = question;
    setThread([...turns, { role: "user", content: question }, { role: "assistant", content: answer }]);
    $("instruction").value = "";
    $("include-code").checked = false; // the code went with the first question
    remember();
  }

  // -- params ------------------------------------------------------------------------------
  for (const key of ["max_tokens", "temperature", "top_p", "top_k", "seed"]) {
    const v = params[key];
    $(`p-${key}`).value = v === null || v === undefined ? "" : v;
  }
  $("p-stop").value = (params.stop || []).map(escapeStop).join(", ");
  $("p-speculate").checked = params.speculate !== false;

  function readParams() {
    const out = {};
    for (const key of ["max_tokens", "temperature", "top_p", "top_k", "seed"]) {
      const raw = $(`p-${key}`).value.trim();
      if (raw !== "") out[key] = Number(raw);
    }
    const stop = $("p-stop").value.split(",").map((s) => unescapeStop(s.trim())).filter((s) => s);
    if (stop.length) out.stop = stop;
    if (!$("p-speculate").checked) out.speculate = false;
    return out;
  }

  // -- mode ----------------------------------------------------------------------------------
  function setMode(next) {
    mode = next;
    for (const input of document.querySelectorAll('input[name="mode"]')) input.checked = input.value === mode;
    $("instruction").hidden = mode !== "instruct";
    $("include-code-box").hidden = mode !== "instruct";
    $("system-box").hidden = mode !== "instruct";
    $("conversation").hidden = mode !== "instruct" || !$("conversation").childElementCount;
    $("mode-hint").textContent = MODE_HINTS[mode];
    updateFollowUp();
  }
  for (const input of document.querySelectorAll('input[name="mode"]')) {
    input.addEventListener("change", () => { setMode(input.value); remember(); });
  }
  setMode(mode);

  // -- status, errors & buttons ---------------------------------------------------------------
  function setStatus(text, kind) {
    const el = $("status");
    el.textContent = text;
    el.className = `status ${kind}`;
  }
  function showError(message) {
    $("error-box").textContent = message;
    $("error-box").hidden = !message;
  }
  function setRunning(value) {
    running = value;
    $("run").disabled = value;
    $("stop").disabled = !value;
    $("insert").disabled = value || !renderer.fullText();
    $("copy-output").disabled = value || !renderer.fullText();
    document.body.classList.toggle("is-running", value);
  }
  // The consumer's "accepted" and "queued" messages: the live position while a run waits.
  function showQueue(ahead, waited, workers) {
    const none = workers === 0 ? " · no worker online" : "";
    const wait = typeof waited === "number" && waited >= 1 ? ` · ${Math.round(waited)} s` : "";
    setStatus(`${ahead ? `queued · ${ahead} ahead` : "queued · next"}${none}${wait}`, "queued");
  }

  // -- a run reopened from history: the transcript as it ended ---------------------------------
  const transcript = initial.transcript;
  if (transcript) {
    renderer.showTranscript(transcript.output, transcript.stats, { markdown: transcript.mode === "instruct" });
    if (transcript.mode === "instruct") {
      const turns = initial.turns || [];
      showThread(turns, initial.instruction || "", initial.system || "");
      sent = { mode: "instruct", turns, question: initial.instruction || "", system: initial.system || "" };
      if (transcript.status !== "error" && transcript.output) continueAfter(initial.instruction || "", transcript.output, turns);
      else setThread(turns);
    }
    lastRunId = transcript.run_id;
    const reason = transcript.status === "error" ? "error" : (transcript.finish_reason || transcript.status);
    setStatus(reason, transcript.status === "error" ? "error" : FINISHED.has(transcript.status) ? "done" : "queued");
    showError(transcript.error || "");
    $("substats").textContent = substatsLine(transcript.stats || {});
    setRunning(false);
  } else if (draft) {
    setStatus("restored your unsaved code", "idle");
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
        showQueue(msg.queued_ahead);
        break;
      case "queued":
        if (msg.run_id === runId && typeof msg.queued_ahead === "number") showQueue(msg.queued_ahead, msg.waited_s, msg.workers);
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
        if (sent.mode === "instruct" && renderer.fullText()) continueAfter(sent.question, renderer.fullText(), sent.turns);
        lastRunId = msg.run_id;
        runId = null;
        setRunning(false);
        setStatus(msg.finish_reason || "done", msg.finish_reason === "cancelled" ? "cancelled" : "done");
        const extra = [];
        if (firstFrameAt) extra.push(`first text in browser after ${Math.round(firstFrameAt - sentAt)} ms`);
        if (problems.length) extra.push(`⚠ ${problems.join("; ")}`);
        $("substats").textContent = substatsLine({ ...stats, finish_reason: undefined }, extra);
        document.body.dispatchEvent(new CustomEvent("run-finished", { bubbles: true }));
        break;
      }
      case "error":
        if (msg.run_id !== undefined || awaitingAccept) {
          awaitingAccept = false;
          if (msg.run_id !== undefined) lastRunId = msg.run_id;
          runId = null;
          renderer.finish({});
          setRunning(false);
          if (msg.run_id !== undefined) document.body.dispatchEvent(new CustomEvent("run-finished", { bubbles: true }));
        }
        setStatus("error", "error");
        showError(msg.message);
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
      frame.turns = thread.length && $("follow-up").checked ? thread : [];
      frame.system = $("system").value;
      if (frame.instruction.trim()) showThread(frame.turns, frame.instruction, frame.system);
    }
    sent = { mode, turns: frame.turns || [], question: frame.instruction || "", system: frame.system || "" };
    prepareRun(mode);
    socket.send(frame);
  }

  function prepareRun(runMode) {
    renderer.reset({ markdown: runMode === "instruct" });
    showError("");
    firstFrameAt = 0;
    sentAt = performance.now();
    awaitingAccept = true;
    setRunning(true);
    setStatus("sending", "queued");
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

  async function copyOutput() {
    const ok = await copyText(renderer.fullText());
    setStatus(ok ? "output copied" : "copy failed", ok ? "done" : "error");
  }

  async function save() {
    const code = editor.state.doc.toString();
    const body = {
      mode, code, instruction: $("instruction").value || sent.question, params: readParams(),
      turns: sent.mode === "instruct" ? sent.turns : [], system: $("system").value,
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
      setStatus("save failed", "error");
      showError(`save failed: ${await response.text()}`);
      return;
    }
    const { url } = await response.json();
    $("share-result").hidden = false;
    $("share-url").value = url;
    $("share-open").href = url;
    $("share-url").select();
    setStatus((await copyText(url)) ? "link copied" : "saved", "done");
  }

  function toggleKeymap(show) {
    const box = $("keymap");
    box.hidden = show === undefined ? !box.hidden : !show;
    $("keys").setAttribute("aria-expanded", String(!box.hidden));
  }

  $("run").addEventListener("click", run);
  $("stop").addEventListener("click", stop);
  $("save").addEventListener("click", save);
  $("insert").addEventListener("click", insertOutput);
  $("copy-output").addEventListener("click", copyOutput);
  $("keys").addEventListener("click", () => toggleKeymap());
  $("new-chat").addEventListener("click", newChat);
  $("follow-up").addEventListener("change", updateFollowUp);
  $("spark-replay").addEventListener("click", () => renderer.replay());
  document.addEventListener("keydown", (e) => {
    const mod = e.ctrlKey || e.metaKey;
    if (mod && e.key === "Enter" && !e.defaultPrevented) { e.preventDefault(); run(); }
    else if (mod && !e.shiftKey && !e.altKey && e.key.toLowerCase() === "s") { e.preventDefault(); save(); }
    else if (e.key === "Escape") {
      if (running) stop();
      else if (!$("keymap").hidden) toggleKeymap(false);
    } else if (e.key === "?" && !isTyping(e.target)) toggleKeymap();
  });
  const mac = /Mac|iP/.test(navigator.platform || "");
  for (const kbd of document.querySelectorAll("kbd[data-mod]")) kbd.textContent = kbd.dataset.mod.replace("Mod", mac ? "⌘" : "Ctrl");
  // Handy from devtools; the browser tests feed onMessage the server's messages.
  window.playground = { editor, renderer, socket, run, stop, save, onMessage, prepareRun, thread: () => thread };
}

function setupSharePage() {
  const initial = readInitial();
  const host = $("editor");
  host.replaceChildren();
  createEditor(host, { doc: initial.code || "", readOnly: true });
  const renderer = new Renderer(counterEls());
  const transcript = initial.transcript || {};
  renderer.showTranscript(transcript.output || "", transcript.stats || {}, { markdown: initial.mode === "instruct" });
  if (initial.mode === "instruct") {
    showConversation($("conversation"), { system: initial.system || "", turns: initial.turns || [],
      question: initial.instruction || "" });
  }
  $("substats").textContent = substatsLine(transcript.stats || {});
  $("spark-replay").addEventListener("click", () => renderer.replay());
  window.playground = { renderer };
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "editor") setupEditorPage();
  else if (page === "share") setupSharePage();
});
