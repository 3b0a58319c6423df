// The streaming side of the page: a reconnecting WebSocket and a renderer that paints
// streamed text at most once per animation frame.
//
// Frames carry a sequence number. The renderer applies them strictly in seq order (a frame
// that arrives early waits in `held` until the gap is filled), ignores duplicates, and at
// "done" checks that it saw exactly `stats.frames` frames, so text is never dropped,
// doubled or reordered. Model output only ever reaches the DOM through a Text node
// (appendData), never innerHTML.

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

export class Renderer {
  // els: {output, tokS, ttft, tokens, elapsed, sparkline (svg polyline), substats}
  constructor(els) {
    this.els = els;
    this.reset();
  }

  reset() {
    if (this.rafId) cancelAnimationFrame(this.rafId);
    this.rafId = 0;
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
    this.els.output.replaceChildren(this.textNode);
    for (const key of ["tokS", "ttft", "tokens", "elapsed"]) this.els[key].textContent = "—";
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
      this.textNode.appendData(this.pending);
      this.pending = "";
      if (stick) out.scrollTop = out.scrollHeight;
    }
    const f = this.latest;
    if (f) {
      this.els.tokS.textContent = fmt(f.tok_s);
      this.els.ttft.textContent = fmt(f.ttft_ms, 1);
      this.els.tokens.textContent = fmt(f.tokens);
      this.els.elapsed.textContent = fmt(f.elapsed_ms);
      this.els.sparkline.setAttribute("points", sparklinePoints(this.samples));
    }
  }

  // Called on "done": paint everything now (also in a background tab) and show final stats.
  finish(stats) {
    if (this.rafId) cancelAnimationFrame(this.rafId);
    this.rafId = 0;
    this.render();
    const problems = [];
    if (this.held.size) problems.push(`${this.held.size} frame(s) never filled their gap`);
    if (typeof stats.frames === "number" && stats.frames !== this.frames) {
      problems.push(`received ${this.frames} of ${stats.frames} frames`);
    }
    if (stats.decode_tok_s !== undefined) this.els.tokS.textContent = fmt(stats.decode_tok_s);
    if (stats.ttft_ms !== undefined) this.els.ttft.textContent = fmt(stats.ttft_ms, 1);
    if (stats.generated_tokens !== undefined) this.els.tokens.textContent = fmt(stats.generated_tokens);
    if (stats.elapsed_ms !== undefined) this.els.elapsed.textContent = fmt(stats.elapsed_ms);
    return problems;
  }

  fullText() {
    return this.text.join("");
  }
}
