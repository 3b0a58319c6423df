// Build the browser bundle: `npm ci && npm run build` (in frontend/).
// Writes ../static/playground/app.js (CodeMirror, markdown-it, highlight.js, DOMPurify and
// our code, minified) and copies htmx.min.js and highlight.js's One Dark theme next to it. Both outputs are committed so the page works offline and
// nobody needs Node to run the playground.
import { build } from "esbuild";
import { copyFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(here, "../static/playground");

await build({
  entryPoints: [resolve(here, "src/main.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outfile: resolve(out, "app.js"),
  legalComments: "none",
  logLevel: "info",
});
copyFileSync(resolve(here, "node_modules/htmx.org/dist/htmx.min.js"), resolve(out, "htmx.min.js"));
copyFileSync(resolve(here, "node_modules/highlight.js/styles/atom-one-dark.min.css"), resolve(out, "highlight.min.css"));
