"""GGUF files: llama, qwen2 and qwen3 files written here with gguf.GGUFWriter (quantized tensor
types included) load to exactly the weights, tokens and logits of the same model saved as a
Hugging Face safetensors folder; unsupported architectures and tensor types are one clear line.

The reference folder holds the dequantized values (gguf.quants), so every difference would come
from our reading: tensor names, the [rows, cols] layout, llama's Q/K row permutation (written here
with llama.cpp's own formula from convert_hf_to_gguf.py), packing, config and tokenizer metadata.
"""
from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q
from gguf import quants
from safetensors.torch import save_file

from inference.engine import Engine, TokenEvent
from inference.errors import CheckpointError
from inference.hub import resolve_model_path
from inference.prompts import Prompt
from inference.reference import KVCache, ReferenceModel
from inference.sampling import SamplingParams
from inference.source import open_checkpoint
from inference.synth_tokenizer import write_tokenizer

H, I, L, HEADS, KV, D, V = 256, 512, 2, 4, 2, 64, 4096
_K_BLOCK = {Q.Q4_K: (144, (0, 2)), Q.Q5_K: (176, (0, 2)), Q.Q6_K: (210, (208,))}  # bytes, fp16 scale offsets

# Tensor type per llama.cpp name suffix and architecture: every supported type appears somewhere.
TYPES = {
    "llama": {"token_embd": Q.Q8_0, "attn_q": Q.Q4_K, "attn_k": Q.Q6_K, "attn_v": Q.Q5_K, "attn_output": Q.F16,
              "ffn_gate": Q.Q4_0, "ffn_up": Q.Q4_1, "ffn_down": Q.BF16, "output": Q.Q6_K},
    "qwen2": {"token_embd": Q.Q4_1, "attn_q": Q.Q8_0, "attn_k": Q.Q5_K, "attn_v": Q.Q4_0, "attn_output": Q.Q4_K,
              "ffn_gate": Q.Q6_K, "ffn_up": Q.F16, "ffn_down": Q.Q8_0},
    "qwen3": {"token_embd": Q.BF16, "attn_q": Q.Q6_K, "attn_k": Q.Q4_1, "attn_v": Q.Q8_0, "attn_output": Q.Q5_K,
              "ffn_gate": Q.Q4_K, "ffn_up": Q.Q4_0, "ffn_down": Q.F16, "output": Q.Q8_0},
}
HF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
      "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
      "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
      "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.permute, verbatim."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def encode(w: np.ndarray, qtype, rng) -> tuple[np.ndarray, np.ndarray]:
    """(bytes or array to store, float32 values it dequantizes to). K-quants: gguf-py cannot
    quantize them, so random blocks with small fp16 scales stand in for a quantizer."""
    if qtype in _K_BLOCK:
        size, scale_at = _K_BLOCK[qtype]
        raw = rng.integers(0, 256, (w.shape[0], w.shape[1] // 256, size), dtype=np.uint8)
        for off in scale_at:
            raw[..., off:off + 2] = np.frombuffer(np.float16(2e-5 if qtype == Q.Q6_K else 2e-4).tobytes(), np.uint8)
        raw = raw.reshape(w.shape[0], -1)
    else:
        raw = quants.quantize(w, qtype)
    return raw, quants.dequantize(raw, qtype).astype(np.float32).reshape(w.shape)


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}


def llama_cpp_rope_factors(theta: float, dim: int, scaling: dict) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: the rope_freqs tensor."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_pair(tmp, arch: str, tok_dir, seed: int = 0, rope_scaling: dict | None = None):
    """(gguf file, HF folder) holding the same model of `arch`."""
    rng = np.random.default_rng(seed)
    theta = 500000.0 if rope_scaling else 10000.0
    tag = arch + ("-rope" if rope_scaling else "")
    tied = arch == "qwen2"
    tok = json.loads((tok_dir / "tokenizer.json").read_text())
    tok_cfg = json.loads((tok_dir / "tokenizer_config.json").read_text())
    folder = tmp / f"{tag}-hf"
    folder.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok_dir / f, folder / f)
    eos = tok["model"]["vocab"].get("<|im_end|>") or next(t["id"] for t in tok["added_tokens"]
                                                          if t["content"] == "<|im_end|>")
    config = {"model_type": arch, "architectures": ["X"], "vocab_size": V, "hidden_size": H, "intermediate_size": I,
              "num_hidden_layers": L, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": D,
              "rms_norm_eps": 1e-6, "max_position_embeddings": 256, "rope_theta": theta,
              "tie_word_embeddings": tied, "eos_token_id": eos, "torch_dtype": "float32"}
    if rope_scaling:
        config["rope_scaling"] = rope_scaling
    (folder / "config.json").write_text(json.dumps(config))

    path = tmp / f"{tag}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"test {arch}")
    w.add_block_count(L)
    w.add_context_length(256)
    w.add_embedding_length(H)
    w.add_feed_forward_length(I)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    vocab = sorted({**tok["model"]["vocab"], **{t["content"]: t["id"] for t in tok["added_tokens"]}}.items(),
                   key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(V))
    special = {t["content"] for t in tok["added_tokens"] if t["special"]}
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([3 if t in special else 1 for t, _ in vocab])
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]])
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    w.add_chat_template(tok_cfg["chat_template"])

    hf: dict[str, torch.Tensor] = {}

    def add(gname: str, hname: str, shape, qtype, scale=0.05, permute_heads=None, norm=False):
        x = (1 + 0.1 * rng.standard_normal(shape) if norm else scale * rng.standard_normal(shape)).astype(np.float32)
        if permute_heads:
            x = llama_cpp_permute(x, permute_heads)
        raw, values = encode(x, qtype, rng) if qtype not in (Q.F32,) else (x, x)
        if permute_heads:  # the HF folder holds the un-permuted rows, as transformers' checkpoint did
            values = values.reshape(permute_heads, values.shape[0] // permute_heads // 2, 2, -1) \
                .swapaxes(1, 2).reshape(values.shape)
        w.add_tensor(gname, raw, raw_dtype=qtype)
        hf[hname] = torch.from_numpy(np.ascontiguousarray(values))

    if rope_scaling:
        w.add_tensor("rope_freqs.weight", llama_cpp_rope_factors(theta, D, rope_scaling))
    t = TYPES[arch]
    add("token_embd.weight", "model.embed_tokens.weight", (V, H), t["token_embd"], scale=0.5)
    for n in range(L):
        p, hp = f"blk.{n}.", f"model.layers.{n}."
        add(p + "attn_norm.weight", hp + "input_layernorm.weight", (H,), Q.F32, norm=True)
        add(p + "ffn_norm.weight", hp + "post_attention_layernorm.weight", (H,), Q.F32, norm=True)
        for name, rows, heads in (("attn_q", HEADS * D, HEADS), ("attn_k", KV * D, KV), ("attn_v", KV * D, None)):
            add(p + name + ".weight", hp + HF[name] + ".weight", (rows, H), t[name],
                permute_heads=heads if arch == "llama" else None)
            if arch == "qwen2":
                add(p + name + ".bias", hp + HF[name] + ".bias", (rows,), Q.F32, scale=0.2)
        if arch == "qwen3":
            add(p + "attn_q_norm.weight", hp + "self_attn.q_norm.weight", (D,), Q.F32, norm=True)
            add(p + "attn_k_norm.weight", hp + "self_attn.k_norm.weight", (D,), Q.F32, norm=True)
        add(p + "attn_output.weight", hp + "self_attn.o_proj.weight", (H, HEADS * D), t["attn_output"])
        add(p + "ffn_gate.weight", hp + "mlp.gate_proj.weight", (I, H), t["ffn_gate"])
        add(p + "ffn_up.weight", hp + "mlp.up_proj.weight", (I, H), t["ffn_up"])
        add(p + "ffn_down.weight", hp + "mlp.down_proj.weight", (H, I), t["ffn_down"])
    add("output_norm.weight", "model.norm.weight", (H,), Q.F32, norm=True)
    if not tied:
        add("output.weight", "lm_head.weight", (V, H), t["output"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file(hf, str(folder / "model.safetensors"))
    return path, folder


@pytest.fixture(scope="module")
def pairs(qwen_tok_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gguf_pairs")
    return {arch: write_pair(tmp, arch, qwen_tok_dir, seed=i) for i, arch in enumerate(("llama", "qwen2", "qwen3"))}


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_gguf_gives_the_weights_and_logits_of_the_same_safetensors_model(pairs, arch):
    path, folder = pairs[arch]
    g, f = open_checkpoint(path), open_checkpoint(folder)
    assert g.config == f.config
    wg, wf = g.load_weights("cpu", torch.float32), f.load_weights("cpu", torch.float32)
    assert wg.tied == f.config.tie_word_embeddings
    for a, b in zip([wg.embed, wg.norm, wg.lm_head], [wf.embed, wf.norm, wf.lm_head]):
        assert torch.equal(a, b)
    for lg, lf in zip(wg.layers, wf.layers):
        for x, y in zip(lg.tensors(), lf.tensors()):
            assert torch.equal(x, y)
    ids = torch.tensor(g.tokenizer.encode("def add(a, b):\n    return a + b\n"))
    assert ids.tolist() == f.tokenizer.encode("def add(a, b):\n    return a + b\n")
    logits = [ReferenceModel(c.config, w, 64).forward(ids, 0, KVCache(c.config, 64, "cpu", torch.float32))
              for c, w in ((g, wg), (f, wf))]
    assert torch.equal(logits[0], logits[1])
    assert logits[0].std() > 0.1  # not a degenerate model: the comparison means something


def test_llama3_rope_scaling_from_the_rope_freqs_tensor(qwen_tok_dir, tmp_path):
    path, folder = write_pair(tmp_path, "llama", qwen_tok_dir, seed=5, rope_scaling=LLAMA3_ROPE)
    g, f = open_checkpoint(path), open_checkpoint(folder)
    assert f.config.rope.kind == "llama3" and len(g.config.rope.freq_factors) == D // 2
    ids = torch.tensor(f.tokenizer.encode(open(__file__).read()))[:200]

    def logits(cfg, weights):
        return ReferenceModel(cfg, weights, 256).forward(ids, 0, KVCache(cfg, 256, "cpu", torch.float32))

    wg = g.load_weights()
    ours, hf = logits(g.config, wg), logits(f.config, f.load_weights())
    unscaled = logits(replace(g.config, rope=replace(g.config.rope, freq_factors=())), wg)
    err, err_unscaled = ((ours - hf).norm() / hf.norm()).item(), ((unscaled - hf).norm() / hf.norm()).item()
    assert err < 1e-5 and err_unscaled > 1000 * err, (err, err_unscaled)


def test_gguf_engine_generates_like_the_folder_engine(pairs):
    path, folder = pairs["llama"]
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    outs = []
    for p in (path, folder):
        engine = Engine.from_pretrained(p, device="cpu")
        outs.append([t for ev in engine.generate(Prompt.chat("hi"), params) if isinstance(ev, TokenEvent)
                     for t in ev.token_ids])
    assert outs[0] == outs[1] and len(outs[0]) == 6
    assert engine.eos_ids == Engine.from_pretrained(path).eos_ids


def test_gguf_tokenizer_metadata(pairs):
    ck = open_checkpoint(pairs["qwen2"][0])
    tok = ck.tokenizer
    assert tok.eos_token == "<|im_end|>" and tok.chat_template and tok.fim_tokens[0] == "<|fim_prefix|>"
    assert tok.encode("<|im_start|>user")[0] == tok.token_id("<|im_start|>")
    assert tok.decode(tok.encode("x = 'héllo'\n\tprint(x)  # 12345")) == "x = 'héllo'\n\tprint(x)  # 12345"
    card = ck.card
    assert card["file"] == "qwen2.gguf" and card["format"] == "gguf" and card["params"] == ck.config.num_params()
    assert card["context_length"] == 256 and "Q8_0" in card["quantization"]


def test_a_folder_holding_one_gguf_resolves_to_it(pairs, tmp_path):
    (tmp_path / "m").mkdir()
    shutil.copy(pairs["qwen3"][0], tmp_path / "m" / "model.gguf")
    assert resolve_model_path(tmp_path / "m") == tmp_path / "m" / "model.gguf"
    shutil.copy(pairs["qwen2"][0], tmp_path / "m" / "other.gguf")
    with pytest.raises(CheckpointError, match="2 .gguf files"):
        resolve_model_path(tmp_path / "m")


def _tiny_gguf(path, arch="llama", qtype=Q.F32, **meta):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(2)
    w.add_tensor("token_embd.weight", np.zeros((16, 32), np.float32) if qtype == Q.F32
                 else np.zeros((16, gguf.GGML_QUANT_SIZES[qtype][1] * 32 // gguf.GGML_QUANT_SIZES[qtype][0]),
                               np.uint8), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_unsupported_architecture_is_one_clear_line(tmp_path):
    with pytest.raises(CheckpointError, match=r"architecture 'gemma2' is not supported \(supported: llama, qwen2, qwen3\)"):
        open_checkpoint(_tiny_gguf(tmp_path / "g.gguf", arch="gemma2"))


def test_unsupported_tensor_type_is_one_clear_line(tmp_path):
    with pytest.raises(CheckpointError, match="token_embd.weight has type Q5_0, which is not supported"):
        open_checkpoint(_tiny_gguf(tmp_path / "q.gguf", qtype=Q.Q5_0))


def test_not_a_gguf_file_is_one_clear_line(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04 not gguf")
    with pytest.raises(CheckpointError, match="not a GGUF file"):
        open_checkpoint(tmp_path / "x.gguf")
    (tmp_path / "t.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(CheckpointError, match="not a readable GGUF file"):
        open_checkpoint(tmp_path / "t.gguf")
