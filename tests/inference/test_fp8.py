"""Spec for FP8 weights on CPU (inference.quant and Engine(weights="fp8")): per-channel e4m3 quantization,
the FP8 reference forward (dequantized values through the plain forward), the prefill's linear, and the
engine option's errors. The GPU kernels' and fast path's specs: tests/kernels/test_fp8_gemv.py and
tests/inference/test_fp8_fast_path.py."""

import pytest
import torch

from inference.quant import (E4M3_MAX, Fp8Weight, dequantize_model, describe, linear, quantize_fp8,
                             quantize_model)


def test_quantize_uses_one_scale_per_row_and_rounds_to_the_nearest_e4m3():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(33, 72, generator=g) * torch.logspace(-3, 1, 33)[:, None]  # rows of very different size
    fw = quantize_fp8(w)
    assert fw.q.dtype == torch.float8_e4m3fn and fw.scale.shape == (33,)
    assert torch.allclose(fw.scale, w.abs().amax(1) / E4M3_MAX)
    assert torch.equal(fw.q.float().abs().amax(1), torch.full((33,), E4M3_MAX))  # each row's max hits 448
    err = (fw.dequantize() - w).abs()
    # e4m3 keeps 3 mantissa bits: rounding error <= 2^-4 of the value, or half the subnormal step 2^-10
    assert (err <= w.abs() * 2 ** -4 + fw.scale[:, None] * 2 ** -10 + 1e-12).all()
    assert (err / w.abs().clamp_min(1e-30)).median() < 0.03


def test_quantize_rejects_k_not_a_multiple_of_4():
    with pytest.raises(AssertionError, match="multiple of 4"):
        quantize_fp8(torch.ones(2, 6))


def test_quantize_keeps_the_column_order():
    w = torch.tensor([[1.0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 448]])  # scale 1: every value exact in e4m3
    assert torch.equal(quantize_fp8(w).q.float(), w)


def test_quantize_keeps_zero_rows_and_exact_values_exact():
    w = torch.zeros(3, 8)
    w[1] = torch.tensor([448, -448, 1, 0.5, -2, 0, 256, 3.5])  # all e4m3 values at scale 1
    fw = quantize_fp8(w)
    assert fw.scale[0] == 1 and torch.equal(fw.dequantize(), w)


def test_quantize_in_row_chunks_equals_one_pass(monkeypatch):
    import inference.quant as quant

    w = torch.randn(50, 16, generator=torch.Generator().manual_seed(1))
    whole = quantize_fp8(w)
    monkeypatch.setattr(quant, "CHUNK_ELEMENTS", 16 * 7)  # 7 rows per pass
    chunked = quantize_fp8(w)
    assert torch.equal(whole.q.view(torch.uint8), chunked.q.view(torch.uint8)) and torch.equal(whole.scale,
                                                                                                 chunked.scale)


def test_linear_takes_fp8_weights_as_their_dequantized_values():
    g = torch.Generator().manual_seed(2)
    w, x, b = torch.randn(12, 20, generator=g), torch.randn(3, 20, generator=g), torch.randn(12, generator=g)
    fw = quantize_fp8(w)
    assert torch.allclose(linear(x, fw, b), x @ fw.dequantize().T + b, atol=1e-5)
    assert linear(x.bfloat16(), fw).dtype == torch.bfloat16


@pytest.mark.parametrize("shape", ["tiny", "tiny-untied"])
@pytest.mark.parametrize("head", [True, False])
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
    assert isinstance(q.lm_head, Fp8Weight) == head and (q.tied == (not head and cfg.tie_word_embeddings))
    assert describe(q) == f"fp8-e4m3 (per-channel scales; LM head {'fp8' if head else 'float32'})"
    lin = sum(getattr(layer, f).nbytes() for layer in q.layers for f in ("qkv", "o", "gate_up", "down"))
    assert lin < bf16_bytes / 3  # from float32: 1 byte + a scale per row instead of 4 bytes
    plain = dequantize_model(q)
    assert torch.equal(plain.layers[1].down, q.layers[1].down.dequantize()) and plain.tied == q.tied


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
