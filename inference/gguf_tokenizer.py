"""A GGUF file's tokenizer, rebuilt with the `tokenizers` library from `tokenizer.ggml.*`.

GPT-2-style byte-level BPE (`tokenizer.ggml.model == "gpt2"`): vocabulary from `tokens`, merge
rules from `merges`, control tokens (token_type 3) as special added tokens and user-defined
ones (4) as plain added tokens, so "<|im_end|>" encodes as one id as in the original
tokenizer.json. The pre-tokenizer follows llama.cpp's `tokenizer.ggml.pre` (the regex family
the original tokenizer used); BOS is prepended when `add_bos_token` says so; the chat template
is `tokenizer.chat_template`; FIM tokens come from `tokenizer.ggml.fim_{pre,suf,mid}_token_id`
(or the older prefix/suffix/middle keys) or from known spellings in the vocabulary.
Other tokenizer models (SentencePiece "llama", ...) or pre-tokenizers: one CheckpointError.

Not here: encoding/decoding itself (`inference.tokenizer.Tokenizer` wraps the result).
"""

from __future__ import annotations

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as _HFTokenizer

from .errors import CheckpointError
from .tokenizer import Tokenizer

# llama.cpp's regexes (llama-vocab.cpp), as the original tokenizer.json files spell them.
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = ("default", "gpt2", "smollm", "starcoder", "refact", "llama-bpe", "llama3", "qwen2")
CONTROL, USER_DEFINED = 3, 4


def _pre_tokenizer(pre: str):
    """(normalizer, pre_tokenizer) for llama.cpp's pre-tokenizer name."""
    byte_level_regex = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    if pre in ("default", "gpt2"):
        return None, byte_level_regex
    if pre in ("smollm", "starcoder", "refact"):  # digits one by one, then GPT-2's regex
        return None, pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level_regex])
    if pre in ("llama-bpe", "llama3"):
        return None, pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(_LLAMA3), behavior="isolated", invert=False), byte_level])
    if pre == "qwen2":
        return normalizers.NFC(), pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(_QWEN2), behavior="isolated", invert=False), byte_level])
    raise CheckpointError(f"GGUF pre-tokenizer {pre!r} is not supported (supported: {', '.join(PRE_TOKENIZERS)})")


def _array(reader, key: str) -> list | None:
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def tokenizer_from_gguf(reader, meta: dict, source: str) -> Tokenizer:
    """The Tokenizer a GGUF file describes; `meta` holds its scalar metadata."""
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise CheckpointError(f"{source}: GGUF tokenizer model {model!r} is not supported (only byte-level BPE, 'gpt2')")
    tokens = _array(reader, "tokenizer.ggml.tokens")
    merges = _array(reader, "tokenizer.ggml.merges")
    if not tokens or merges is None:
        raise CheckpointError(f"{source}: GGUF metadata has no tokenizer.ggml.tokens / merges")
    types = _array(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    pairs = []
    for m in merges:
        a, sep, b = m.partition(" ")
        if not sep:
            raise CheckpointError(f"{source}: malformed merge rule {m!r} in tokenizer.ggml.merges")
        pairs.append((a, b))
    tok = _HFTokenizer(models.BPE(vocab, pairs, fuse_unk=False, byte_fallback=False))
    normalizer, pre = _pre_tokenizer(meta.get("tokenizer.ggml.pre") or "default")
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    special = [AddedToken(tokens[i], special=True, normalized=False) for i, ty in enumerate(types) if ty == CONTROL]
    plain = [AddedToken(tokens[i], special=False, normalized=False) for i, ty in enumerate(types) if ty == USER_DEFINED]
    if special:
        tok.add_special_tokens(special)
    if plain:
        tok.add_tokens(plain)

    def token(key: str) -> str | None:
        i = meta.get(f"tokenizer.ggml.{key}")
        return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

    bos = token("bos_token_id")
    if meta.get("tokenizer.ggml.add_bos_token") and bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, vocab[bos])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    config = {"bos_token": bos, "eos_token": token("eos_token_id"), "pad_token": token("padding_token_id"),
              "unk_token": token("unknown_token_id")}
    fim = tuple(token(k) for k in ("fim_pre_token_id", "fim_suf_token_id", "fim_mid_token_id"))
    if None in fim:
        fim = tuple(token(k) for k in ("prefix_token_id", "suffix_token_id", "middle_token_id"))
    out = Tokenizer(tok, config, meta.get("tokenizer.chat_template") or None, source=source)
    if None not in fim:
        out.fim_tokens = fim
    return out
