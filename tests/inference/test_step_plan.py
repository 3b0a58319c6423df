"""Spec for the decode step's plan (inference.fast.plan) and its binding (inference.fast.step), on the CPU.

The plan is a pure function of (model shape, tuning row, what the GPU supports, requested modes), so it is
checked here without a GPU: readable specs of what each kind of step launches, and the equivalence test:
for every case of tests/inference/data/step_launches.json (GPU x shape x weights x modes, recorded from the
runner before the plan existed) the bound step makes the same launches, kernel for kernel, argument for
argument, in the same order. Kernels are replaced by recorders through bind_step's `kernels` argument (no
monkeypatching); weights are untouched torch.empty tensors of the real shapes (no memory is used).
The GPU tests (tests/inference/test_fast_path.py, test_fp8_fast_path.py) run the real kernels.
"""

import inspect
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from inference.config import ModelConfig
from inference.fast.plan import STREAMED, Prefetch, Target, Workspace, choose, plain_gemv, verify_gemv
from inference.fast.step import KERNELS, bind_step
from inference.quant import LINEAR_FIELDS, Fp8Weight, Int8Weight
from inference.weights import LayerWeights, ModelWeights
from kernels.tuning import H200, DeviceInfo, Tuning, generic

# -- fakes: shapes, GPUs, weights and buffers on the CPU; a recorder that writes launches as lines ---------

E4M3 = torch.float8_e4m3fn

# name: (model_type, vocab, hidden, intermediate, heads, kv_heads, head_dim, eps, qkv bias, q/k norm)
SHAPES = {
    "qwen2.5-coder-1.5b": ("qwen2", 151936, 1536, 8960, 12, 2, 128, 1e-6, True, False),
    "qwen2.5-coder-3b": ("qwen2", 151936, 2048, 11008, 16, 2, 128, 1e-6, True, False),
    "qwen3-1.7b": ("qwen3", 151936, 2048, 6144, 16, 8, 128, 1e-6, False, True),
    "qwen2.5-coder-7b": ("qwen2", 152064, 3584, 18944, 28, 4, 128, 1e-6, True, False),
    "smollm2-135m": ("llama", 49152, 576, 1536, 9, 3, 64, 1e-5, False, False),
}


def model_config(shape: str, layers: int = 2) -> ModelConfig:
    mt, v, h, i, nh, nkv, hd, eps, bias, qk = SHAPES[shape]
    return ModelConfig(model_type=mt, vocab_size=v, hidden_size=h, intermediate_size=i, num_layers=layers,
                       num_heads=nh, num_kv_heads=nkv, head_dim=hd, rms_norm_eps=eps, max_position_embeddings=32768,
                       attention_bias=bias, qk_norm=qk)


@dataclass(frozen=True)
class FakeGpu:
    """A GPU as the step's kernels see it: its tuning row, SM count, and what its toolchain supports."""
    name: str
    row: Tuning
    sms: int
    nvrtc: bool  # the CUDA C kernels (cluster attention, streamed GEMVs) compile here

    def cuda_attention(self, cfg: ModelConfig) -> bool:  # kernels.cluster_attention.supported's rule
        return self.nvrtc and cfg.head_dim == 128 and cfg.num_heads // cfg.num_kv_heads <= 8


HOPPER = DeviceInfo("NVIDIA Hopper-like", (9, 0), 132, 227 << 10, 50 << 20)
AMPERE = DeviceInfo("NVIDIA A100-like", (8, 0), 108, 163 << 10, 40 << 20)
GPUS = {
    "h200": FakeGpu("h200", H200, 132, True),
    "h200-no-nvrtc": FakeGpu("h200-no-nvrtc", H200, 132, False),
    "generic-hopper": FakeGpu("generic-hopper", generic(HOPPER), 132, True),
    "generic-ampere": FakeGpu("generic-ampere", generic(AMPERE), 108, False),
}


def _t(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, dtype=dtype)  # untouched pages: a 7B-sized layer costs no memory


