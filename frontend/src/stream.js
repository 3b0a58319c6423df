// The streaming side of the page: a reconnecting WebSocket and a renderer that paints
// streamed text at most once per animation frame.
//
// Frames carry a sequence number. The renderer applies them strictly in seq order (a frame
// that arrives early waits in `held` until the gap is filled), ignores duplicates, and at
// "done" checks that it saw exactly `stats.frames` frames, so text is never dropped,
// doubled or reordered. Plain output only ever reaches the DOM through a Text node
// (appendData); instruct answers go through markdown.js (markdown-it + DOMPurify).

import { decorateCodeBlocks, renderMarkdown } from "./markdown.js";
import { sparklinePoints } from "./sparkline.js";

export class Socket {
  constructor(url, onMessage, onState) {
    this.url = url;
    this.onMessage = onMessage;
    this.onState = onState;
    this.queue = [];
    this.backoff = 250;
    this.open();
  }

  open() {
    this.onState("connecting");
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = 250;
      this.onState("open");
      for (const msg of this.queue.splice(0)) ws.send(msg);
    };
    ws.onmessage = (event) => {
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      this.onMessage(msg);
    };
    ws.onclose = () => {
      this.onState("closed");
      setTimeout(() => this.open(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 5000);
    };
  }

  send(obj) {
    const data = JSON.stringify(obj);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(data);
    else this.queue.push(data);
  }
}

