"""Specs for inference.tokenizer.Tokenizer: tokenizer.json + tokenizer_config.json, no transformers."""

import json
import shutil
import time

import pytest

from inference.errors import CheckpointError
from inference.synth_tokenizer import write_tokenizer
from inference.tokenizer import Tokenizer

TEXTS = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "  leading spaces,   runs of spaces\tand tabs\n\n\n",
    "混合 text: 你好世界 🤗🚀 café naïve — “quotes”",
    "<|im_start|>user\nhi<|im_end|>\n",
]


@pytest.fixture(scope="module")
def tok(qwen_tok_dir):
    return Tokenizer.from_dir(qwen_tok_dir)


def copy_dir(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_reads_special_tokens_and_template_from_config(tok):
    assert tok.vocab_size == len(tok) == 4096
    assert tok.eos_token_ids == (tok.token_id("<|im_end|>"),)
    assert tok.bos_token_id is None and tok.bos_token is None
    assert tok.pad_token == "<|endoftext|>"
    assert "<|im_start|>" in tok.chat_template
    assert tok.is_special(tok.token_id("<|fim_prefix|>")) and not tok.is_special(100)


def test_encode_and_decode_match_transformers(tok, qwen_tok_dir, bos_tok_dir):
    transformers = pytest.importorskip("transformers")
    for d in (qwen_tok_dir, bos_tok_dir):
        ours, ref = Tokenizer.from_dir(d), transformers.AutoTokenizer.from_pretrained(d)
        for text in TEXTS:
            ids = ours.encode(text)
            assert ids == ref(text)["input_ids"]
            assert ours.encode(text, add_special_tokens=False) == ref(text, add_special_tokens=False)["input_ids"]
            for skip in (False, True):
                assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip)


def test_text_roundtrips_exactly(tok):
    for text in TEXTS:
        assert tok.decode(tok.encode(text)) == text


def test_bos_comes_from_the_post_processor(bos_tok_dir):
    tok = Tokenizer.from_dir(bos_tok_dir)
    assert tok.bos_token_id == tok.token_id("<|begin_of_text|>")
    assert tok.encode("x")[0] == tok.bos_token_id
    assert tok.bos_token_id not in tok.encode("x", add_special_tokens=False)


def test_every_id_in_range_decodes(tok):
    for i in range(tok.vocab_size):
        assert tok.decode([i]) != "", i


def test_missing_tokenizer_json_names_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="no tokenizer.json"):
        Tokenizer.from_dir(tmp_path)


def test_corrupt_tokenizer_json_names_the_file(qwen_tok_dir, tmp_path):
    d = copy_dir(qwen_tok_dir, tmp_path / "m")
    (d / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": ')
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        Tokenizer.from_dir(d)


def test_corrupt_tokenizer_config_names_the_file(qwen_tok_dir, tmp_path):
    d = copy_dir(qwen_tok_dir, tmp_path / "m")
    (d / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="tokenizer_config.json"):
        Tokenizer.from_dir(d)


def test_tokenizer_json_alone_is_enough(qwen_tok_dir, tmp_path):
    d = copy_dir(qwen_tok_dir, tmp_path / "m")
    (d / "tokenizer_config.json").unlink()
    tok = Tokenizer.from_dir(d)
    assert tok.eos_token_ids == () and tok.chat_template is None
    assert tok.decode(tok.encode(TEXTS[0])) == TEXTS[0]


def test_config_variants_eos_dict_and_named_templates(qwen_tok_dir, tmp_path):
    d = copy_dir(qwen_tok_dir, tmp_path / "m")
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["eos_token"] = {"content": "<|endoftext|>", "special": True}
    cfg["chat_template"] = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = Tokenizer.from_dir(d)
    assert tok.eos_token_ids == (tok.token_id("<|endoftext|>"),)
    assert tok.chat_template == "D"
    (d / "chat_template.jinja").write_text("J")  # the separate file wins, as in transformers
    assert Tokenizer.from_dir(d).chat_template == "J"


def test_added_tokens_listed_only_in_config_become_single_ids(qwen_tok_dir, tmp_path):
    d = copy_dir(qwen_tok_dir, tmp_path / "m")
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["added_tokens_decoder"]["4096"] = {"content": "<tool_call>", "special": False}
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = Tokenizer.from_dir(d)
    assert tok.token_id("<tool_call>") == 4096 and tok.vocab_size == 4097
    assert tok.encode("a<tool_call>b")[1] == 4096


def test_full_size_vocab_loads_fast(tmp_path):
    write_tokenizer(tmp_path, 151936)
    t0 = time.perf_counter()
    tok = Tokenizer.from_dir(tmp_path)
    assert time.perf_counter() - t0 < 2.0
    assert tok.vocab_size == 151936
    assert tok.eos_token_ids == (151936 - 7,)
    empty = [i for i in range(tok.vocab_size) if not tok.decode([i])]
    assert empty == []  # filler ids too: a random-weight model samples anything
