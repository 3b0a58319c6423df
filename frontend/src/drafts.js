// The editor's unsaved work in localStorage, so a reload (or a closed tab) loses nothing.
// One draft per browser profile: the code, the mode, the instruction and the system prompt.

const KEY = "playground.draft.v1";

export function loadDraft() {
  try {
    const draft = JSON.parse(localStorage.getItem(KEY) || "null");
    return draft && typeof draft.code === "string" ? draft : null;
  } catch {
    return null;
  }
}

// Returns save(draft): debounced, so typing writes at most every 300 ms.
export function draftSaver(delay = 300) {
  let timer = 0;
  let latest = null;
  const write = () => {
    timer = 0;
    try { localStorage.setItem(KEY, JSON.stringify({ ...latest, savedAt: Date.now() })); } catch { /* full or off */ }
  };
  window.addEventListener("pagehide", () => { if (timer) { clearTimeout(timer); write(); } });
  return (draft) => {
    latest = draft;
    if (!timer) timer = setTimeout(write, delay);
  };
}
