"""Spec (GPU only): the decode kernels chained like one transformer layer step can be captured in a
CUDA graph (with and without PDL) and replayed with a different `pos` each time, giving the same
result as eager launches and as the plain PyTorch twins."""

import math

import pytest
import torch
from kernel_helpers import gpu, randn, rel_err

from kernels.decode_attention import AttentionWorkspace, decode_attention, decode_attention_ref, \
    default_num_splits, rope_tables
from kernels.gate_up_silu import rmsnorm_gate_up_silu, rmsnorm_gate_up_silu_ref
from kernels.gemv_residual import gemv_residual, gemv_residual_ref
from kernels.rmsnorm_gemv import rmsnorm_gemv, rmsnorm_gemv_ref

H, HQ, HKV, D, I, V, LAYERS, T_MAX, EPS = 1536, 12, 2, 128, 8960, 151936, 2, 2048, 1e-6
SCALE = 1.0 / math.sqrt(D)


def make_model(gen):
    bf = torch.bfloat16
    layers = [dict(
        attn_norm=randn(H, gen=gen, dtype=bf, device="cuda"),
        qkv=randn((HQ + 2 * HKV) * D, H, gen=gen, dtype=bf, device="cuda", scale=0.03),
        qkv_bias=randn((HQ + 2 * HKV) * D, gen=gen, dtype=bf, device="cuda", scale=0.1),
        o=randn(H, HQ * D, gen=gen, dtype=bf, device="cuda", scale=0.03),
        mlp_norm=randn(H, gen=gen, dtype=bf, device="cuda"),
        gate_up=randn(2 * I, H, gen=gen, dtype=bf, device="cuda", scale=0.03),
        down=randn(H, I, gen=gen, dtype=bf, device="cuda", scale=0.01),
    ) for _ in range(LAYERS)]
    head = dict(norm=randn(H, gen=gen, dtype=bf, device="cuda"),
                lm_head=randn(V, H, gen=gen, dtype=bf, device="cuda", scale=0.03))
    return layers, head


def make_state(gen):
    """Static buffers of one decode step (what a runner allocates once)."""
    cos, sin = rope_tables(T_MAX, D, theta=1e6, device="cuda")
    return dict(
        x_in=randn(H, gen=gen, device="cuda"), x=torch.empty(H, device="cuda"),
        pos=torch.zeros(1, dtype=torch.int32, device="cuda"),
        qkv=torch.empty((HQ + 2 * HKV) * D, device="cuda"), attn=torch.empty(HQ * D, device="cuda"),
        h=torch.empty(I, device="cuda"), logits=torch.empty(V, device="cuda"),
        k=randn(LAYERS, HKV, T_MAX, D, gen=gen, dtype=torch.bfloat16, device="cuda"),
        v=randn(LAYERS, HKV, T_MAX, D, gen=gen, dtype=torch.bfloat16, device="cuda"),
        cos=cos, sin=sin, ws=AttentionWorkspace(HQ, D, default_num_splits(HKV, "cuda"), "cuda"),
    )


def step(st, layers, head, pdl):
    st["x"].copy_(st["x_in"])
    for i, lw in enumerate(layers):
        rmsnorm_gemv(st["x"], lw["qkv"], st["qkv"], norm_w=lw["attn_norm"], eps=EPS, bias=lw["qkv_bias"], pdl=pdl)
        decode_attention(st["qkv"], st["pos"], st["k"][i], st["v"][i], st["cos"], st["sin"], st["attn"], st["ws"],
                         SCALE, pdl=pdl)
        gemv_residual(st["attn"], lw["o"], st["x"], pdl=pdl)
        rmsnorm_gate_up_silu(st["x"], lw["mlp_norm"], EPS, lw["gate_up"], st["h"], pdl=pdl)
        gemv_residual(st["h"], lw["down"], st["x"], pdl=pdl)
    rmsnorm_gemv(st["x"], head["lm_head"], st["logits"], norm_w=head["norm"], eps=EPS, pdl=pdl)


def step_ref(st, layers, head, p):
    """The same step with the PyTorch twins; updates the reference caches in st."""
    x = st["x_in"].clone()
    for i, lw in enumerate(layers):
        qkv = rmsnorm_gemv_ref(x, lw["qkv"], lw["attn_norm"], EPS, lw["qkv_bias"])
        attn, k_row, v_row = decode_attention_ref(qkv, p, st["k"][i], st["v"][i], st["cos"], st["sin"], SCALE)
        st["k"][i][:, p], st["v"][i][:, p] = k_row.to(st["k"].dtype), v_row.to(st["v"].dtype)
        x = gemv_residual_ref(attn, lw["o"], x)
        h = rmsnorm_gate_up_silu_ref(x, lw["mlp_norm"], EPS, lw["gate_up"])
        x = gemv_residual_ref(h, lw["down"], x)
    return rmsnorm_gemv_ref(x, head["lm_head"], head["norm"], EPS)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
def test_graph_replay_follows_pos_and_matches_eager_and_reference(pdl, gen):
    layers, head = make_model(gen)
    graph_st = make_state(gen)
    clone = lambda st: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in st.items()}  # noqa: E731
    eager_st, ref_st = clone(graph_st), clone(graph_st)
    eager_st["ws"] = AttentionWorkspace(HQ, D, graph_st["ws"].num_splits, "cuda")

    # Warm up (the Triton JIT compiles) on a scratch copy, off the default stream, then capture.
    scratch = clone(graph_st)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(scratch, layers, head, pdl)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(graph_st, layers, head, pdl)

    for p in [0, 1, 2, 63, 64, 65, 700, T_MAX - 1]:
        graph_st["pos"].fill_(p)
        eager_st["pos"].fill_(p)
        graph.replay()
        step(eager_st, layers, head, pdl)
        ref = step_ref(ref_st, layers, head, p)
        torch.cuda.synchronize()
        assert rel_err(graph_st["logits"], eager_st["logits"]) <= 1e-6, f"pos {p}: graph != eager"
        assert rel_err(graph_st["logits"], ref) <= 2e-2, f"pos {p}: graph != reference"
        assert torch.equal(graph_st["k"][:, :, p], eager_st["k"][:, :, p]), f"pos {p}: cache row differs"
