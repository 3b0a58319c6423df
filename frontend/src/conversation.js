// An instruct conversation above the streaming answer: the system prompt, the earlier turns
// and the question being answered. Each turn is rendered as sanitised Markdown
// (markdown.js); assistant code blocks get Copy / Apply to editor like the live answer.

import { decorateCodeBlocks, renderMarkdown } from "./markdown.js";

const LABELS = { system: "System", user: "You", assistant: "Model" };

function turnEl(role, content, onApply) {
  const box = document.createElement("div");
  box.className = `turn ${role}`;
  const label = document.createElement("div");
  label.className = "turn-role";
  label.textContent = LABELS[role] || role;
  const body = document.createElement("div");
  body.className = "md";
  body.append(renderMarkdown(content));
  if (role === "assistant") decorateCodeBlocks(body, { onApply });
  box.append(label, body);
  return box;
}

// Fill `container` with the conversation; empty (and hidden) when there is nothing to show.
export function showConversation(container, { system = "", turns = [], question = "" } = {}, { onApply = null } = {}) {
  const items = [];
  if (system.trim()) items.push(turnEl("system", system, null));
  for (const t of turns) items.push(turnEl(t.role, t.content, onApply));
  if (question) items.push(turnEl("user", question, null));
  container.replaceChildren(...items);
  container.hidden = !items.length;
  if (items.length) {
    const label = document.createElement("div");
    label.className = "turn-role answer-role";
    label.textContent = LABELS.assistant;
    container.append(label);
  }
}
