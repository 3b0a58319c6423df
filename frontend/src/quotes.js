// Python triple quotes that type straight through.
//
// CodeMirror's closeBrackets turns `"""` into `"""|"""`, and when the cursor reaches the
// closing quotes one typed `"` jumps over all three; the user's next two `"` then open a
// new string, so typing `x = """doc"""` key by key gave `x = """doc"""""`. This input
// handler runs first: a quote typed in front of the closing quotes of a triple-quoted
// string steps over exactly one quote, as in VS Code, so typing the docstring out in full
// gives what was typed. Everything else is left to closeBrackets.

import { syntaxTree } from "@codemirror/language";
import { EditorView } from "@codemirror/view";
import { Prec } from "@codemirror/state";

const STRING_NODES = new Set(["String", "FormatString"]);

// The triple-quoted string node whose closing quotes (of `quote`) start at or before pos
// and run through pos, or null.
function closingTriple(state, pos, quote) {
  const triple = quote.repeat(3);
  for (let node = syntaxTree(state).resolveInner(pos, 1); node; node = node.parent) {
    if (!STRING_NODES.has(node.name)) continue;
    const text = state.sliceDoc(node.from, node.to);
    const open = text.indexOf(triple);
    if (open < 0 || open > 2 || !text.endsWith(triple) || text.length < open + 6) return null;
    const closeFrom = node.to - 3;
    if (pos < closeFrom || pos >= node.to || pos < node.from + open + 3) return null;
    return node;
  }
  return null;
}

export const tripleQuoteOvertype = Prec.high(EditorView.inputHandler.of((view, from, to, text) => {
  if ((text !== '"' && text !== "'") || from !== to || view.composing) return false;
  const { state } = view;
  if (state.selection.ranges.length !== 1 || state.selection.main.head !== from) return false;
  if (state.sliceDoc(from, from + 1) !== text || !closingTriple(state, from, text)) return false;
  view.dispatch({ selection: { anchor: from + 1 }, scrollIntoView: true, userEvent: "input.type" });
  return true;
}));
