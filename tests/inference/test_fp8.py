"""Spec for FP8 weights on CPU (inference.quant and Engine(weights="fp8")): e4m3 quantization with a scale and
an offset per group of 32 columns,
the FP8 reference forward (dequantized values through the plain forward), the prefill's linear, and the
engine option's errors. The GPU kernels' and fast path's specs: tests/kernels/test_fp8_gemv.py and
tests/inference/test_fp8_fast_path.py."""

import pytest
import torch

from inference.fast.prefill import linear
from inference.quant import (Q_HALF_RANGE, Fp8Weight, Int8Weight, dequantize_model, describe, quantize_fp8,
                             quantize_int8, quantize_model)


def test_quantize_gives_each_group_of_32_columns_its_mid_range_offset_and_half_range_scale():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(33, 96, generator=g) * torch.logspace(-3, 1, 33)[:, None] + 0.3  # rows of very different size
    fw = quantize_fp8(w)
    assert fw.q.dtype == torch.float8_e4m3fn and fw.scale.shape == fw.offset.shape == (33, 3)
    groups = w.view(33, 3, 32)
    lo, hi = groups.amin(-1), groups.amax(-1)
    assert torch.allclose(fw.offset, (hi + lo) / 2) and torch.allclose(fw.scale, (hi - lo) / 2 / Q_HALF_RANGE)
    assert torch.equal(fw.q.float().view(33, 3, 32).abs().amax(-1), torch.full((33, 3), Q_HALF_RANGE))
    err = (fw.dequantize() - w).abs()
    half = ((hi - lo) / 2).repeat_interleave(32, 1)
    # e4m3 keeps 3 mantissa bits: error <= 2^-4 of the value's distance to the mid-range, or half the
    # subnormal step (2^-10 of the scale)
    dist = (w - fw.offset.repeat_interleave(32, 1)).abs()
    assert (err <= dist * 2 ** -4 + fw.scale.repeat_interleave(32, 1) * 2 ** -10 + half * 1e-6).all()
    assert (err / half).median() < 0.02


def test_a_4_bit_grid_of_32_columns_comes_back_exactly():
    """GGUF Q4_1 blocks: 32 values min + d * i (i = 0..15, both ends present) land on e4m3 half-integers."""
    g = torch.Generator().manual_seed(3)
    i = torch.randint(0, 16, (40, 64, 32), generator=g)
    i[..., 0], i[..., 1] = 0, 15
    d = (torch.rand(40, 64, 1, generator=g) * 0.01 + 1e-4).half().float()
    m = (-8 * d - torch.rand(40, 64, 1, generator=g) * 0.01).half().float()
    w = (d * i + m).view(40, 2048)
    fw = quantize_fp8(w)
    assert torch.equal(fw.q.float().view(40, 64, 32) + 7.5, i.float())
    assert (fw.dequantize() - w).abs().max() <= 1e-6 * w.abs().max()


def test_quantize_rejects_k_not_a_multiple_of_32():
    with pytest.raises(AssertionError, match="multiple of 32"):
        quantize_fp8(torch.ones(2, 48))


def test_quantize_keeps_the_column_order():
    w = (torch.arange(64.0) * 7 % 16)[None, :] * torch.tensor([0.5, -2.0])[:, None]  # 0..15 in a scrambled order
    fw = quantize_fp8(w)
    assert torch.equal(fw.dequantize(), w)  # a 4-bit grid: exact, so any column mix-up shows


def test_quantize_keeps_constant_groups_exact():
    w = torch.zeros(3, 64)
    w[1, 32:] = -0.75
    w[2] = 5.0
    fw = quantize_fp8(w)
    assert torch.equal(fw.scale, torch.ones(3, 2)) and torch.equal(fw.q.float(), torch.zeros(3, 64))
    assert torch.equal(fw.dequantize(), w)


def test_quantize_in_row_chunks_equals_one_pass(monkeypatch):
    import inference.quant as quant

    w = torch.randn(50, 64, generator=torch.Generator().manual_seed(1))
    whole = quantize_fp8(w)
    monkeypatch.setattr(quant, "CHUNK_ELEMENTS", 64 * 7)  # 7 rows per pass
    chunked = quantize_fp8(w)
    assert torch.equal(whole.q.view(torch.uint8), chunked.q.view(torch.uint8))
    assert torch.equal(whole.scale, chunked.scale) and torch.equal(whole.offset, chunked.offset)


