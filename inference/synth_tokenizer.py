"""Write a real Qwen2-style byte-level BPE tokenizer for synthetic test checkpoints.

No machine here can download a tokenizer, so tests and random-weight checkpoints use one we
train ourselves: `write_tokenizer(out_dir, vocab_size)` writes `tokenizer.json` and
`tokenizer_config.json` in the Hugging Face layout (loads with `AutoTokenizer.from_pretrained`
and with `inference.tokenizer.Tokenizer.from_dir`).

Layout of the ids, as in Qwen's files (special tokens after all ordinary ones):

    [0, bpe)                 byte-level BPE trained on Python stdlib source (at most 16,384 tokens)
    [bpe, V - n_special)     filler: concatenations of two BPE tokens, picked by `seed`
    [V - n_special, V)       <|endoftext|>, <|im_start|>, <|im_end|>, FIM tokens, ... (special)

The specials must come last and the ordinary ids must be contiguous: transformers 5's
Qwen2Tokenizer rebuilds the BPE from the vocab and appends the special tokens after it.

The filler tokens sit in the BPE vocabulary with no merge that builds them, so encoding never
produces them, but every id in [0, V) decodes to text: a random-weight model may sample any id.
Training is deterministic and runs once per process (~0.7-0.9 s on 2 cores; smaller
vocabularies are prefixes of it); after that, vocab 151,936 writes in ~0.3-0.4 s and loads in
~0.3 s. The corpus is the sorted stdlib of the running Python, so two machines with different
Pythons may build different (each self-consistent) tokenizers.

Not here: Llama-3's tiktoken-derived merges or Qwen's real vocabulary; the engine never
depends on which BPE it gets, only on the Hugging Face file format.
"""

from __future__ import annotations

import functools
import json
import random
import sysconfig
from pathlib import Path

# Qwen2 / Qwen2.5 pre-tokenizer split (same regex transformers' Qwen2Tokenizer rebuilds).
PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                     r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

CHAT_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
FIM_TOKENS = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
              "<|repo_name|>", "<|file_sep|>")
BOS_TOKEN = "<|begin_of_text|>"  # only with add_bos=True (Llama-3 style)

MAX_BPE = 16384            # learned tokens (incl. the 256 byte symbols); bigger vocabularies get filler
CORPUS_CHARS = 2_000_000   # ~0.7 s of BpeTrainer on 2 cores

# Qwen2.5 Instruct's ChatML template (tools branch included, so `tojson` is exercised).
QWEN_CHAT_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, "
    "\\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)


def _corpus() -> list[str]:
    """A deterministic ~2 MB slice of the stdlib's top-level .py files, in sorted order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(root.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        total += len(text)
        if total >= CORPUS_CHARS:
            break
    if total < 10_000:
        raise RuntimeError(f"too little Python source under {root} to train a tokenizer")
    return texts


@functools.lru_cache(maxsize=1)
def _train_bpe() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Train byte-level BPE to MAX_BPE tokens once per process.

    Returns (tokens in id order, merges in rank order): ids 0..255 are the byte symbols and
    token 256 + k is merge k. Greedy BPE training is prefix-stable (training to N tokens gives
    the first N tokens and N - 256 merges of a longer run; tested), so every smaller vocabulary
    is a truncation of this one.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=MAX_BPE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = tuple(t for t, _ in vocab)
    merges = tuple(tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"])
    # The layout the truncation relies on: 256 byte symbols, then one token per merge.
    assert [i for _, i in vocab] == list(range(len(vocab))) and len(tokens) == 256 + len(merges)
    assert all(tokens[256 + k] == a + b for k, (a, b) in enumerate(merges))
    return tokens, merges


def _bpe(size: int) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The first `size` tokens of the trained BPE and the merges that build them."""
    tokens, merges = _train_bpe()
    size = min(size, len(tokens))
    return tokens[:size], merges[:size - 256]


def _filler(tokens: tuple[str, ...], taken: set[str], n: int, seed: int) -> list[str]:
    """`n` new distinct tokens, each the concatenation of two learned tokens (decodable text)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen = set(taken)
    while len(out) < n:
        s = rng.choice(tokens) + rng.choice(tokens)
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _added(content: str, id_: int) -> dict:
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def write_tokenizer(out_dir, vocab_size: int, seed: int = 0, *, fim: bool = True,
                    chat_template: bool = True, add_bos: bool = False) -> dict:
    """Write tokenizer.json + tokenizer_config.json for a model with `vocab_size` embedding rows.

    fim=False leaves out the FIM / repo tokens (for "this model has no FIM tokens" tests),
    chat_template=False leaves out the template, add_bos=True adds a Llama-3 style BOS token
    that the post-processor prepends to every encode(add_special_tokens=True).
    Returns {"vocab_size", "bpe_size", "special_tokens": {content: id}, "bos_token_id",
    "eos_token_id", "eos_token_ids", "pad_token_id"}.
    """
    specials = list(CHAT_TOKENS) + (list(FIM_TOKENS) if fim else []) + ([BOS_TOKEN] if add_bos else [])
    if vocab_size < 256 + len(specials) + 16:
        raise ValueError(f"vocab_size {vocab_size} is too small for a byte-level BPE "
                         f"(need at least {256 + len(specials) + 16})")
    tokens, merges = _bpe(vocab_size - len(specials))
    bpe = len(tokens)
    n_ordinary = vocab_size - len(specials)
    special_ids = {s: n_ordinary + i for i, s in enumerate(specials)}
    filler = _filler(tokens, set(tokens), n_ordinary - bpe, seed)
    vocab = {t: i for i, t in enumerate(tokens)}
    vocab.update((t, bpe + i) for i, t in enumerate(filler))

    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    post = byte_level
    if add_bos:
        bos_id = special_ids[BOS_TOKEN]
        post = {"type": "Sequence", "processors": [byte_level, {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": BOS_TOKEN, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": BOS_TOKEN, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": BOS_TOKEN, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {BOS_TOKEN: {"id": BOS_TOKEN, "ids": [bos_id], "tokens": [BOS_TOKEN]}},
        }]}
    tokenizer_json = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added(s, i) for s, i in special_ids.items()],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PRETOKENIZE_REGEX}, "behavior": "Isolated", "invert": False},
            byte_level,
        ]},
        "post_processor": post,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [list(m) for m in merges]},
    }

    eos = "<|im_end|>"  # Qwen2.5 Instruct: generation ends at <|im_end|> (and <|endoftext|>)
    config = {
        "add_bos_token": add_bos,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(i): {k: v for k, v in _added(s, i).items() if k != "id"}
                                 for s, i in special_ids.items()},
        "additional_special_tokens": [s for s in specials if s not in ("<|endoftext|>", BOS_TOKEN)],
        "bos_token": BOS_TOKEN if add_bos else None,
        "clean_up_tokenization_spaces": False,
        "eos_token": eos,
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer" if not add_bos else "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    if chat_template:
        config["chat_template"] = QWEN_CHAT_TEMPLATE

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n",
                                               encoding="utf-8")
    return {
        "vocab_size": vocab_size,
        "bpe_size": bpe,
        "special_tokens": dict(special_ids),
        "bos_token_id": special_ids[BOS_TOKEN] if add_bos else None,
        "eos_token_id": special_ids[eos],
        "eos_token_ids": [special_ids[eos], special_ids["<|endoftext|>"]],
        "pad_token_id": special_ids["<|endoftext|>"],
    }
