// CodeMirror 6 editor factory: Python highlighting, dark theme, Ctrl/Cmd-Enter hook.
// Only builds editors; what Run does lives in main.js.

import { EditorView, basicSetup } from "codemirror";
import { python } from "@codemirror/lang-python";
import { oneDark } from "@codemirror/theme-one-dark";
import { EditorState, Prec } from "@codemirror/state";
import { keymap } from "@codemirror/view";

const sizing = EditorView.theme({
  "&": { height: "100%", fontSize: "14px" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.55" },
  "&.cm-focused": { outline: "none" },
});

export function createEditor(parent, { doc = "", cursor = null, readOnly = false, onRun = null } = {}) {
  const extensions = [basicSetup, python(), oneDark, sizing];
  if (readOnly) extensions.push(EditorState.readOnly.of(true), EditorView.editable.of(false));
  if (onRun) {
    extensions.push(Prec.highest(keymap.of([{ key: "Mod-Enter", run: () => { onRun(); return true; } }])));
  }
  const selection = cursor !== null && cursor >= 0 && cursor <= doc.length ? { anchor: cursor } : undefined;
  return new EditorView({ parent, state: EditorState.create({ doc, selection, extensions }) });
}
