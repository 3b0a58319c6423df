"""The checkpoint's tokenizer: `tokenizer.json` via the `tokenizers` library, plus the bits of
`tokenizer_config.json` the engine needs (EOS/BOS tokens, chat template, extra added tokens).

Encoding follows the tokenizer's own pipeline (normalizer, pre-tokenizer, BPE, post-processor):
Llama-3's post-processor adds BOS, Qwen's adds nothing; we never add special tokens by hand.
Decoding is the tokenizer's decoder only: no `clean_up_tokenization_spaces` (it rewrites code,
e.g. "x ." -> "x.", and would break incremental decoding), matching what streaming servers do.

Not here: chat rendering and FIM layout (`inference.prompts`), streaming decode
(`inference.detokenizer`). transformers is never imported at runtime.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import AddedToken
from tokenizers import Tokenizer as _HFTokenizer

from .config import read_json_object
from .errors import CheckpointError

# Fill-in-the-middle token spellings we recognise (prefix, suffix, middle): Qwen2.5-Coder's, StarCoder's.
FIM_SPELLINGS = (("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"), ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"))


def _token_str(value) -> str | None:
    """tokenizer_config.json spells special tokens as "text" or {"content": "text", ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _pick_template(value, path: Path) -> str | None:
    """A chat template is a string, or a list of {"name", "template"} (we take "default")."""
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        chosen = named.get("default") or next(iter(named.values()), None)
        if isinstance(chosen, str) and chosen:
            return chosen
    raise CheckpointError(f"{path}: chat_template must be a string or a list of {{name, template}}")


class Tokenizer:
    """Encode/decode with a Hugging Face fast tokenizer; see module docstring for what it adds."""

    def __init__(self, tok: _HFTokenizer, config: dict | None = None, chat_template: str | None = None,
                 source: str = "<memory>"):
        config = config or {}
        self._tok = tok
        self.source = source
        # Added tokens listed only in tokenizer_config.json (old checkpoints): register them so
        # they encode as single ids, the way transformers does on load.
        for id_str, spec in (config.get("added_tokens_decoder") or {}).items():
            content = _token_str(spec)
            if content and tok.token_to_id(content) is None:
                token = AddedToken(content, single_word=bool(spec.get("single_word")),
                                   lstrip=bool(spec.get("lstrip")), rstrip=bool(spec.get("rstrip")),
                                   normalized=bool(spec.get("normalized", False)),
                                   special=bool(spec.get("special", True)))
                if token.special:
                    tok.add_special_tokens([token])
                else:
                    tok.add_tokens([token])

        self.bos_token = _token_str(config.get("bos_token"))
        self.eos_token = _token_str(config.get("eos_token"))
        self.pad_token = _token_str(config.get("pad_token"))
        self.unk_token = _token_str(config.get("unk_token"))
        self.bos_token_id = self.token_id(self.bos_token) if self.bos_token else None
        eos_id = self.token_id(self.eos_token) if self.eos_token else None
        self.eos_token_ids: tuple[int, ...] = () if eos_id is None else (eos_id,)
        self.chat_template = chat_template
        # Ids are usually contiguous, but a file may leave gaps; size by the largest id.
        added = tok.get_added_tokens_decoder()
        self.vocab_size: int = max(tok.get_vocab_size(with_added_tokens=True), max(added, default=-1) + 1)
        self._special_ids = frozenset(i for i, t in added.items() if t.special)
        # (prefix, suffix, middle) token strings, or None when the model cannot fill in the middle.
        self.fim_tokens: tuple[str, str, str] | None = next(
            (s for s in FIM_SPELLINGS if all(tok.token_to_id(t) is not None for t in s)), None)

    @classmethod
    def from_dir(cls, model_dir) -> "Tokenizer":
        """Load tokenizer.json (required) and tokenizer_config.json / chat_template.jinja (optional)."""
        path = Path(model_dir)
        tj = path / "tokenizer.json"
        if not tj.is_file():
            raise CheckpointError(f"{path}: no tokenizer.json (the fast-tokenizer file is required)")
        try:
            tok = _HFTokenizer.from_file(str(tj))
        except Exception as e:  # tokenizers raises a bare Exception with serde's message
            raise CheckpointError(f"{tj}: cannot be loaded as a tokenizer ({str(e).strip()[:200]})") from None
        cfg_path = path / "tokenizer_config.json"
        config = read_json_object(cfg_path) if cfg_path.is_file() else {}
        # transformers >= 4.43 may save the template next to the config; that file wins, as there.
        jinja = path / "chat_template.jinja"
        if jinja.is_file():
            template = jinja.read_text(encoding="utf-8") or None
        else:
            template = _pick_template(config.get("chat_template"), cfg_path)
            ct_json = path / "chat_template.json"
            if template is None and ct_json.is_file():
                template = _pick_template(read_json_object(ct_json).get("chat_template"), ct_json)
        return cls(tok, config, template, source=str(path))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; special-token text (e.g. "<|im_end|>") always becomes its single id."""
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_ids

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer({self.source!r}, vocab_size={self.vocab_size})"
