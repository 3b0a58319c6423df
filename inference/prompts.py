"""Prompts: what the user asked for (`Prompt`) and how it becomes token ids (`build_prompt_ids`).

Four modes, each tokenized the way Hugging Face does it for the same checkpoint:
- completion: `tok(text)`: the tokenizer's own post-processor decides on BOS.
- ids:        raw token ids, checked against the tokenizer's vocabulary.
- chat:       the checkpoint's chat template rendered with `apply_chat_template` semantics
              (`render_chat`), then encoded with add_special_tokens=False, as transformers does.
- fim:        prefix-suffix-middle with the model's FIM tokens (`Tokenizer.fim_tokens`), e.g.
              Qwen2.5-Coder's `<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>`.
Every problem is a PromptError with a message meant for the user.

Not here: context-length checks (the engine knows the model's limit), tool calling and
`continue_final_message`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from .errors import PromptError
from .tokenizer import Tokenizer

MODES = ("completion", "ids", "chat", "fim")
FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE = "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"


@dataclass(frozen=True)
class Prompt:
    """A request's prompt, independent of the model; build it with the static constructors."""

    mode: str
    text: str = ""
    ids: tuple[int, ...] = ()
    messages: tuple[dict, ...] = ()
    prefix: str = ""
    suffix: str = ""

    def __post_init__(self):
        if self.mode not in MODES:
            raise PromptError(f"unknown prompt mode {self.mode!r} (use one of {', '.join(MODES)})")
        if self.mode == "completion" and not self.text:
            raise PromptError("the prompt is empty")
        if self.mode == "ids" and not self.ids:
            raise PromptError("the prompt has no token ids")
        if self.mode == "chat" and not self.messages:
            raise PromptError("the chat has no messages")
        if self.mode == "fim" and not (self.prefix or self.suffix):
            raise PromptError("fill-in-the-middle needs a prefix or a suffix (both are empty)")

    @staticmethod
    def completion(text: str) -> "Prompt":
        if not isinstance(text, str):
            raise PromptError(f"a completion prompt must be text, got {type(text).__name__}")
        return Prompt("completion", text=text)

    @staticmethod
    def from_ids(ids: Sequence[int]) -> "Prompt":
        ids = tuple(ids)
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                raise PromptError(f"token ids must be non-negative integers, got {i!r}")
        return Prompt("ids", ids=ids)

    @staticmethod
    def chat(text_or_messages: str | Sequence[dict], system: str | None = None) -> "Prompt":
        """One user message (a string) or a list of {"role", "content"} dicts; `system` goes first."""
        if isinstance(text_or_messages, str):
            if not text_or_messages:
                raise PromptError("the chat message is empty")
            messages = [{"role": "user", "content": text_or_messages}]
        else:
            messages = []
            for n, m in enumerate(text_or_messages):
                if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(
                        m.get("content"), str):
                    raise PromptError(f"chat message {n} must be a dict with string 'role' and 'content'")
                messages.append(dict(m))
        if system is not None:
            if messages and messages[0]["role"] == "system":
                raise PromptError("the chat already starts with a system message; do not pass system= too")
            messages.insert(0, {"role": "system", "content": system})
        return Prompt("chat", messages=tuple(messages))

    @staticmethod
    def fim(prefix: str, suffix: str | None = "") -> "Prompt":
        return Prompt("fim", prefix=prefix or "", suffix=suffix or "")


def build_prompt_ids(prompt: Prompt, tok: Tokenizer) -> list[int]:
    """Token ids for `prompt` under `tok`; PromptError (never an empty list) when it cannot be built."""
    if prompt.mode == "completion":
        ids = tok.encode(prompt.text, add_special_tokens=True)
    elif prompt.mode == "ids":
        bad = [i for i in prompt.ids if i >= tok.vocab_size]
        if bad:
            raise PromptError(f"token id {bad[0]} is out of range: the vocabulary has {tok.vocab_size} tokens "
                              f"(ids 0..{tok.vocab_size - 1})")
        ids = list(prompt.ids)
    elif prompt.mode == "chat":
        ids = tok.encode(render_chat(tok, prompt.messages, add_generation_prompt=True), add_special_tokens=False)
    else:
        ids = _fim_ids(prompt, tok)
    if not ids:
        raise PromptError("the prompt is empty after tokenization")
    return ids


def _fim_ids(prompt: Prompt, tok: Tokenizer) -> list[int]:
    if tok.fim_tokens is None:
        raise PromptError("this model has no fill-in-the-middle tokens (<|fim_prefix|>, <|fim_suffix|>, "
                          "<|fim_middle|>); use a completion or chat prompt instead")
    # Exactly `tok(f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>")`, as users of
    # transformers write it (post-processor included)...
    pre, suf, mid = tok.fim_tokens
    special = [tok.token_id(t) for t in tok.fim_tokens]
    ids = tok.encode(f"{pre}{prompt.prefix}{suf}{prompt.suffix}{mid}")
    if all(s in ids for s in special):
        return ids
    # ...unless the FIM strings are plain vocabulary entries rather than added tokens: place the ids.
    p, s, m = special
    return [p, *tok.encode(prompt.prefix, False), s, *tok.encode(prompt.suffix, False), m]


def render_chat(tok: Tokenizer, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
    """The chat template rendered exactly as transformers' `apply_chat_template(tokenize=False)`."""
    if not tok.chat_template:
        raise PromptError("this model has no chat template (tokenizer_config.json has no chat_template); "
                          "use a completion prompt instead")
    import jinja2

    # transformers passes the special-token strings that are set; unset ones stay undefined ("").
    specials = {k: v for k, v in (("bos_token", tok.bos_token), ("eos_token", tok.eos_token),
                                  ("unk_token", tok.unk_token), ("pad_token", tok.pad_token)) if v}
    try:
        template = _compile(tok.chat_template)
        return template.render(messages=[dict(m) for m in messages], tools=None, documents=None,
                               add_generation_prompt=add_generation_prompt, **specials)
    except jinja2.TemplateError as e:
        raise PromptError(f"the chat template rejected these messages: {e}") from None


@functools.lru_cache(maxsize=16)
def _compile(template: str):
    """Compile a chat template in the same sandboxed environment transformers uses."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(Extension):
        # transformers' AssistantTracker: `{% generation %}...{% endgeneration %}` renders its body.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # Like transformers: no HTML escaping (jinja's built-in would turn '<' into '\u003c').
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise PromptError(f"the model's chat template is not valid Jinja: {e}") from None
