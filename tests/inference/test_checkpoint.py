"""Spec for inference.checkpoint: every broken model folder gets one clear CheckpointError
(never a torch / safetensors / json exception), and good folders load into packed weights
that equal the file's tensors, single-file or sharded, tied or untied."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from inference.checkpoint import (check_model_dir, expected_tensors, load_generation_config, load_weights,
                                  read_safetensors_header)
from inference.config import ModelConfig
from inference.errors import CheckpointError


def cfg_of(d) -> ModelConfig:
    return ModelConfig.from_file(d / "config.json")


def raises_checkpoint_error(fn, *args, **kw) -> str:
    """Call fn, assert it raised exactly CheckpointError (not a leaked library error); return the message."""
    with pytest.raises(Exception) as exc:
        fn(*args, **kw)
    assert exc.type is CheckpointError, f"{exc.type.__name__}: {exc.value}"
    return str(exc.value)


@pytest.fixture
def tiny(synth_dir, tmp_path):
    """A private copy of the tiny qwen2 checkpoint (tied, q/k/v bias, 2 layers), safe to break."""
    d = tmp_path / "tiny"
    shutil.copytree(synth_dir("tiny"), d)
    return d


@pytest.fixture
def sharded(synth_dir, tmp_path):
    d = tmp_path / "sharded"
    shutil.copytree(synth_dir("tiny", shards=3), d)
    return d


def rewrite(d, edit):
    """Replace model.safetensors with edit(tensors)."""
    tensors = load_file(d / "model.safetensors")
    save_file(edit(dict(tensors)), d / "model.safetensors", metadata={"format": "pt"})


# --- check_model_dir ---------------------------------------------------------------------------

def test_good_folder_is_returned_as_path(synth_dir):
    d = synth_dir("tiny")
    assert check_model_dir(str(d)) == d


def test_missing_folder_is_named(tmp_path):
    msg = raises_checkpoint_error(check_model_dir, tmp_path / "nope")
    assert "nope" in msg and "does not exist" in msg


def test_file_instead_of_folder(tiny):
    msg = raises_checkpoint_error(check_model_dir, tiny / "config.json")
    assert "not a folder" in msg


def test_missing_config_json(tiny):
    (tiny / "config.json").unlink()
    assert "no config.json" in raises_checkpoint_error(check_model_dir, tiny)


def test_missing_tokenizer_json(tiny):
    (tiny / "tokenizer.json").unlink()
    assert "no tokenizer.json" in raises_checkpoint_error(check_model_dir, tiny)


def test_no_weights(tiny):
    (tiny / "model.safetensors").unlink()
    msg = raises_checkpoint_error(check_model_dir, tiny)
    assert "no weights" in msg and "model.safetensors" in msg


def test_pytorch_bin_weights_get_a_conversion_hint(tiny):
    (tiny / "model.safetensors").rename(tiny / "pytorch_model.bin")
    msg = raises_checkpoint_error(check_model_dir, tiny)
    assert "no weights" in msg and ".bin" in msg


def test_unsupported_model_type(tiny):
    cfg = json.loads((tiny / "config.json").read_text())
    cfg["model_type"] = "mistral"
    (tiny / "config.json").write_text(json.dumps(cfg))
    assert "unsupported model_type 'mistral'" in raises_checkpoint_error(cfg_of, tiny)


# --- tensors vs config ---------------------------------------------------------------------------

def test_missing_tensor_is_named_with_its_shape(tiny):
    rewrite(tiny, lambda t: {k: v for k, v in t.items() if k != "model.layers.1.mlp.up_proj.weight"})
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    assert "missing tensor model.layers.1.mlp.up_proj.weight" in msg and "[128, 64]" in msg


def test_missing_bias_of_qwen2_is_named(tiny):
    rewrite(tiny, lambda t: {k: v for k, v in t.items() if not k.endswith("k_proj.bias")})
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    assert "model.layers.0.self_attn.k_proj.bias" in msg and "1 more" in msg


def test_wrong_shape_names_tensor_expected_and_actual(tiny):
    rewrite(tiny, lambda t: {**t, "model.layers.0.self_attn.o_proj.weight": torch.zeros(64, 32, dtype=torch.bfloat16)})
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    assert "model.layers.0.self_attn.o_proj.weight" in msg
    assert "[64, 32]" in msg and "[64, 64]" in msg


def test_extra_layer_is_unexpected(tiny):
    def add_layer(t):
        t.update({k.replace("layers.1.", "layers.2."): v.clone() for k, v in t.items() if ".layers.1." in k})
        return t
    rewrite(tiny, add_layer)
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    assert "unexpected tensor model.layers.2." in msg and "num_hidden_layers=2" in msg


def test_bias_without_attention_bias_is_unexpected(synth_dir, tmp_path):
    d = tmp_path / "llama"
    shutil.copytree(synth_dir("tiny-llama"), d)
    rewrite(d, lambda t: {**t, "model.layers.0.self_attn.q_proj.bias": torch.zeros(64, dtype=torch.bfloat16)})
    msg = raises_checkpoint_error(load_weights, d, cfg_of(d))
    assert "unexpected tensor model.layers.0.self_attn.q_proj.bias" in msg and "attention_bias" in msg


def test_llama_attention_bias_is_refused_clearly(synth_dir, tmp_path):
    # transformers' Llama with attention_bias=True also has o_proj.bias, which we do not implement.
    d = tmp_path / "llama"
    shutil.copytree(synth_dir("tiny-llama"), d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "attention_bias": True}))
    msg = raises_checkpoint_error(load_weights, d, cfg_of(d))
    assert "attention_bias" in msg and "o_proj" in msg


def test_integer_tensor_is_refused(tiny):
    rewrite(tiny, lambda t: {**t, "model.norm.weight": torch.ones(64, dtype=torch.int8)})
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    assert "model.norm.weight" in msg and "I8" in msg


def test_rotary_inv_freq_buffers_are_ignored(tiny):
    rewrite(tiny, lambda t: {**t, "model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(8)})
    load_weights(tiny, cfg_of(tiny))


# --- corrupt files -----------------------------------------------------------------------------

def test_truncated_file_names_file_and_sizes(tiny):
    f = tiny / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:-1000])
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    n = int.from_bytes(data[:8], "little")
    full = len(data) - 8 - n
    assert f"model.safetensors is truncated: header says {full} bytes of tensor data, file has {full - 1000}" in msg


def test_file_cut_inside_header(tiny):
    f = tiny / "model.safetensors"
    f.write_bytes(f.read_bytes()[:100])
    assert "model.safetensors is truncated" in raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))


def test_empty_file(tiny):
    (tiny / "model.safetensors").write_bytes(b"")
    assert "model.safetensors is truncated" in raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))


def test_absurd_header_length(tiny):
    f = tiny / "model.safetensors"
    f.write_bytes(b"\xff" * 8 + f.read_bytes()[8:])
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    assert "not a safetensors file" in msg and "header length" in msg


def test_header_that_is_not_json(tiny):
    f = tiny / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[8:12] = b"#!?x"
    f.write_bytes(bytes(data))
    assert "corrupt header: not valid JSON" in raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))


def test_offsets_that_disagree_with_shape(tiny):
    f = tiny / "model.safetensors"
    data = f.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["model.norm.weight"]["shape"] = [65]
    raw = json.dumps(header, separators=(",", ":")).encode().ljust(n)
    assert len(raw) == n
    f.write_bytes(data[:8] + raw + data[8 + n:])
    msg = raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))
    assert "model.norm.weight" in msg and "corrupt header" in msg


def test_trailing_bytes_are_reported(tiny):
    with open(tiny / "model.safetensors", "ab") as f:
        f.write(b"\0" * 24)
    assert "24 unexplained trailing bytes" in raises_checkpoint_error(load_weights, tiny, cfg_of(tiny))


def test_header_is_read_without_touching_data(synth_dir):
    infos = read_safetensors_header(synth_dir("tiny") / "model.safetensors")
    assert infos["model.embed_tokens.weight"].shape == (2048, 64)
    assert infos["model.embed_tokens.weight"].dtype == "BF16"


# --- sharded -----------------------------------------------------------------------------------

def test_missing_shard_is_named(sharded):
    (sharded / "model-00002-of-00003.safetensors").unlink()
    msg = raises_checkpoint_error(check_model_dir, sharded)
    assert "shard model-00002-of-00003.safetensors is missing" in msg
    assert "model-00002-of-00003.safetensors" in raises_checkpoint_error(load_weights, sharded, cfg_of(sharded))


def test_truncated_shard_is_named(sharded):
    f = sharded / "model-00003-of-00003.safetensors"
    f.write_bytes(f.read_bytes()[:-10])
    assert "model-00003-of-00003.safetensors is truncated" in raises_checkpoint_error(
        load_weights, sharded, cfg_of(sharded))


def test_index_that_is_not_json(sharded):
    (sharded / "model.safetensors.index.json").write_text("{weight_map")
    assert "model.safetensors.index.json is not valid JSON" in raises_checkpoint_error(check_model_dir, sharded)


def test_index_pointing_at_the_wrong_shard(sharded):
    p = sharded / "model.safetensors.index.json"
    index = json.loads(p.read_text())
    index["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors"
    p.write_text(json.dumps(index))
    msg = raises_checkpoint_error(load_weights, sharded, cfg_of(sharded))
    assert "model.norm.weight" in msg and "model-00001-of-00003.safetensors" in msg


def test_sharded_and_single_file_load_identical_weights(synth_dir):
    one, three = synth_dir("tiny"), synth_dir("tiny", shards=3)
    assert len(list(three.glob("model-*-of-00003.safetensors"))) == 3
    a, b = load_weights(one, cfg_of(one)), load_weights(three, cfg_of(three))
    assert torch.equal(a.embed, b.embed) and torch.equal(a.norm, b.norm)
    for la, lb in zip(a.layers, b.layers, strict=True):
        for ta, tb in zip(la.tensors(), lb.tensors(), strict=True):
            assert torch.equal(ta, tb)


# --- what load_weights returns -----------------------------------------------------------------

def test_packing_matches_the_file(synth_dir):
    d = synth_dir("tiny")
    cfg, raw = cfg_of(d), load_file(d / "model.safetensors")
    w = load_weights(d, cfg, dtype=torch.float32)
    assert len(w.layers) == cfg.num_layers and w.dtype == torch.float32
    for i, layer in enumerate(w.layers):
        p = f"model.layers.{i}."
        q, k, v = (raw[p + f"self_attn.{x}_proj.weight"].float() for x in "qkv")
        assert layer.qkv.shape == (cfg.qkv_size, cfg.hidden_size)
        assert torch.equal(layer.qkv, torch.cat([q, k, v]))
        assert torch.equal(layer.qkv_bias, torch.cat([raw[p + f"self_attn.{x}_proj.bias"].float() for x in "qkv"]))
        gate, up = raw[p + "mlp.gate_proj.weight"].float(), raw[p + "mlp.up_proj.weight"].float()
        assert torch.equal(layer.gate_up, torch.cat([gate, up]))
        assert torch.equal(layer.down, raw[p + "mlp.down_proj.weight"].float())
        assert torch.equal(layer.o, raw[p + "self_attn.o_proj.weight"].float())
        assert torch.equal(layer.attn_norm, raw[p + "input_layernorm.weight"].float())
        assert torch.equal(layer.mlp_norm, raw[p + "post_attention_layernorm.weight"].float())
        assert layer.q_norm is None and layer.k_norm is None


def test_bfloat16_load_keeps_the_file_bits(synth_dir):
    d = synth_dir("tiny")
    w = load_weights(d, cfg_of(d), dtype=torch.bfloat16)
    raw = load_file(d / "model.safetensors")
    assert w.dtype == torch.bfloat16
    assert torch.equal(w.embed, raw["model.embed_tokens.weight"])


def test_qwen3_has_qk_norm_and_no_bias(synth_dir):
    d = synth_dir("tiny-qwen3")
    w = load_weights(d, cfg_of(d))
    layer = w.layers[0]
    assert layer.qkv_bias is None
    assert layer.q_norm.shape == (32,) and layer.k_norm.shape == (32,)
    assert layer.qkv.shape == (4 * 32 + 2 * 2 * 32, 64)
    assert not torch.equal(layer.q_norm, layer.k_norm)


def test_tied_embedding_is_the_same_tensor(synth_dir):
    d = synth_dir("tiny")
    assert "lm_head.weight" not in expected_tensors(cfg_of(d))
    w = load_weights(d, cfg_of(d))
    assert w.lm_head is w.embed and w.tied


def test_tied_checkpoint_that_still_stores_lm_head_loads(tiny):
    rewrite(tiny, lambda t: {**t, "lm_head.weight": torch.zeros_like(t["model.embed_tokens.weight"])})
    w = load_weights(tiny, cfg_of(tiny))
    assert w.lm_head is w.embed and w.embed.abs().sum() > 0


def test_untied_head_is_its_own_tensor(synth_dir):
    d = synth_dir("tiny-untied")
    w = load_weights(d, cfg_of(d))
    raw = load_file(d / "model.safetensors")
    assert not w.tied
    assert torch.equal(w.lm_head, raw["lm_head.weight"].float())
    assert not torch.equal(w.lm_head, w.embed)


def test_untied_checkpoint_without_lm_head_is_refused(synth_dir, tmp_path):
    d = tmp_path / "untied"
    shutil.copytree(synth_dir("tiny-untied"), d)
    rewrite(d, lambda t: {k: v for k, v in t.items() if k != "lm_head.weight"})
    assert "missing tensor lm_head.weight" in raises_checkpoint_error(load_weights, d, cfg_of(d))


# --- generation_config.json --------------------------------------------------------------------

def test_generation_config_eos_list(synth_dir):
    gen = load_generation_config(synth_dir("tiny"))
    assert isinstance(gen["eos_token_id"], list) and gen["eos_token_ids"] == tuple(gen["eos_token_id"])


def test_generation_config_single_eos_and_absent_file(tmp_path):
    assert load_generation_config(tmp_path) == {"eos_token_ids": ()}
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": 7, "temperature": 0.6}')
    gen = load_generation_config(tmp_path)
    assert gen["eos_token_ids"] == (7,) and gen["temperature"] == 0.6


def test_generation_config_that_is_not_json(tmp_path):
    (tmp_path / "generation_config.json").write_text("{")
    assert "not valid JSON" in raises_checkpoint_error(load_generation_config, tmp_path)


# --- GPU: straight to the device ---------------------------------------------------------------


@pytest.mark.parametrize("shape", ["tiny", "tiny-qwen3", "tiny-llama"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_load_equals_cpu_load(synth_dir, shape, dtype):
    d = synth_dir(shape, shards=2)
    cfg = cfg_of(d)
    a, b = load_weights(d, cfg, dtype=dtype), load_weights(d, cfg, device="cuda", dtype=dtype)
    assert b.device.type == "cuda" and b.dtype == dtype and b.tied == a.tied
    for ta, tb in zip([a.embed, a.norm, a.lm_head] + [t for l in a.layers for t in l.tensors()],
                      [b.embed, b.norm, b.lm_head] + [t for l in b.layers for t in l.tensors()], strict=True):
        assert tb.is_cuda and torch.equal(ta, tb.cpu())