function fmt(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  return Number(value).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

const MARKDOWN_EVERY_MS = 100; // while streaming, re-render Markdown at most this often
const REPLAY_MS = 1200; // the sparkline replay after a run

export class Renderer {
  // els: {output (scroll box), answer (where the text goes), tokS, ttft, tokens, elapsed,
  //       sparkline (svg polyline), substats}; onApply(code): "Apply to editor" on code blocks.
  constructor(els, { onApply = null } = {}) {
    this.els = els;
    this.onApply = onApply;
    this.reset();
  }

  // markdown: render the answer as Markdown (instruct mode) instead of plain text.
  reset({ markdown = false } = {}) {
    if (this.rafId) cancelAnimationFrame(this.rafId);
    if (this.mdTimer) clearTimeout(this.mdTimer);
    this.stopReplay();
    this.rafId = 0;
    this.mdTimer = 0;
    this.mdAt = 0;
    this.markdown = markdown;
    this.nextSeq = 0;
    this.held = new Map();
    this.pending = "";
    this.latest = null;
    this.samples = [];
    this.frames = 0;
    this.duplicates = 0;
    this.outOfOrder = 0;
    this.text = [];
    this.textNode = document.createTextNode("");
    if (markdown) {
      this.target = document.createElement("div");
      this.target.className = "md";
    } else {
      this.target = document.createElement("pre");
      this.target.className = "raw";
      this.target.append(this.textNode);
    }
    this.els.answer.replaceChildren(this.target);
    for (const key of ["tokS", "ttft", "tokens", "elapsed"]) this.els[key].textContent = "—";
    if (this.els.accepted) this.els.accepted.textContent = "—";
    this.els.sparkline.setAttribute("points", "");
    this.els.substats.textContent = "";
  }

  push(frame) {
    if (typeof frame.seq !== "number" || frame.seq < this.nextSeq || this.held.has(frame.seq)) {
      this.duplicates++;
      return;
    }
    if (frame.seq !== this.nextSeq) this.outOfOrder++;
    this.held.set(frame.seq, frame);
    while (this.held.has(this.nextSeq)) {
      const f = this.held.get(this.nextSeq);
      this.held.delete(this.nextSeq);
      this.nextSeq++;
      this.frames++;
      this.pending += f.text;
      this.text.push(f.text);
      this.latest = f;
      if (f.tok_s > 0) this.samples.push(f.tok_s);
    }
    this.schedule();
  }

  schedule() {
    if (!this.rafId) this.rafId = requestAnimationFrame(() => { this.rafId = 0; this.render(); });
  }

  render() {
    const out = this.els.output;
    if (this.pending) {
      const stick = out.scrollHeight - out.scrollTop - out.clientHeight < 40;
      if (!this.markdown) {
        this.textNode.appendData(this.pending);
        this.pending = "";
      } else if (performance.now() - this.mdAt >= MARKDOWN_EVERY_MS) {
        this.mdAt = performance.now();
        this.pending = "";
        this.target.replaceChildren(renderMarkdown(this.fullText(), { highlightCode: false }));
      } else if (!this.mdTimer) {
        this.mdTimer = setTimeout(() => { this.mdTimer = 0; this.schedule(); }, MARKDOWN_EVERY_MS);
      }
      if (stick) out.scrollTop = out.scrollHeight;
    }
    const f = this.latest;
    if (f) {
      this.els.tokS.textContent = fmt(f.tok_s);
      this.els.ttft.textContent = fmt(f.ttft_ms, 1);
      this.els.tokens.textContent = fmt(f.tokens);
      this.els.elapsed.textContent = fmt(f.elapsed_ms);
      if (this.els.accepted) this.els.accepted.textContent = f.accepted ? fmt(f.accepted) : "—";
      this.els.sparkline.setAttribute("points", sparklinePoints(this.samples));
    }
  }

  // The finished answer: highlighted Markdown with copy / apply buttons, or the plain text.
  paintFinal() {
    if (this.mdTimer) clearTimeout(this.mdTimer);
    this.mdTimer = 0;
    this.pending = "";
    if (this.markdown) {
      this.target.replaceChildren(renderMarkdown(this.fullText()));
      decorateCodeBlocks(this.target, { onApply: this.onApply });
    } else if (this.textNode.data !== this.fullText()) {
      this.textNode.data = this.fullText();
    }
  }

  // Called on "done": paint everything now (also in a background tab) and show final stats.
  finish(stats) {
    if (this.rafId) cancelAnimationFrame(this.rafId);
    this.rafId = 0;
    this.render();
    this.paintFinal();
    const problems = [];
    if (this.held.size) problems.push(`${this.held.size} frame(s) never filled their gap`);
    if (typeof stats.frames === "number" && stats.frames !== this.frames) {
      problems.push(`received ${this.frames} of ${stats.frames} frames`);
    }
    this.showStats(stats);
    return problems;
  }

  // A finished run reopened from history or a share link: its text and stats as they ended.
  showTranscript(text, stats, { markdown = false } = {}) {
    this.reset({ markdown });
    this.text = [text || ""];
    this.paintFinal();
    this.showStats(stats || {});
  }

  // Final numbers (the rate, TTFT, tokens, elapsed) and a replay of the run's tok/s curve.
  showStats(stats) {
    if (stats.decode_tok_s !== undefined && stats.decode_tok_s !== null) this.els.tokS.textContent = fmt(stats.decode_tok_s);
    if (stats.ttft_ms !== undefined && stats.ttft_ms !== null) this.els.ttft.textContent = fmt(stats.ttft_ms, 1);
    if (stats.generated_tokens !== undefined && stats.generated_tokens !== null) this.els.tokens.textContent = fmt(stats.generated_tokens);
    if (stats.elapsed_ms !== undefined && stats.elapsed_ms !== null) this.els.elapsed.textContent = fmt(stats.elapsed_ms);
    if (this.els.accepted) this.els.accepted.textContent = stats.speculative ? fmt(stats.accepted) : "—";
    const series = Array.isArray(stats.tok_s_series) && stats.tok_s_series.length ? stats.tok_s_series : this.samples;
    this.series = series.filter((v) => typeof v === "number");
    if (!this.series.length && stats.decode_tok_s) this.series = [stats.decode_tok_s];
    if (this.series.length === 1) this.series = [this.series[0], this.series[0]]; // a flat line, not a dot
    this.replay();
  }

  // Draw the tok/s curve point by point over ~1 s, so even a 0.2 s run can be watched.
  replay() {
    this.stopReplay();
    const series = this.series || [];
    const line = this.els.sparkline;
    if (series.length < 2) { line.setAttribute("points", sparklinePoints(series)); return; }
    const full = sparklinePoints(series).split(" ");
    const start = performance.now();
    const step = (now) => {
      const n = Math.max(2, Math.ceil(((now - start) / REPLAY_MS) * full.length));
      line.setAttribute("points", full.slice(0, n).join(" "));
      this.replayId = n < full.length ? requestAnimationFrame(step) : 0;
    };
    this.replayId = requestAnimationFrame(step);
  }

  stopReplay() {
    if (this.replayId) cancelAnimationFrame(this.replayId);
    this.replayId = 0;
  }

  fullText() {
    return this.text.join("");
  }
}
