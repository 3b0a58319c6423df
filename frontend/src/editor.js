// CodeMirror 6 editor factory: Python highlighting, dark theme, triple quotes that type
// straight through, Ctrl/Cmd-Enter and change hooks. Only builds editors; what Run does
// lives in main.js.

import { EditorView, basicSetup } from "codemirror";
import { python } from "@codemirror/lang-python";
import { oneDark } from "@codemirror/theme-one-dark";
import { EditorState, Prec } from "@codemirror/state";
import { keymap } from "@codemirror/view";
import { tripleQuoteOvertype } from "./quotes.js";

const sizing = EditorView.theme({
  "&": { height: "100%", fontSize: "14px" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.55" },
  "&.cm-focused": { outline: "none" },
});

export function createEditor(parent, { doc = "", cursor = null, readOnly = false, onRun = null, onChange = null } = {}) {
  const extensions = [basicSetup, python(), oneDark, sizing, tripleQuoteOvertype];
  if (readOnly) extensions.push(EditorState.readOnly.of(true), EditorView.editable.of(false));
  if (onRun) {
    extensions.push(Prec.highest(keymap.of([{ key: "Mod-Enter", run: () => { onRun(); return true; } }])));
  }
  if (onChange) extensions.push(EditorView.updateListener.of((u) => { if (u.docChanged) onChange(); }));
  const selection = cursor !== null && cursor >= 0 && cursor <= doc.length ? { anchor: cursor } : undefined;
  return new EditorView({ parent, state: EditorState.create({ doc, selection, extensions }) });
}

// Replace the whole document as one undoable change.
export function replaceDoc(view, text) {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text }, selection: { anchor: text.length },
    userEvent: "input.paste", scrollIntoView: true });
  view.focus();
}
