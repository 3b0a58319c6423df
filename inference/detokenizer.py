"""Streaming detokenization: token ids in, text deltas out, one token at a time.

Decoding tokens one by one and concatenating is wrong: a byte-level BPE token may hold half
of a UTF-8 character (emoji, CJK), and some decoders treat a token's leading space
differently at the start of a string. So, as vLLM and TGI do, we keep two offsets into the
generated ids:

    ids:  ... [prefix_offset ......... read_offset) [read_offset ... end)
               already emitted, decoded as context     not yet emitted

Each push decodes `ids[prefix_offset:read_offset]` and `ids[prefix_offset:]`; the new text is
the second minus the first. While that ends in U+FFFD (an incomplete character) nothing is
emitted; the window just grows. Joining all deltas plus `flush()` gives exactly
`tok.decode(all_ids, skip_special_tokens)` for concatenative decoders (byte-level BPE:
Qwen, Llama-3), with each decode touching only a few tokens.

Not here: stop strings (`inference.stops`) or stop token ids (the engine).
"""

from __future__ import annotations

from .tokenizer import Tokenizer

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, tok: Tokenizer, skip_special_tokens: bool = True):
        self.tok = tok
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = []
        self.prefix_offset = 0  # start of the context window (text already emitted)
        self.read_offset = 0    # first id whose text has not been emitted yet

    def _decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def _new_text(self) -> tuple[str, str]:
        prefix = self._decode(self.ids[self.prefix_offset:self.read_offset])
        return prefix, self._decode(self.ids[self.prefix_offset:])

    def push(self, ids: list[int]) -> str:
        """Text that the new ids complete; "" while a character is still incomplete."""
        self.ids.extend(ids)
        prefix, full = self._new_text()
        if len(full) <= len(prefix) or full.endswith(REPLACEMENT):
            return ""
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return full[len(prefix):]

    def flush(self) -> str:
        """Whatever is held back at the end (an incomplete character decodes as U+FFFD)."""
        prefix, full = self._new_text()
        self.prefix_offset = self.read_offset = len(self.ids)
        return full[len(prefix):]
