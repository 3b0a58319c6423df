"""Greedy parity with Hugging Face transformers, the oracle, in float32 on CPU.

Every model family and layout is built twice: by transformers itself (XxxConfig -> XxxForCausalLM
-> save_pretrained) and by inference.synth. For each folder our Engine must generate exactly the
tokens transformers' generate() does (48 greedy tokens, EOS ignored), and the reference forward's
logits must match transformers' logits at every position of prompt + generation.

Weights are re-drawn with std 0.2 (norms 1 + 0.1 N(0,1)): with transformers' default 0.02 a tiny
model attends uniformly and its logits are flat, so RoPE, masking or norm bugs would not show.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inference.checkpoint import load_weights
from inference.config import ModelConfig
from inference.reference import KVCache, ReferenceModel
from inference.synth_tokenizer import write_tokenizer

transformers = pytest.importorskip("transformers")
engine_mod = pytest.importorskip("inference.engine")

REPO = Path(__file__).resolve().parents[2]
NEW_TOKENS = 48
PROMPT_LEN = 16
LLAMA3_TINY_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0, "original_max_position_embeddings": 512}
COMMON = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=2048)


def _hf_config(kind: str):
    """transformers configs, written independently of inference.synth's shape table."""
    if kind == "qwen2":  # q/k/v bias, tied
        return transformers.Qwen2Config(vocab_size=2048, tie_word_embeddings=True, rms_norm_eps=1e-6,
                                        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **COMMON)
    if kind == "qwen2-untied":
        return transformers.Qwen2Config(vocab_size=1536, tie_word_embeddings=False,
                                        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **COMMON)
    if kind == "qwen3":  # q/k norm, head_dim 32 != hidden / heads
        return transformers.Qwen3Config(vocab_size=2048, head_dim=32, tie_word_embeddings=True,
                                        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **COMMON)
    if kind == "llama":  # llama3 rope scaling, untied
        return transformers.LlamaConfig(vocab_size=2304, head_dim=16, tie_word_embeddings=False, rms_norm_eps=1e-5,
                                        rope_parameters=dict(LLAMA3_TINY_ROPE), **COMMON)
    if kind == "llama-tied":  # tied, saved sharded (Llama-3.2-1B ties its embeddings)
        return transformers.LlamaConfig(vocab_size=2048, head_dim=16, tie_word_embeddings=True,
                                        rope_parameters=dict(LLAMA3_TINY_ROPE), **COMMON)
    raise KeyError(kind)


HF_BUILDS = {  # case -> (config kind, save_pretrained max_shard_size)
    "hf-qwen2-bias": ("qwen2", None),
    "hf-qwen2-untied": ("qwen2-untied", None),
    "hf-qwen3-qknorm": ("qwen3", None),
    "hf-llama3-rope": ("llama", None),
    "hf-llama-tied-sharded": ("llama-tied", "150KB"),
}
SYNTH_BUILDS = {  # case -> (synth shape, shards)
    "synth-qwen2-bias": ("tiny", None),
    "synth-qwen2-untied": ("tiny-untied", None),
    "synth-qwen3-qknorm": ("tiny-qwen3", None),
    "synth-llama3-rope": ("tiny-llama", None),
    "synth-qwen2-sharded": ("tiny", 3),
}
CASES = list(HF_BUILDS) + list(SYNTH_BUILDS)


def build_with_transformers(kind: str, out: Path, max_shard_size: str | None) -> Path:
    cfg = _hf_config(kind)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied head shares the embedding: drawn once
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
    model.save_pretrained(out, **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    if max_shard_size:
        assert (out / "model.safetensors.index.json").is_file()
    write_tokenizer(out, cfg.vocab_size, add_bos=kind.startswith("llama"))
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory, synth_dir):
    cache = {}

    def get(case: str) -> Path:
        if case not in cache:
            if case in HF_BUILDS:
                kind, shard = HF_BUILDS[case]
                cache[case] = build_with_transformers(kind, tmp_path_factory.mktemp(case), shard)
            else:
                shape, shards = SYNTH_BUILDS[case]
                cache[case] = synth_dir(shape, **({"shards": shards} if shards else {}))
        return cache[case]

    return get


