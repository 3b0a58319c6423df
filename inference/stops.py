"""Stop strings on a text stream: cut the output right before the first stop string.

Text arrives in deltas (one per token, from the detokenizer), and a stop string may span
several of them ("\\n\\n" arriving as "\\n" + "\\n", or "</code>" in four pieces). So we emit
text only once it can no longer be the start of a stop string: the longest suffix of the
pending text that is a prefix of some stop string is held back. On a hit we return the text
before the earliest occurrence of any stop string and never the stop string itself.

Not here: stop token ids (EOS), which the engine checks on ids before detokenizing.
"""

from __future__ import annotations

from typing import Sequence


class StopStrings:
    def __init__(self, stops: Sequence[str]):
        self.stops = tuple(dict.fromkeys(s for s in stops if s))  # empty strings would match everywhere
        self.pending = ""  # text received but not yet emitted (a possible stop-string start)
        self.hit = False

    def push(self, delta: str) -> tuple[str, bool]:
        """(text safe to emit now, whether a stop string was hit). After a hit: ("", True)."""
        if self.hit:
            return "", True
        if not self.stops:
            return delta, False
        text = self.pending + delta
        found = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if found:
            self.hit, self.pending = True, ""
            return text[:min(found)], True
        keep = self._held_back(text)
        self.pending = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep], False

    def _held_back(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        best = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:n]):
                    best = n
                    break
        return best

    def flush(self) -> str:
        """The held-back tail, when generation ends without hitting a stop string."""
        text, self.pending = self.pending, ""
        return "" if self.hit else text
