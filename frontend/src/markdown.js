// Model answers as Markdown: markdown-it -> highlight.js -> DOMPurify -> a DOM fragment.
//
// Model output is untrusted: markdown-it runs with raw HTML off (tags come out as text),
// its link check drops javascript:/vbscript:/data: URLs, and DOMPurify sanitizes whatever
// it produced before anything reaches the page; images are shown as links, never fetched;
// links open in a new tab without an opener. The copy and "apply to editor" buttons on code blocks are built here with
// createElement, never from the model's text.

import MarkdownIt from "markdown-it";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import javascript from "highlight.js/lib/languages/javascript";
import typescript from "highlight.js/lib/languages/typescript";
import bash from "highlight.js/lib/languages/bash";
import shell from "highlight.js/lib/languages/shell";
import json from "highlight.js/lib/languages/json";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import rust from "highlight.js/lib/languages/rust";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import sql from "highlight.js/lib/languages/sql";
import xml from "highlight.js/lib/languages/xml";
import css from "highlight.js/lib/languages/css";
import yaml from "highlight.js/lib/languages/yaml";
import diff from "highlight.js/lib/languages/diff";
import markdownLang from "highlight.js/lib/languages/markdown";

for (const [name, lang] of Object.entries({ python, javascript, typescript, bash, shell, json, c, cpp, rust, go,
  java, sql, xml, css, yaml, diff, markdown: markdownLang })) hljs.registerLanguage(name, lang);

function highlight(code, lang) {
  const name = (lang || "").trim().toLowerCase();
  if (name && hljs.getLanguage(name)) {
    try { return hljs.highlight(code, { language: name, ignoreIllegals: true }).value; } catch { /* plain */ }
  }
  return ""; // markdown-it escapes it itself
}

// Images become plain links ("image: alt"): an <img> from model output would be fetched at once
// (a way to leak the page's text to another site); a link is only followed when clicked.
function markdownIt(options) {
  const md = new MarkdownIt({ html: false, linkify: false, breaks: false, ...options });
  const escape = md.utils.escapeHtml;
  md.renderer.rules.image = (tokens, idx, opts, env, self) => {
    const token = tokens[idx];
    const alt = self.renderInlineAsText(token.children || [], opts, env) || "image";
    return `<a href="${escape(token.attrGet("src") || "")}">image: ${escape(alt)}</a>`;
  };
  return md;
}

const plain = markdownIt({});
const highlighted = markdownIt({ highlight });

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

// Sanitized fragment for `text`. `highlightCode` is off while a run streams (cheaper).
export function renderMarkdown(text, { highlightCode = true } = {}) {
  const html = (highlightCode ? highlighted : plain).render(text);
  // No raw images or embeds either, whatever produced them.
  return DOMPurify.sanitize(html, { RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["style", "form", "input", "button", "img", "svg", "math", "iframe", "object", "embed"] });
}

// Plain text -> clipboard; true when it worked (the async API, else the old textarea trick).
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    area.remove();
    return ok;
  }
}

function flash(button, text) {
  const before = button.textContent;
  button.textContent = text;
  setTimeout(() => { button.textContent = before; }, 1200);
}

// A Copy button (and "Apply to editor" when onApply is given) above every code block.
export function decorateCodeBlocks(container, { onApply = null } = {}) {
  for (const pre of container.querySelectorAll("pre")) {
    if (pre.parentElement?.classList.contains("code-block")) continue;
    const code = pre.querySelector("code") || pre;
    const source = () => code.textContent.replace(/\n$/, "");
    const lang = [...code.classList].find((c) => c.startsWith("language-"))?.slice(9) || "";
    const box = document.createElement("div");
    box.className = "code-block";
    const bar = document.createElement("div");
    bar.className = "code-bar";
    const label = document.createElement("span");
    label.className = "code-lang";
    label.textContent = lang;
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "small copy-code";
    copy.textContent = "Copy";
    copy.addEventListener("click", async () => flash(copy, (await copyText(source())) ? "Copied" : "Copy failed"));
    bar.append(label, copy);
    if (onApply) {
      const apply = document.createElement("button");
      apply.type = "button";
      apply.className = "small apply-code";
      apply.textContent = "Apply to editor";
      apply.title = "Replace the editor's code with this block (Ctrl/Cmd-Z undoes it)";
      apply.addEventListener("click", () => { onApply(source()); flash(apply, "Applied"); });
      bar.append(apply);
    }
    pre.replaceWith(box);
    box.append(bar, pre);
  }
}
