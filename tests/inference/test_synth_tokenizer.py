"""Specs for inference.synth_tokenizer: a real byte-level BPE in the Hugging Face file layout."""

import json
import time

import pytest
from tokenizers import Tokenizer as HFTokenizer

from inference.synth_tokenizer import FIM_TOKENS, write_tokenizer

CODE = "def fib(n):\n    if n < 2:\n        return n  # base case\n    return fib(n - 1) + fib(n - 2)\n"


def test_writes_both_files_with_special_ids_at_the_top(tmp_path):
    info = write_tokenizer(tmp_path, 2048)
    assert (tmp_path / "tokenizer.json").is_file() and (tmp_path / "tokenizer_config.json").is_file()
    ids = info["special_tokens"]
    assert list(ids.values()) == list(range(2048 - len(ids), 2048))
    assert info["eos_token_id"] == ids["<|im_end|>"]
    assert info["pad_token_id"] == ids["<|endoftext|>"]
    assert info["bos_token_id"] is None
    tok = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tok.get_vocab_size(with_added_tokens=True) == 2048
    for content, i in ids.items():
        assert tok.token_to_id(content) == i


def test_special_tokens_encode_as_single_ids(qwen_tok_dir):
    tok = HFTokenizer.from_file(str(qwen_tok_dir / "tokenizer.json"))
    for s in ("<|im_start|>", "<|im_end|>", *FIM_TOKENS):
        assert tok.encode(f"a{s}b").ids[1] == tok.token_to_id(s)


def test_every_id_decodes_including_filler_and_specials(qwen_tok_dir):
    tok = HFTokenizer.from_file(str(qwen_tok_dir / "tokenizer.json"))
    for i in range(4096):
        assert tok.decode([i], skip_special_tokens=False) != "", i


def test_roundtrips_python_source_and_unicode(qwen_tok_dir):
    tok = HFTokenizer.from_file(str(qwen_tok_dir / "tokenizer.json"))
    text = CODE + "  s = '你好, 世界 🤗 café'\n\t\tx  =  1\n"
    ids = tok.encode(text).ids
    assert tok.decode(ids) == text
    assert len(tok.encode(CODE).ids) < len(CODE) / 2  # it really learned merges


def test_same_seed_same_files_other_seed_other_filler(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_tokenizer(a, 20000, seed=0)
    write_tokenizer(b, 20000, seed=0)
    write_tokenizer(c, 20000, seed=1)
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    assert (a / "tokenizer.json").read_bytes() != (c / "tokenizer.json").read_bytes()


def test_smaller_vocabularies_are_prefixes_of_larger_ones(tmp_path, qwen_tok_dir):
    small = write_tokenizer(tmp_path, 1024)
    a = json.loads((tmp_path / "tokenizer.json").read_text())["model"]
    b = json.loads((qwen_tok_dir / "tokenizer.json").read_text())["model"]
    n = small["bpe_size"]
    assert {t: i for t, i in b["vocab"].items() if i < n} == {t: i for t, i in a["vocab"].items() if i < n}
    assert a["merges"] == b["merges"][:n - 256]


def test_without_fim_flag_has_no_fim_tokens(tmp_path):
    info = write_tokenizer(tmp_path, 1024, fim=False)
    assert set(info["special_tokens"]) == {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
    tok = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tok.token_to_id("<|fim_prefix|>") is None


def test_config_is_qwen_instruct_like(qwen_tok_dir):
    cfg = json.loads((qwen_tok_dir / "tokenizer_config.json").read_text())
    assert cfg["eos_token"] == "<|im_end|>" and cfg["bos_token"] is None
    assert cfg["tokenizer_class"] == "Qwen2Tokenizer"
    assert "<|im_start|>" in cfg["chat_template"]
    assert cfg["added_tokens_decoder"][str(4096 - 9)]["content"] == "<|endoftext|>"


def test_too_small_vocab_is_refused(tmp_path):
    with pytest.raises(ValueError, match="too small"):
        write_tokenizer(tmp_path, 200)


def test_full_qwen_vocab_writes_and_loads_fast(tmp_path):
    write_tokenizer(tmp_path / "warm", 151936)  # training is cached per process
    t0 = time.perf_counter()
    info = write_tokenizer(tmp_path / "q", 151936)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tok = HFTokenizer.from_file(str(tmp_path / "q" / "tokenizer.json"))
    load_s = time.perf_counter() - t0
    assert tok.get_vocab_size(with_added_tokens=True) == 151936
    assert info["special_tokens"]["<|endoftext|>"] == 151936 - 9
    assert tok.decode([151936 - 10, 16384, 100000]) != ""
    # Seconds, not minutes (a regression to per-token Python loops takes minutes); generous because
    # CI machines and parallel test runs on 2 cores vary several-fold.
    assert write_s < 20 and load_s < 10, (write_s, load_s)


def test_loads_in_transformers_with_identical_ids(qwen_tok_dir, bos_tok_dir):
    transformers = pytest.importorskip("transformers")
    for d in (qwen_tok_dir, bos_tok_dir):
        ref = transformers.AutoTokenizer.from_pretrained(d)
        tok = HFTokenizer.from_file(str(d / "tokenizer.json"))
        assert len(ref) == 4096
        text = CODE + "<|im_end|> 你好 🤗"
        assert ref(text)["input_ids"] == tok.encode(text).ids
        assert ref.convert_tokens_to_ids("<|im_end|>") == tok.token_to_id("<|im_end|>")
    bos = HFTokenizer.from_file(str(bos_tok_dir / "tokenizer.json"))
    assert bos.encode("x").ids[0] == bos.token_to_id("<|begin_of_text|>")