def test_int8_quantization_keeps_each_group_within_half_a_step_of_its_largest_value():
    """Symmetric per group of 32: scale = max |w| / 127 in float16, every value within half a step (and the
    float16 rounding of the scale); a zero group stays zero; chunked passes give the same bytes."""
    import inference.quant as quant

    g = torch.Generator().manual_seed(3)
    w = torch.randn(50, 128, generator=g) * torch.rand(50, 1, generator=g)
    w[4, 32:64] = 0.0
    iw = quantize_int8(w)
    groups = w.view(50, 4, 32)
    step = groups.abs().amax(-1, keepdim=True) / 127
    assert ((iw.dequantize().view(50, 4, 32) - groups).abs() <= step * (0.5 + 2 ** -9)).all()
    assert iw.q.abs().max() <= 127 and torch.equal(iw.dequantize()[4, 32:64], torch.zeros(32))
    assert iw.nbytes() == 50 * 128 + 2 * 50 * 4  # 1.0625 bytes a weight
    quant.CHUNK_ELEMENTS, before = 128 * 7, quant.CHUNK_ELEMENTS
    try:
        chunked = quantize_int8(w)
    finally:
        quant.CHUNK_ELEMENTS = before
    assert torch.equal(chunked.q, iw.q) and torch.equal(chunked.scale, iw.scale)


def test_linear_takes_fp8_weights_as_their_dequantized_values():
    g = torch.Generator().manual_seed(2)
    w, x, b = torch.randn(12, 64, generator=g), torch.randn(3, 64, generator=g), torch.randn(12, generator=g)
    fw = quantize_fp8(w)
    assert torch.allclose(linear(x, fw, b), x @ fw.dequantize().T + b, atol=1e-5)
    assert linear(x.bfloat16(), fw).dtype == torch.bfloat16
    iw = quantize_int8(w)
    assert torch.allclose(linear(x, iw), x @ iw.dequantize().T, atol=1e-5)


@pytest.mark.parametrize("shape", ["tiny", "tiny-untied"])
@pytest.mark.parametrize("head", ["int8", "fp8", None])
def test_quantize_model_replaces_the_linear_layers_and_keeps_the_rest(synth_dir, shape, head):
    from inference.checkpoint import load_weights
    from inference.config import ModelConfig

    path = synth_dir(shape)
    cfg = ModelConfig.from_file(path / "config.json")
    dense = load_weights(path, cfg)
    embed, norms, bias = dense.embed, dense.layers[0].attn_norm, dense.layers[0].qkv_bias
    bf16_bytes = dense.nbytes()
    q = quantize_model(dense, lm_head=head)
    layer = q.layers[0]
    assert all(isinstance(getattr(layer, f), Fp8Weight) for f in ("qkv", "o", "gate_up", "down"))
    assert layer.attn_norm is norms and layer.qkv_bias is bias and q.embed is embed
    kind = {"int8": Int8Weight, "fp8": Fp8Weight, None: torch.Tensor}[head]
    assert isinstance(q.lm_head, kind) and (q.tied == (not head and cfg.tie_word_embeddings))
    assert describe(q) == f"fp8-e4m3 (scale+offset per 32; LM head {head or 'float32'})"
    lin = sum(getattr(layer, f).nbytes() for layer in q.layers for f in ("qkv", "o", "gate_up", "down"))
    assert lin < bf16_bytes / 3  # from float32: 1.25 bytes (1 + a scale and an offset per 32) instead of 4
    plain = dequantize_model(q)
    assert torch.equal(plain.layers[1].down, q.layers[1].down.dequantize()) and plain.tied == q.tied
    if head:
        assert torch.equal(plain.lm_head, q.lm_head.dequantize())


@pytest.mark.parametrize("shape", ["tiny", "tiny-untied"])
def test_quantize_model_casts_the_rest_to_the_run_dtype_and_keeps_a_tied_head_tied(synth_dir, shape):
    from inference.checkpoint import load_weights
    from inference.config import ModelConfig

    path = synth_dir(shape)
    cfg = ModelConfig.from_file(path / "config.json")
    q = quantize_model(load_weights(path, cfg), lm_head=None, dtype=torch.bfloat16)
    layer = q.layers[0]
    assert isinstance(layer.down, Fp8Weight) and layer.attn_norm.dtype == layer.mlp_norm.dtype == torch.bfloat16
    assert layer.qkv_bias is None or layer.qkv_bias.dtype == torch.bfloat16
    assert q.embed.dtype == q.norm.dtype == q.lm_head.dtype == torch.bfloat16
    assert q.tied == cfg.tie_word_embeddings


