"""Specs for inference.detokenizer.IncrementalDetokenizer: streamed text equals the full decode."""

import json
import random

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, normalizers, trainers

from inference.detokenizer import IncrementalDetokenizer
from inference.tokenizer import Tokenizer

TEXTS = {
    "emoji": "ok 🤗🚀👍🏽 done",
    "cjk": "你好，世界！漢字とかな、한국어",
    "mixed": "café naïve — “quotes” 🤗 中文 x=1",
    "code": "class A:\n    def f(self, x):\n        if x:\n            return  x  # two spaces\n\n\treturn None\n",
    "leading_spaces": "   three leading spaces and a trailing one ",
    "only_spaces": "     ",
    "newlines": "\n\n\nfoo\n \n  \n",
}


@pytest.fixture(scope="module")
def tok(qwen_tok_dir):
    return Tokenizer.from_dir(qwen_tok_dir)


def stream(tok, ids, skip_special_tokens=True, chunk=1):
    detok = IncrementalDetokenizer(tok, skip_special_tokens=skip_special_tokens)
    deltas = [detok.push(ids[i:i + chunk]) for i in range(0, len(ids), chunk)]
    return deltas, detok.flush()


@pytest.mark.parametrize("name", TEXTS)
def test_one_token_at_a_time_reproduces_the_text(tok, name):
    text = TEXTS[name]
    ids = tok.encode(text)
    deltas, tail = stream(tok, ids)
    assert "".join(deltas) + tail == text == tok.decode(ids)
    assert tail == ""
    assert not any("\ufffd" in d for d in deltas)  # never half a character


def test_a_split_emoji_is_held_back_until_complete(tok):
    ids = tok.encode("🤗")
    assert len(ids) > 1  # byte-level BPE: the emoji's 4 bytes span several tokens
    deltas, _ = stream(tok, ids)
    assert deltas[:-1] == [""] * (len(ids) - 1) and deltas[-1] == "🤗"


def test_several_ids_per_push(tok):
    ids = tok.encode(TEXTS["mixed"] + TEXTS["code"])
    for chunk in (2, 3, 7):
        deltas, tail = stream(tok, ids, chunk=chunk)
        assert "".join(deltas) + tail == tok.decode(ids)


def test_special_tokens_are_skipped_or_kept_like_decode(tok):
    ids = tok.encode("<|im_start|>assistant\nhi 🤗<|im_end|>\n")
    for skip in (True, False):
        deltas, tail = stream(tok, ids, skip_special_tokens=skip)
        assert "".join(deltas) + tail == tok.decode(ids, skip_special_tokens=skip)
    assert "<|im_end|>" not in "".join(stream(tok, ids)[0])


def test_random_ids_stream_like_decode_including_filler_and_broken_bytes(tok):
    # A random-weight model samples any id: filler, specials, lone UTF-8 bytes.
    rng = random.Random(0)
    byte_tokens = [tok.token_id(c) for c in ("ð", "Ł", "¤", "Ĺ", "Ģ")]  # byte-level chars for 0xF0 0x9F ...
    for trial in range(20):
        ids = [rng.choice(byte_tokens) if rng.random() < 0.3 else rng.randrange(tok.vocab_size)
               for _ in range(200)]
        for skip in (True, False):
            deltas, tail = stream(tok, ids, skip_special_tokens=skip)
            assert "".join(deltas) + tail == tok.decode(ids, skip_special_tokens=skip), trial


def test_flush_releases_an_incomplete_character(tok):
    ids = tok.encode("a🤗")[:-1]  # cut inside the emoji
    deltas, tail = stream(tok, ids)
    assert "".join(deltas) == "a" and tail == "\ufffd" and "".join(deltas) + tail == tok.decode(ids)


def test_nothing_pushed_flushes_empty(tok):
    assert IncrementalDetokenizer(tok).flush() == ""


def test_ids_beyond_the_tokenizer_decode_to_nothing(tok):
    # Real checkpoints pad the embedding past the tokenizer (Qwen: 151,665 tokens, 151,936 rows).
    ids = tok.encode("ab") + [tok.vocab_size + 5] + tok.encode("cd")
    deltas, tail = stream(tok, ids)
    assert "".join(deltas) + tail == "abcd" == tok.decode(ids)


def write_sentencepiece_style(d):
    """A Llama-2 / CodeLlama style tokenizer: "▁" for spaces, <0xNN> byte fallback, and a
    decoder that strips the first leading space (decoding a window changes its first token)."""
    corpus = ["def hello_world():\n    print('hello world')\n", "the quick brown fox jumps over the lazy dog"] * 50
    t = HFTokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, show_progress=False))
    js = json.loads(t.to_str())
    base = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    vocab = {tok: i for i, tok in enumerate(base)}
    for tok, _ in sorted(js["model"]["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(tok, len(vocab))
    js["model"]["vocab"] = vocab
    js["added_tokens"] = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": True} for i, c in enumerate(base[:3])]
    js["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    js["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    (d / "tokenizer.json").write_text(json.dumps(js))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))


def test_sentencepiece_style_decoders_keep_every_space(tmp_path):
    write_sentencepiece_style(tmp_path)
    tok = Tokenizer.from_dir(tmp_path)
    for name, text in TEXTS.items():
        ids = tok.encode(text)
        assert ids[0] == tok.bos_token_id
        deltas, tail = stream(tok, ids)
        assert "".join(deltas) + tail == tok.decode(ids, skip_special_tokens=True), name
        assert not any("\ufffd" in d for d in deltas), name
    deltas, _ = stream(tok, tok.encode("x  y"))
    assert "".join(deltas) == "x  y"