def _linear(n, k, fp8):
    if not fp8:
        return _t(n, k)
    if fp8 == "int8":
        return Int8Weight(_t(n, k, dtype=torch.int8), _t(n, k // 32, dtype=torch.float16))
    return Fp8Weight(_t(n, k, dtype=E4M3), _t(n, k // 32, dtype=torch.float32), _t(n, k // 32, dtype=torch.float32))


def fake_weights(cfg: ModelConfig, fp8: bool = False, fp8_lm_head: bool | str = False) -> ModelWeights:
    """fp8_lm_head: True (e4m3) or "int8" for an 8-bit head beside FP8 layers."""
    h, i, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    layers = [LayerWeights(attn_norm=_t(h), qkv=_linear(cfg.qkv_size, h, fp8),
                           qkv_bias=_t(cfg.qkv_size) if cfg.attention_bias else None,
                           q_norm=_t(hd) if cfg.qk_norm else None, k_norm=_t(hd) if cfg.qk_norm else None,
                           o=_linear(h, cfg.q_size, fp8), mlp_norm=_t(h), gate_up=_linear(2 * i, h, fp8),
                           down=_linear(h, i, fp8)) for _ in range(cfg.num_layers)]
    return ModelWeights(embed=_t(cfg.vocab_size, h), layers=layers, norm=_t(h),
                        lm_head=_linear(cfg.vocab_size, h, fp8 and fp8_lm_head))


class PerLayer(list):
    """A KV cache's per-layer tensors (KVCache.k[i] is a view; here each layer's is its own tensor)."""
    dtype = torch.bfloat16


def fake_state(cfg: ModelConfig, w: ModelWeights, pdl: bool = True) -> SimpleNamespace:
    """The runner state the step's launches read and write (FastRunner's buffers), on the CPU."""
    f32 = dict(dtype=torch.float32)
    return SimpleNamespace(
        cfg=cfg, w=w, pdl=pdl, x=_t(cfg.hidden_size, **f32), qkv=_t(cfg.qkv_size, **f32), attn=_t(cfg.q_size, **f32),
        h=_t(cfg.intermediate_size, **f32), logits=_t(cfg.vocab_size, **f32), token=_t(1, dtype=torch.int64),
        pos=_t(1, dtype=torch.int32), ring=_t(256, dtype=torch.int64), argmax_scratch=_t(2, dtype=torch.int64),
        mma_scratch=_t(17, dtype=torch.int64),
        cache=SimpleNamespace(k=PerLayer(_t(cfg.num_kv_heads, 64, cfg.head_dim) for _ in w.layers),
                              v=PerLayer(_t(cfg.num_kv_heads, 64, cfg.head_dim) for _ in w.layers)),
        model=SimpleNamespace(cos=_t(64, cfg.head_dim // 2, **f32), sin=_t(64, cfg.head_dim // 2, **f32)),
        scale=cfg.head_dim ** -0.5)


def tensor_names(state, layer: int | None = None) -> dict[str, torch.Tensor]:
    """Every tensor the step may pass, by a readable name; with `layer`, named as that layer's launches see
    them: its own weights and cache as L.* / k / v, the next layer's as next.*, the others L<i>.*."""
    buffers = ("x", "qkv", "attn", "h", "logits", "token", "pos", "ring", "argmax_scratch", "mma_scratch")
    names = {n: getattr(state, n) for n in buffers}
    names |= {"cos": state.model.cos, "sin": state.model.sin}
    w = state.w

    def prefix(i):
        return "L." if i == layer else "next." if layer is not None and i == layer + 1 else f"L{i}."

    for i, lw in enumerate(w.layers):
        kv = ("k", "v") if i == layer else (f"k{i}", f"v{i}")
        names |= {kv[0]: state.cache.k[i], kv[1]: state.cache.v[i]}
        for f in ("attn_norm", "qkv", "qkv_bias", "q_norm", "k_norm", "o", "mlp_norm", "gate_up", "down"):
            t = getattr(lw, f)
            if isinstance(t, Fp8Weight):
                p = f"{prefix(i)}{f}"
                names |= {f"{p}.q": t.q, f"{p}.scale": t.scale, f"{p}.offset": t.offset}
            elif t is not None:
                names[f"{prefix(i)}{f}"] = t
    names |= {"embed": w.embed, "norm": w.norm}
    if isinstance(w.lm_head, Int8Weight):
        names |= {"lm_head.q": w.lm_head.q, "lm_head.scale": w.lm_head.scale}
    elif isinstance(w.lm_head, Fp8Weight):
        names |= {"lm_head.q": w.lm_head.q, "lm_head.scale": w.lm_head.scale, "lm_head.offset": w.lm_head.offset}
    else:
        names["lm_head"] = w.lm_head
    return names


def describe(value, names: dict[str, torch.Tensor]) -> str:
    """A value as data: a named tensor, or a view into one (byte offset, shape, dtype), recursively for tuples."""
    if isinstance(value, torch.Tensor):
        for n, t in names.items():
            if value is t:
                return n
        p = value.data_ptr()
        for n, t in names.items():
            lo = t.data_ptr()
            if lo <= p < lo + t.numel() * t.element_size():
                return (f"{n}[+{p - lo}B {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
                        f"{'' if value.is_contiguous() else ' strided'}]")
        raise AssertionError(f"an unnamed tensor {tuple(value.shape)}")
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe(v, names) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, Tuning):
        return f"<tuning {value.name}>"
    if isinstance(value, float):
        return repr(round(value, 9))
    return repr(value)


def recorder(name: str, fn, calls: list):
    """A stand-in for kernel `fn` that appends (name, {parameter: value}) with every parameter bound (defaults
    applied; a **kwargs parameter's entries spread out)."""
    sig = inspect.signature(fn)

    def record(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        params = {}
        for p, v in bound.arguments.items():
            if sig.parameters[p].kind is inspect.Parameter.VAR_KEYWORD:
                params |= {k: v[k] for k in sorted(v)}
            else:
                params[p] = v
        calls.append((name, params))
    return record


def describe_calls(calls: list, state) -> list[str]:
    """The recorded launches as lines `kernel(arg=value, ...)`: five per layer (named from that layer's view,
    tensor_names(state, i)), then the LM head's."""
    per_layer = {i: tensor_names(state, i) for i in range(len(state.w.layers))}
    head = tensor_names(state)
    lines = []
    for n, (name, params) in enumerate(calls):
        names = per_layer.get(n // 5, head)
        lines.append(f"{name}({', '.join(f'{p}={describe(v, names)}' for p, v in params.items())})")
    return lines


# -- the plan, read as a spec ------------------------------------------------------------------------

DATA = json.loads((Path(__file__).parent / "data" / "step_launches.json").read_text())


def target(gpu: FakeGpu, cfg: ModelConfig, weights: str = "bf16") -> Target:
    """weights: bf16, fp8 (e4m3 layers and head), fp8-bf16-head, fp8-int8-head (the FP8 engine's)."""
    fp8 = weights != "bf16"
    return Target(sms=gpu.sms, cuda_attention=gpu.cuda_attention(cfg),
                  streamable=frozenset(STREAMED) if gpu.nvrtc and not fp8 else frozenset(),
                  fp8=fp8, fp8_lm_head=weights in ("fp8", "fp8-int8-head"), int8_lm_head=weights == "fp8-int8-head",
                  fp8_cuda=fp8 and gpu.nvrtc, cols=gpu.nvrtc and not fp8,
                  fp8_stream=frozenset(LINEAR_FIELDS) if fp8 and gpu.nvrtc else frozenset())


def plan_for(gpu: str, shape: str, weights: str = "bf16", attention: str = "auto", gemv: str = "auto"):
    cfg = model_config(shape)
    return choose(cfg, GPUS[gpu].row, target(GPUS[gpu], cfg, weights), attention, gemv)


def kwargs(launch) -> dict:
    return dict(launch.kwargs)


def test_h200_1_5b_streams_every_gemv_beside_the_cluster_attention_below_the_switch():
    plan = plan_for("h200", "qwen2.5-coder-1.5b")
    below, above = plan.at(1023), plan.at(1024)
    assert (plan.attention_mode, plan.gemv_mode, plan.switch) == ("auto", "auto", 1024)
    assert (below.attention_kind, below.gemv_kind) == ("cuda", "overlap")
    assert [getattr(below, s).kernel for s in below.SLOTS] == [
        "stream_rmsnorm_gemv", "cluster_attention", "stream_gemv_residual", "stream_gate_up_silu", "gemv_residual"]
    assert kwargs(below.qkv) == {"budget": 64 << 10, "early": True, "carveout": 100}
    assert kwargs(below.attention) == {"early": True, "carveout": 100}
    assert below.workspace == Workspace("cluster", splits=16, cluster=16)  # one cluster per kv head
    assert kwargs(below.o_proj) == {"budget": 80 << 10, "early": True, "carveout": 100, "l2_prefetch": ()}
    assert kwargs(below.gate_up) == {"budget": 164 << 10, "carveout": 100, "skew": (32, 16)}
    assert kwargs(below.down)["l2_prefetch"] == Prefetch("next", 2 << 20)
    assert (above.attention_kind, above.gemv_kind) == ("triton", "triton")
    assert [getattr(above, s).kernel for s in above.SLOTS] == [
        "rmsnorm_gemv", "decode_attention", "gemv_residual", "rmsnorm_gate_up_silu", "gemv_residual"]
    assert above.workspace == Workspace("split_kv")


def test_beyond_stream_max_hidden_only_o_proj_streams_and_prefetches_gate_up_into_l2():
    below = plan_for("h200", "qwen2.5-coder-3b").at(0)
    assert [getattr(below, s).kernel for s in below.SLOTS] == [
        "rmsnorm_gemv", "cluster_attention", "stream_gemv_residual", "rmsnorm_gate_up_silu", "gemv_residual"]
    assert kwargs(below.attention) == {"early": True, "carveout": None}
    assert kwargs(below.o_proj) == {"budget": 80 << 10, "early": False, "carveout": None,
                                    "l2_prefetch": Prefetch("gate_up_head", 6 << 20)}


def test_the_gate_up_skew_is_dropped_where_a_cta_would_lose_too_much():
    row = GPUS["h200"].row
    cfg = replace(model_config("qwen2.5-coder-1.5b"), intermediate_size=4 * 16 * 132 - 16)
    plan = choose(cfg, row, target(GPUS["h200"], cfg))
    assert kwargs(plan.at(0).gate_up)["skew"] == (0, 0)


def test_the_generic_row_runs_triton_only_even_where_cuda_kernels_would_compile():
    plan = plan_for("generic-hopper", "qwen2.5-coder-1.5b")
    assert (plan.attention_mode, plan.gemv_mode) == ("triton", "triton")
    assert plan.at(0) == plan.at(10 ** 6)
    assert kwargs(plan.at(0).down)["l2_prefetch"] == Prefetch("next", 2 << 20)  # 2 MB per 50 MB of L2
    assert kwargs(plan_for("generic-ampere", "qwen2.5-coder-1.5b").at(0).down)["l2_prefetch"] is None  # pre-Hopper


def test_forced_cuda_attention_runs_at_every_position_with_clusters_for_any_context():
    plan = plan_for("h200", "qwen2.5-coder-1.5b", attention="cuda")
    assert plan.at(0) == plan.at(10 ** 6)
    assert plan.at(0).workspace == Workspace("cluster", splits=None, cluster=16)  # the GPU's default splits


def test_an_int8_lm_head_runs_cuda_c_logits_beside_the_cuda_fp8_gemvs_and_triton_elsewhere():
    """The FP8 engine's int8 head: kernels.fp8_cuda_gemv's logits (+ a Triton argmax launch) where the layers run
    the CUDA FP8 GEMVs; the Triton 8-bit head with the Triton GEMVs or without NVRTC."""
    p = plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8-int8-head").at(0)
    assert (p.lm_head.kernel, p.lm_head_argmax.kernel) == ("fp8_cuda_rmsnorm_gemv", "fp8_cuda_lm_head_argmax")
    for p in (plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8-int8-head", gemv="triton").at(0),
              plan_for("h200-no-nvrtc", "qwen2.5-coder-1.5b", weights="fp8-int8-head").at(0)):
        assert (p.lm_head.kernel, p.lm_head_argmax.kernel) == ("fp8_rmsnorm_gemv", "fp8_lm_head_argmax")


def test_fp8_weights_plan_the_cuda_fp8_gemvs_at_every_position():
    """The CUDA C FP8 GEMVs, of which the row's fp8_stream weights (o_proj, gate/up, down_proj) streamed; QKV
    releases the attention and o_proj gate/up right after their PDL waits."""
    plan = plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8")
    assert plan.gemv_mode == "cuda"
    for pos in (0, 1024):
        p = plan.at(pos)
        assert p.gemv_kind == "cuda"
        assert [getattr(p, s).kernel for s in ("qkv", "o_proj", "gate_up", "down", "lm_head", "lm_head_argmax")] == [
            "fp8_cuda_rmsnorm_gemv", "fp8_stream_gemv_residual", "fp8_stream_rmsnorm_gate_up_silu",
            "fp8_stream_gemv_residual", "fp8_rmsnorm_gemv", "fp8_lm_head_argmax"]  # an e4m3 head stays Triton
        assert kwargs(p.down)["l2_prefetch"] == Prefetch("next_bytes", 2 << 20)
        assert kwargs(p.qkv)["early"] is True and kwargs(p.o_proj)["early"] is True
    assert (plan.at(0).attention_kind, plan.at(1024).attention_kind) == ("cuda", "triton")
    # the CUDA attention releases o_proj at its start (the row's fp8_attention_early): its CTAs load weights beside it
    assert kwargs(plan.at(0).attention)["early"] is True
    assert kwargs(plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8", gemv="triton").at(0).attention)["early"] is False
    assert plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8", gemv="overlap").gemv_mode == "cuda"
    # FastRunner.use_attention passes the plan's resolved gemv mode back in
    assert plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8", attention="triton", gemv=plan.gemv_mode) == \
        plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8", attention="triton")


def test_the_row_streams_the_fp8_weights_it_names_where_every_layer_allows():
    """Tuning.fp8_stream names the weights whose FP8 GEMVs are kernels.fp8_stream_gemv; only those the target
    allows in every layer (K a multiple of 128) up to the row's fp8_stream_max_k; the rest stay
    kernels.fp8_cuda_gemv; the H200 row: o_proj, gate/up and down (not the 3B's down: K = 11008)."""
    cfg = model_config("qwen2.5-coder-1.5b")
    gpu = GPUS["h200"]
    row = replace(gpu.row, fp8_stream=("gate_up", "down"))
    slots = ("qkv", "o_proj", "gate_up", "down")
    allowed = replace(target(gpu, cfg, "fp8"), fp8_stream=frozenset({"qkv", "o", "gate_up", "down"}))
    p = choose(cfg, row, allowed, "auto", "auto").at(0)
    assert [getattr(p, s).kernel for s in slots] == ["fp8_cuda_rmsnorm_gemv", "fp8_cuda_gemv_residual",
                                                     "fp8_stream_rmsnorm_gate_up_silu", "fp8_stream_gemv_residual"]
    assert kwargs(p.down)["l2_prefetch"] == Prefetch("next_bytes", 2 << 20)
    only_gate_up = replace(allowed, fp8_stream=frozenset({"gate_up"}))
    p = choose(cfg, row, only_gate_up, "auto", "auto").at(0)
    assert [getattr(p, s).kernel for s in ("gate_up", "down")] == ["fp8_stream_rmsnorm_gate_up_silu",
                                                                   "fp8_cuda_gemv_residual"]
    default = choose(cfg, gpu.row, allowed, "auto", "auto").at(0)
    assert [s for s in slots if getattr(default, s).kernel.startswith("fp8_stream")] == ["o_proj", "gate_up", "down"]
    cfg_3b = model_config("qwen2.5-coder-3b")  # down_proj's K = 11008 > fp8_stream_max_k: not streamed
    p = choose(cfg_3b, gpu.row, replace(target(gpu, cfg_3b, "fp8"), fp8_stream=allowed.fp8_stream), "auto", "auto").at(0)
    assert [s for s in slots if getattr(p, s).kernel.startswith("fp8_stream")] == ["o_proj", "gate_up"]
    generic_row = choose(cfg, GPUS["generic-hopper"].row, allowed, "auto", "auto")
    assert generic_row.gemv_mode == "triton"  # the generic row keeps the Triton FP8 kernels


def test_fp8_weights_fall_back_to_their_triton_twins():
    for plan in (plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8", gemv="triton"),
                 plan_for("h200-no-nvrtc", "qwen2.5-coder-1.5b", weights="fp8"),
                 plan_for("generic-hopper", "qwen2.5-coder-1.5b", weights="fp8")):  # the row says no
        below = plan.at(0)
        assert plan.gemv_mode == "triton" and below.gemv_kind == "triton"
        assert [getattr(below, s).kernel for s in ("qkv", "o_proj", "gate_up", "down")] == [
            "fp8_rmsnorm_gemv", "fp8_gemv_residual", "fp8_rmsnorm_gate_up_silu", "fp8_gemv_residual"]
        assert kwargs(below.down)["l2_prefetch"] == Prefetch("next_bytes", 2 << 20)
    with pytest.raises(ValueError, match="CUDA FP8 GEMVs need"):
        plan_for("h200-no-nvrtc", "qwen2.5-coder-1.5b", weights="fp8", gemv="overlap")


def test_gemv_mma_plans_the_tensor_core_gemvs_beside_the_requested_attention():
    """A speculating run's plain steps: the MMA GEMVs (the verify step's, on one column) and, for its LM head,
    the argmax with its own per-column scratch; FP8 weights refuse them."""
    plan = plan_for("h200", "qwen2.5-coder-1.5b", attention="triton", gemv="mma")
    p = plan.at(0)
    assert plan.gemv_mode == "mma" and plan.at(5000) == p and (p.attention_kind, p.gemv_kind) == ("triton", "mma")
    assert [getattr(p, s).kernel for s in p.SLOTS + ("lm_head", "lm_head_argmax")] == [
        "rmsnorm_gemv_mma", "decode_attention", "gemv_residual_mma", "rmsnorm_gate_up_silu_mma", "gemv_residual_mma",
        "rmsnorm_gemv_mma", "lm_head_argmax_mma"]
    cfg = model_config("qwen2.5-coder-1.5b")
    state = fake_state(cfg, fake_weights(cfg, False, False))
    calls = []
    step = bind_step(p, state, "ws", {n: recorder(n, f, calls) for n, f in KERNELS.items()})
    step.lm_head_argmax()
    assert calls[0][1]["scratch"] is state.mma_scratch and calls[0][1]["x"] is state.x
    with pytest.raises(ValueError, match="no MMA GEMVs"):
        plan_for("h200", "qwen2.5-coder-1.5b", weights="fp8", gemv="mma")


def test_gemv_cols_plans_the_cuda_column_gemvs_where_the_gpu_runs_them():
    """The CUDA column GEMVs (kernels.cols_gemv) for a speculating run's plain steps, with the column LM head's
    scratch; refused without NVRTC and for FP8 weights; the row's one-launch GEMVs up to its cols_gemv_max_hidden."""
    plan = plan_for("h200", "smollm2-135m", attention="triton", gemv="cols")
    p = plan.at(0)
    assert plan.gemv_mode == "cols" and (p.attention_kind, p.gemv_kind) == ("triton", "cols")
    assert [getattr(p, s).kernel for s in p.SLOTS + ("lm_head", "lm_head_argmax")] == [
        "cols_rmsnorm_gemv", "decode_attention", "cols_gemv_residual", "cols_rmsnorm_gate_up_silu",
        "cols_gemv_residual", "cols_rmsnorm_gemv", "cols_lm_head_argmax"]
    cfg = model_config("smollm2-135m")
    state = fake_state(cfg, fake_weights(cfg, False, False))
    calls = []
    step = bind_step(p, state, "ws", {n: recorder(n, f, calls) for n, f in KERNELS.items()})
    step.lm_head_argmax()
    assert calls[0][1]["scratch"] is state.mma_scratch and calls[0][1]["x"] is state.x
    with pytest.raises(ValueError, match="CUDA column GEMVs need"):
        plan_for("h200-no-nvrtc", "smollm2-135m", gemv="cols")
    with pytest.raises(ValueError, match="no column GEMVs"):
        plan_for("h200", "smollm2-135m", weights="fp8", gemv="cols")
    gpu = GPUS["h200"]
    assert choose(cfg, gpu.row, target(gpu, cfg)).at(0).gemv_kind == "cols"  # Triton attention (head_dim 64): auto
    assert plain_gemv(gpu.row, target(GPUS["h200-no-nvrtc"], cfg), cfg.hidden_size) == "triton"
    big = model_config("qwen2.5-coder-1.5b")  # hidden 1536: above the row's cols_gemv_max_hidden
    assert plain_gemv(gpu.row, target(gpu, big), big.hidden_size) == "triton"
    assert plain_gemv(gpu.row.with_gemv_family("cols"), target(gpu, big), big.hidden_size) == "cols"


def test_a_speculating_run_streams_its_gemvs_where_every_weight_but_down_proj_streams():
    """plan.verify_gemv: "overlap" (kernels.stream_gemv, k tokens a launch in the verify step) where the row says
    stream_verify and streams QKV and gate/up at this hidden size on a GPU that runs them; the CUDA column GEMVs
    keep the small models; elsewhere the one-launch GEMVs."""
    gpu = GPUS["h200"]
    big, small, wide = (model_config(s) for s in ("qwen2.5-coder-1.5b", "smollm2-135m", "qwen2.5-coder-3b"))
    assert verify_gemv(gpu.row, target(gpu, big), big) == "overlap"
    assert verify_gemv(gpu.row, target(gpu, small), small) == "cols"
    assert verify_gemv(gpu.row, target(gpu, wide), wide) == "triton"  # hidden 2048: QKV and gate/up do not stream
    assert verify_gemv(replace(gpu.row, stream_verify=False), target(gpu, big), big) == "triton"
    assert verify_gemv(gpu.row, target(GPUS["h200-no-nvrtc"], big), big) == "triton"
    assert verify_gemv(gpu.row.with_gemv_family("mma"), target(gpu, big), big) == "mma"
    assert verify_gemv(gpu.row.with_gemv_family("triton"), target(gpu, big), big) == "triton"
    plan = choose(big, gpu.row, target(gpu, big), "triton", "overlap")  # what its plain steps run
    p = plan.at(0)
    assert (p.attention_kind, p.gemv_kind) == ("triton", "overlap") and plan.at(4096) == p
    assert [getattr(p, s).kernel for s in p.SLOTS + ("lm_head", "lm_head_argmax")] == [
        "stream_rmsnorm_gemv", "decode_attention", "stream_gemv_residual", "stream_gate_up_silu",
        "stream_gemv_residual", "rmsnorm_gemv", "stream_lm_head_argmax"]
    # its verify steps' streamed launches take those launches' ring budgets and skew (they fix the order of sums)
    from inference.fast.runner import FastRunner
    from inference.speculative.fast_verify import streamed_launches

    runner = SimpleNamespace(cfg=big, tuning=gpu.row, target=target(gpu, big), attention_mode="auto", gemv_mode="auto")
    runner.speculative_kernels = FastRunner.speculative_kernels.fget(runner)
    assert streamed_launches(runner) == {
        "qkv": {"budget": gpu.row.qkv_budget}, "o_proj": {"budget": gpu.row.o_budget},
        "gate_up": {"budget": gpu.row.gate_up_budget, "skew": gpu.row.skew_for(big.intermediate_size, gpu.sms)},
        "down": {"ring": True, "budget": gpu.row.down_budget}, "lm_head_argmax": {"mma": True}}


def test_a_speculating_runs_down_proj_streams_its_activation_through_the_ring_in_plain_and_verify_steps():
    """stream_down: beside the Triton attention (a speculating run's plain steps) down_proj streams where QKV and
    gate/up do, its activation fed through the ring, prefetching the next weight's first bytes; the verify step's
    down_proj repeats that launch on k tokens. Beside the CUDA attention (the default step) it stays Triton."""
    gpu = GPUS["h200"]
    big, wide = model_config("qwen2.5-coder-1.5b"), model_config("qwen2.5-coder-3b")
    row = gpu.row
    assert row.stream_down
    p = choose(big, row, target(gpu, big), "triton", "overlap").at(0)
    assert p.down.kernel == "stream_gemv_residual"
    assert kwargs(p.down) == {"ring": True, "budget": row.down_budget, "carveout": row.stream_carveout,
                              "l2_prefetch": Prefetch("next_span", row.down_l2_prefetch)}
    default = choose(big, row, target(gpu, big)).at(0)
    assert (default.down.kernel, default.lm_head_argmax.kernel) == ("gemv_residual", "lm_head_argmax")
    assert choose(big, replace(row, stream_down=False), target(gpu, big), "triton", "overlap").at(0).down.kernel == \
        "gemv_residual"
    assert choose(wide, row, target(gpu, wide), "triton", "overlap").at(0).down.kernel == "gemv_residual"  # 2048
    assert verify_gemv(row, target(gpu, big), big) == "overlap"
    assert verify_gemv(row, replace(target(gpu, big), streamable=frozenset({"o", "qkv", "gate_up"})), big) == "triton"
    from inference.fast.runner import FastRunner
    from inference.speculative.fast_verify import streamed_launches

    runner = SimpleNamespace(cfg=big, tuning=row, target=target(gpu, big), attention_mode="auto", gemv_mode="auto")
    runner.speculative_kernels = FastRunner.speculative_kernels.fget(runner)
    assert streamed_launches(runner)["down"] == {"ring": True, "budget": row.down_budget}
    assert kwargs(p.lm_head_argmax) == {"mma": True, "carveout": row.stream_carveout}  # on tensor cores
    assert streamed_launches(runner)["lm_head_argmax"] == {"mma": True}  # the verify step's launches too
    runner.tuning = replace(row, head_mma=False)
    assert streamed_launches(runner)["lm_head_argmax"] == {}


@pytest.mark.parametrize("attention, gemv, message", [
    ("cuda", "auto", "head_dim 128"), ("flash", "auto", "auto, cuda or triton"), ("auto", "cublas", "auto, overlap")])
def test_modes_the_gpu_or_model_cannot_run_are_refused(attention, gemv, message):
    with pytest.raises(ValueError, match=message):
        plan_for("h200", "smollm2-135m", attention=attention, gemv=gemv)


def test_the_plan_is_data_chosen_once():
    a, b = plan_for("h200", "qwen2.5-coder-7b"), plan_for("h200", "qwen2.5-coder-7b")
    assert a == b and hash(a) == hash(b)
    text = "\n".join(a.describe())
    assert "stream_gemv_residual(budget=81920" in text and "<tuning h200>" in text


# -- the bound step launches what the runner launched before the plan ---------------------------------

def workspace_name(spec: Workspace) -> str:
    """The recorded stand-in for the workspace FastRunner builds from a spec."""
    if spec.kind == "cluster":
        return f"ClusterWorkspace(splits={spec.splits or 'default'}, cluster={spec.cluster})"
    return f"AttentionWorkspace(splits={spec.splits or 'default'})"


def launched(gpu: str, shape: str, weights: str, attention: str, gemv: str, pdl: bool = True) -> str:
    """The case as the data file writes it, from the plan and its bound step."""
    cfg = model_config(shape)
    w = fake_weights(cfg, weights != "bf16", {"fp8": True, "fp8-int8-head": "int8"}.get(weights, False))
    state = fake_state(cfg, w, pdl)
    try:
        plan = choose(cfg, GPUS[gpu].row, target(GPUS[gpu], cfg, weights), attention, gemv)
    except ValueError as e:
        return f"error: {e}"
    parts = [f"{plan.attention_mode}/{plan.gemv_mode} {plan.at(0).gemv_kind}"]
    for pos in (1023, 1024):
        p, calls = plan.at(pos), []
        step = bind_step(p, state, workspace_name(p.workspace), {n: recorder(n, f, calls) for n, f in KERNELS.items()})
        step.run_layers()  # FastRunner._layers
        step.lm_head()
        step.lm_head_argmax()
        parts.append(f"{pos} {p.attention_kind}/{p.gemv_kind}: " + " ; ".join(describe_calls(calls, state)))
    return " | ".join(parts)


def expected(case: str) -> str:
    """The data file's case with launch indices written out."""
    lines = DATA["launches"]
    return re.sub(r"(?<=: )\d+(?: \d+)*", lambda m: " ; ".join(lines[int(i)] for i in m.group().split()),
                  DATA["cases"][case])


GROUPS = sorted({" ".join(case.split()[:2]) for case in DATA["cases"]})


@pytest.mark.parametrize("group", GROUPS)
def test_the_bound_step_launches_what_the_runner_launched_before_the_plan(group):
    cases = [c for c in DATA["cases"] if c.startswith(group + " ")]
    assert cases
    for case in cases:
        gpu, shape, weights, modes, *flags = case.split()
        attention, gemv = modes.split("/")
        got = launched(gpu, shape, weights, attention, gemv, pdl="pdl=False" not in flags)
        assert got.split(" ; ") == expected(case).split(" ; "), case


def test_the_recorded_cases_cover_every_mode_shape_and_gpu():
    cases = [c.split() for c in DATA["cases"]]
    assert {c[0] for c in cases} == set(GPUS) and {c[1] for c in cases} == set(SHAPES)
    assert {c[2] for c in cases} == {"bf16", "fp8", "fp8-bf16-head", "fp8-int8-head"}
    assert {c[3] for c in cases if c[2] == "bf16"} == {f"{a}/{g}" for a in ("auto", "cuda", "triton")
                                                      for g in ("auto", "overlap", "triton")}
    assert sum(not v.startswith("error") for v in DATA["cases"].values()) >= 150


# -- on a GPU: the runner measures the target the fakes above assume ----------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("weights", ["bf16", "fp8"])
def test_a_real_runner_plans_as_the_fakes_assume(weights, tmp_path):
    """FastRunner's Target on this GPU is the fake GPU's of the same kind (an H100/H200 with NVRTC: "h200";
    otherwise nothing compiled), so the recorded cases above describe the step it runs; its plan is choose()'s."""
    from inference.engine import Engine
    from inference.synth import write_checkpoint
    from kernels import _cuda_rtc

    path = write_checkpoint("qwen2.5-coder-1.5b", tmp_path / "m", layers=2, device="cuda")
    runner = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=2048, weights=weights).runner
    cfg = runner.cfg
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gpu = FakeGpu("this", runner.tuning, sms, _cuda_rtc.available(runner.device))
    from inference.quant import LM_HEAD

    heads = {"int8": "fp8-int8-head", "fp8": "fp8"}
    engine_weights = "bf16" if weights == "bf16" else heads.get(LM_HEAD, "fp8-bf16-head")
    assert runner.target == target(gpu, cfg, engine_weights)
    assert runner.plan == choose(cfg, runner.tuning, runner.target)
    assert runner.step_plan() == runner.plan.at(0) and runner.layer_plan == runner.plan.at(0)
    if gpu.nvrtc and runner.tuning.name == "h200":
        assert (runner.step_plan().attention_kind, runner.step_plan().gemv_kind) == (
            "cuda", "overlap" if weights == "bf16" else "cuda")
    print("\n" + "\n".join(runner.plan.describe()))


@pytest.mark.parametrize("mma_gemv", [False, True])
@pytest.mark.parametrize("gpu, shape, triton_anyway, family", [
    ("h200", "smollm2-135m", True, "cols"),  # head_dim 64: Triton attention anyway; hidden 576: the column GEMVs
    ("h200", "qwen2.5-coder-1.5b", False, "overlap"),  # cluster attention + streamed GEMVs below the switch
    ("h200-no-nvrtc", "qwen2.5-coder-1.5b", True, None),  # no CUDA C here: Triton attention anyway
    ("generic-hopper", "qwen2.5-coder-3b", True, None),  # the generic row runs Triton attention only
])
def test_speculation_is_on_by_default_only_where_it_keeps_the_runners_kernels(gpu, shape, triton_anyway, family,
                                                                              mma_gemv):
    """FastRunner.speculation_keeps_kernels (the engine's default for `speculate`): a speculating request runs
    the Triton attention and plan.verify_gemv's GEMVs (the CUDA column GEMVs up to the row's cols_gemv_max_hidden,
    the streamed ones where every weight but down_proj streams, else Triton's, or the MMA ones where it says
    mma_gemv); that is the model's usual plan where it runs the Triton attention anyway, whichever the GEMVs."""
    from inference.fast.runner import FastRunner

    cfg = model_config(shape)
    runner = SimpleNamespace(cfg=cfg, tuning=replace(GPUS[gpu].row, mma_gemv=mma_gemv), can_verify=True,
                             target=target(GPUS[gpu], cfg), attention_mode="auto", gemv_mode="auto")
    runner.speculative_kernels = FastRunner.speculative_kernels.fget(runner)
    assert runner.speculative_kernels == ("triton", family or ("mma" if mma_gemv else "triton"))
    assert FastRunner.speculation_keeps_kernels.fget(runner) is triton_anyway
    runner._modes_before_speculation = ("auto", "auto")  # a speculating request switched it meanwhile
    runner.attention_mode, runner.gemv_mode = runner.speculative_kernels
    assert FastRunner.speculation_keeps_kernels.fget(runner) is triton_anyway
    runner.can_verify = False  # FP8 weights do not speculate
    assert FastRunner.speculation_keeps_kernels.fget(runner) is False


def test_a_row_with_mma_gemv_plans_the_mma_gemvs_where_it_would_plan_triton():
    cfg = model_config("qwen2.5-coder-1.5b")
    gpu = GPUS["h200"]
    plan = choose(cfg, replace(gpu.row, mma_gemv=True), target(gpu, cfg))
    assert (plan.at(0).gemv_kind, plan.at(5000).gemv_kind) == ("overlap", "mma")
    assert choose(cfg, replace(gpu.row, mma_gemv=True), target(gpu, cfg, "fp8")).at(5000).gemv_kind in ("cuda", "triton")