@pytest.fixture(scope="module")
def oracle():
    """case folder -> (transformers model in float32, greedy token ids for the prompt)."""
    transformers.logging.set_verbosity_error()
    cache = {}

    def get(d: Path):
        if d not in cache:
            model, info = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                                            output_loading_info=True)
            assert not any(info.values()), info
            model.eval()
            model.generation_config.eos_token_id = None  # generate exactly NEW_TOKENS, like ignore_eos
            cfg = model.config
            ids = torch.randint(0, cfg.vocab_size, (PROMPT_LEN,), generator=torch.Generator().manual_seed(7)).tolist()
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, PROMPT_LEN, dtype=torch.long),
                                     max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
            new = out[0, PROMPT_LEN:].tolist()
            assert len(new) == NEW_TOKENS
            cache[d] = (model, ids, new)
        return cache[d]

    return get


@pytest.mark.parametrize("case", CASES)
def test_engine_greedy_tokens_equal_transformers(case, folder, oracle):
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams

    d = folder(case)
    _, ids, expected = oracle(d)
    engine = engine_mod.Engine.from_pretrained(d, device="cpu", dtype="float32")
    got = []
    for ev in engine.generate(Prompt.from_ids(ids), SamplingParams(max_tokens=NEW_TOKENS, temperature=0,
                                                                  ignore_eos=True)):
        if isinstance(ev, engine_mod.TokenEvent):
            got.extend(ev.token_ids)
    assert got == expected
    assert len(set(expected)) > NEW_TOKENS // 4  # a real test: the model does not just repeat one token


@pytest.mark.parametrize("case", CASES)
def test_reference_logits_equal_transformers_at_every_position(case, folder, oracle):
    d = folder(case)
    model, ids, new = oracle(d)
    seq = torch.tensor(ids + new)
    with torch.no_grad():
        expected = model(seq[None]).logits[0].float()
    cfg = ModelConfig.from_file(d / "config.json")
    ref = ReferenceModel(cfg, load_weights(d, cfg, dtype=torch.float32), len(seq))
    got = ref.forward(seq, 0, KVCache(cfg, len(seq), "cpu", torch.float32))
    assert expected.std() > 0.5  # decisive logits (see the module docstring)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_both_builders_write_the_same_config_fields(folder):
    """synth's config.json says what transformers' own config says, for the fields we read."""
    keys = ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "vocab_size", "tie_word_embeddings"]
    for hf, syn in [("hf-qwen2-bias", "synth-qwen2-bias"), ("hf-qwen3-qknorm", "synth-qwen3-qknorm"),
                    ("hf-llama3-rope", "synth-llama3-rope"), ("hf-qwen2-untied", "synth-qwen2-untied")]:
        a = ModelConfig.from_file(folder(hf) / "config.json")
        b = ModelConfig.from_file(folder(syn) / "config.json")
        for k in ["model_type", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                  "head_dim", "vocab_size", "tie_word_embeddings", "attention_bias", "qk_norm", "rope"]:
            assert getattr(a, k) == getattr(b, k), (hf, k)
        ja, jb = (json.loads((folder(c) / "config.json").read_text()) for c in (hf, syn))
        assert all(ja[k] == jb[k] for k in keys)


def test_generate_cli_json_matches_transformers(folder, oracle, tmp_path):
    d = folder("synth-llama3-rope")
    _, ids, expected = oracle(d)
    r = subprocess.run([sys.executable, "-m", "inference.generate", "--model", str(d), "--device", "cpu",
                        "--dtype", "float32", "--prompt-ids", ",".join(map(str, ids)), "--max-tokens", "12",
                        "--ignore-eos", "--json"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["token_ids"] == expected[:12]
    assert out["finish_reason"] == "length" and out["prompt_tokens"] == PROMPT_LEN