def test_fp8_is_quantized_from_float32_where_the_checkpoint_is_finer_than_the_run_dtype():
    from inference.quant import source_dtype

    assert source_dtype({"format": "gguf"}, torch.bfloat16) == torch.float32
    assert source_dtype({"format": "safetensors", "source_dtype": "float32"}, torch.bfloat16) == torch.float32
    assert source_dtype({"format": "safetensors", "source_dtype": "bfloat16"}, torch.bfloat16) == torch.bfloat16


def test_the_default_models_q4_1_layers_come_back_exactly_in_fp8():
    """SmolLM2's GGUF Q4_1 linear layers, quantized from float32 as the engine does for a bf16 run, dequantize to
    the file's values bit for bit (through bf16 first, about 10% of them would), and so does its Q8_0 tied
    head in int8."""
    from inference.hub import resolve_model_path
    from inference.source import open_checkpoint

    ckpt = open_checkpoint(resolve_model_path("default"))
    exact = ckpt.load_weights("cpu", torch.float32)
    wanted = [[getattr(layer, f).clone() for f in ("qkv", "o", "gate_up", "down")] for layer in exact.layers]
    head = exact.lm_head.clone()
    q = quantize_model(exact, dtype=torch.bfloat16)
    for layer, values in zip(q.layers, wanted):
        for f, w in zip(("qkv", "o", "gate_up", "down"), values):
            assert torch.equal(getattr(layer, f).dequantize(), w), f
    assert q.embed.dtype == torch.bfloat16 and not q.tied
    assert isinstance(q.lm_head, Int8Weight) and torch.equal(q.lm_head.dequantize(), head)  # Q8_0: exact in int8


@pytest.mark.parametrize("source", ["gguf", "safetensors"])
def test_loaders_quantize_each_linear_weight_as_they_load_it(source, synth_dir):
    """`linear=quantize_fp8`: the loaders hand back FP8 layers equal bit for bit to quantizing a full load (the
    engine's FP8 path: the device never holds the unquantized model)."""
    from inference.hub import resolve_model_path
    from inference.source import open_checkpoint

    path = resolve_model_path("default") if source == "gguf" else synth_dir("tiny")
    ckpt = open_checkpoint(path)
    streamed = ckpt.loader(torch.float32)(linear=quantize_fp8)
    whole = quantize_model(ckpt.load_weights("cpu", torch.float32), lm_head=None)
    for a, b in zip(streamed.layers, whole.layers):
        for f in ("qkv", "o", "gate_up", "down"):
            x, y = getattr(a, f), getattr(b, f)
            assert isinstance(x, Fp8Weight) and torch.equal(x.q.view(torch.uint8), y.q.view(torch.uint8))
            assert torch.equal(x.scale, y.scale) and torch.equal(x.offset, y.offset)
    assert quantize_model(streamed, lm_head=None).layers[0].qkv is streamed.layers[0].qkv  # already FP8: kept


def test_engine_fp8_on_cpu_runs_the_fp8_reference(synth_dir):
    from inference.checkpoint import load_weights
    from inference.engine import Engine, FinishEvent
    from inference.reference import KVCache, ReferenceModel
    from inference.sampling import SamplingParams

    path = synth_dir("tiny-qwen3")
    engine = Engine.from_pretrained(path, weights="fp8")
    assert engine.info["weights"] == "fp8" and engine.info["runner"] == "reference"
    assert "dequantized to float32" in engine.info["weights_detail"]
    cfg = engine.cfg
    oracle = ReferenceModel(cfg, dequantize_model(quantize_model(load_weights(path, cfg))), 256)
    ids = list(range(3, 40))
    logits = oracle.forward(torch.tensor(ids), 0, KVCache(cfg, 256, "cpu", torch.float32))
    want = int(logits[-1].argmax())
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    from inference.prompts import Prompt

    got = [t for ev in engine.generate(Prompt.from_ids(ids), params) if not isinstance(ev, FinishEvent)
           for t in ev.token_ids]
    assert len(got) == 6 and got[0] == want
    dense = Engine.from_pretrained(path)
    assert dense.info["weights"] == "float32"


def test_engine_weights_option_errors_and_aliases(synth_dir):
    from inference.engine import Engine
    from inference.errors import EngineError

    path = synth_dir("tiny")
    assert Engine.from_pretrained(path, weights="bf16").info["dtype"] == "bfloat16"
    with pytest.raises(EngineError, match="unknown weights 'int4'"):
        Engine.from_pretrained(path, weights="int4")
    with pytest.raises(EngineError, match="contradicts"):
        Engine.from_pretrained(path, weights="bf16", dtype="float32")
