"""Spec for inference.synth: random-weight checkpoints in the Hugging Face layout.

The big shapes' config.json must carry the real models' dimensions (the table below is copied
from the published config.json files); tiny shapes must load in transformers with no missing or
unexpected keys; the same seed gives the same bytes, for any shard count.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from inference.checkpoint import expected_tensors, load_weights
from inference.config import ModelConfig
from inference.synth import SHAPES, _shard_plan, config_json, write_checkpoint
from inference.synth import main as synth_main
from inference.tokenizer import Tokenizer

REPO = Path(__file__).resolve().parents[2]
TINY = ["tiny", "tiny-untied", "tiny-qwen3", "tiny-llama"]

# From the published config.json of each model (bos/eos ids differ: ours come from the synthetic tokenizer).
REAL = {
    "qwen2.5-coder-1.5b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=1536,
                               intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                               num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
                               rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                               rope_scaling=None, use_sliding_window=False, torch_dtype="bfloat16"),
    "qwen2.5-coder-3b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=2048,
                             intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
                             num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
                             rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    "qwen3-1.7b": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=2048,
                       intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, vocab_size=151936, max_position_embeddings=40960, rope_theta=1000000.0,
                       rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False),
    "llama-3.2-1b": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048,
                         intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=64, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
                         rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                       "original_max_position_embeddings": 8192, "rope_type": "llama3"}),
}
# Parameter counts (billions) and the number of safetensors files of the real releases.
REAL_PARAMS = {"qwen2.5-coder-1.5b": (1.54, 1), "qwen2.5-coder-3b": (3.09, 2), "qwen3-1.7b": (2.03, 2),
               "llama-3.2-1b": (1.24, 1)}


@pytest.mark.parametrize("name", sorted(REAL))
def test_big_shape_config_matches_the_real_model(name):
    cfg = config_json(SHAPES[name], {"bos_token_id": 1, "eos_token_id": 2})
    for key, value in REAL[name].items():
        assert cfg[key] == value, key


@pytest.mark.parametrize("name", sorted(REAL))
def test_big_shape_size_and_sharding_match_the_real_release(name):
    mc = ModelConfig.from_dict(config_json(SHAPES[name], {"bos_token_id": 1, "eos_token_id": 2}))
    billions, files = REAL_PARAMS[name]
    stored = expected_tensors(mc)
    if SHAPES[name].store_tied_head:  # Qwen3-1.7B's files hold lm_head.weight although it is tied
        stored["lm_head.weight"] = stored["model.embed_tokens.weight"]
    assert math.isclose(sum(math.prod(s) for s in stored.values()) / 1e9, billions, abs_tol=0.01)
    assert len(_shard_plan(list(stored.items()), 2, None)) == files


@pytest.fixture(scope="module")
def transformers_auto():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    return transformers.AutoModelForCausalLM


@pytest.mark.parametrize("name", TINY)
def test_tiny_shape_loads_in_transformers_without_key_warnings(name, synth_dir, transformers_auto):
    d = synth_dir(name)
    model, info = transformers_auto.from_pretrained(d, output_loading_info=True, dtype=torch.float32)
    assert {k: v for k, v in info.items() if v} == {}
    cfg = json.loads((d / "config.json").read_text())
    assert type(model).__name__ == cfg["architectures"][0]
    assert model.config.tie_word_embeddings == SHAPES[name].tie_word_embeddings


@pytest.mark.parametrize("name", TINY)
def test_tiny_config_matches_the_shape_table_and_the_tokenizer(name, synth_dir):
    d, s = synth_dir(name), SHAPES[name]
    raw = json.loads((d / "config.json").read_text())
    cfg = ModelConfig.from_dict(raw)
    assert (cfg.model_type, cfg.hidden_size, cfg.intermediate_size, cfg.num_layers, cfg.num_heads,
            cfg.num_kv_heads, cfg.vocab_size, cfg.max_position_embeddings, cfg.tie_word_embeddings) == (
        s.model_type, s.hidden_size, s.intermediate_size, s.num_layers, s.num_heads, s.num_kv_heads,
        s.vocab_size, s.max_position_embeddings, s.tie_word_embeddings)
    assert cfg.head_dim == (s.head_dim or s.hidden_size // s.num_heads)
    assert raw["initializer_range"] == s.std and raw["torch_dtype"] == raw["dtype"] == "bfloat16"
    assert (cfg.rope.kind == "llama3") == (s.rope_scaling is not None)
    tok = Tokenizer.from_dir(d)
    gen = json.loads((d / "generation_config.json").read_text())
    assert tok.vocab_size == cfg.vocab_size
    assert set(tok.eos_token_ids) | set(cfg.eos_token_ids) <= set(gen["eos_token_id"])
    assert all(0 <= i < cfg.vocab_size for i in gen["eos_token_id"])
    assert json.loads((d / "synth.json").read_text())["shape"] == name


def test_weights_follow_the_documented_init(synth_dir):
    raw = load_file(synth_dir("tiny") / "model.safetensors")
    embed = raw["model.embed_tokens.weight"].float()
    assert 0.18 < embed.std() < 0.22 and abs(embed.mean()) < 0.01
    norm = raw["model.layers.0.input_layernorm.weight"].float()
    assert 0.9 < norm.mean() < 1.1 and 0.05 < norm.std() < 0.15
    assert raw["model.layers.0.self_attn.q_proj.bias"].float().std() > 0.1


def test_layers_override(tmp_path):
    d = write_checkpoint("tiny-qwen3", tmp_path, layers=1, device="cpu")
    cfg = ModelConfig.from_file(d / "config.json")
    assert cfg.num_layers == 1
    assert len(load_weights(d, cfg).layers) == 1


def test_same_seed_same_bytes_other_seed_other_weights(synth_dir, tmp_path):
    a = synth_dir("tiny") / "model.safetensors"
    b = write_checkpoint("tiny", tmp_path / "again", seed=0, device="cpu") / "model.safetensors"
    c = write_checkpoint("tiny", tmp_path / "other", seed=1, device="cpu") / "model.safetensors"
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_sharded_checkpoint_has_an_index_and_the_same_tensors(synth_dir):
    one, three = synth_dir("tiny"), synth_dir("tiny", shards=3)
    index = json.loads((three / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == [f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)]
    assert not (three / "model.safetensors").exists()
    merged = {}
    for s in shards:
        merged.update(load_file(three / s))
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in merged.values())
    single = load_file(one / "model.safetensors")
    assert merged.keys() == single.keys()
    assert all(torch.equal(merged[k], single[k]) for k in single)


def test_rewriting_a_folder_replaces_old_shards(tmp_path):
    write_checkpoint("tiny", tmp_path, shards=2, device="cpu")
    write_checkpoint("tiny", tmp_path, device="cpu")
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == ["model.safetensors"]
    assert not (tmp_path / "model.safetensors.index.json").exists()


def test_float32_checkpoint(tmp_path):
    d = write_checkpoint("tiny", tmp_path, dtype=torch.float32, device="cpu")
    assert json.loads((d / "config.json").read_text())["torch_dtype"] == "float32"
    assert load_file(d / "model.safetensors")["model.norm.weight"].dtype == torch.float32


def test_unknown_shape_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown shape 'qwen9'"):
        write_checkpoint("qwen9", tmp_path)


def test_cli_writes_a_checkpoint(tmp_path):
    out = tmp_path / "cli"
    r = subprocess.run([sys.executable, "-m", "inference.synth", "--shape", "tiny-llama", "--out", str(out),
                        "--layers", "1", "--seed", "3", "--shards", "2", "--device", "cpu"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out)
    assert len(list(out.glob("model-*-of-00002.safetensors"))) == 2
    assert json.loads((out / "synth.json").read_text())["seed"] == 3
    assert ModelConfig.from_file(out / "config.json").num_layers == 1


def test_cli_rejects_an_unknown_shape(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        synth_main(["--shape", "nope", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


def test_tied_head_copy_equals_the_embedding_and_loads(tmp_path, monkeypatch):
    # Like the real Qwen3-1.7B files: tied, but lm_head.weight stored too.
    import dataclasses
    monkeypatch.setitem(SHAPES, "tiny-qwen3", dataclasses.replace(SHAPES["tiny-qwen3"], store_tied_head=True))
    d = write_checkpoint("tiny-qwen3", tmp_path, device="cpu", shards=2)
    merged = {}
    for f in d.glob("model-*.safetensors"):
        merged.update(load_file(f))
    assert torch.equal(merged["lm_head.weight"], merged["model.embed_tokens.weight"])
    w = load_weights(d, ModelConfig.from_file(d / "config.json"))
    assert w.tied


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_writes_are_deterministic_and_load_cleanly(tmp_path, transformers_auto):
    a = write_checkpoint("tiny-qwen3", tmp_path / "a", device="cuda", shards=2)
    b = write_checkpoint("tiny-qwen3", tmp_path / "b", device="cuda", shards=2)
    for f in sorted(p.name for p in a.glob("*.safetensors")):
        assert (a / f).read_bytes() == (b / f).read_bytes()
    assert json.loads((a / "synth.json").read_text())["device"] == "cuda"
    _, info = transformers_auto.from_pretrained(a, output_loading_info=True)
    assert not any(info.values())
