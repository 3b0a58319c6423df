"""Spec for kernels.stream_gemv (CUDA C, TMA bulk copies; Hopper GPUs only): the three GEMVs give
the answers of their Triton twins' references on the model shapes and on odd ones (rows not a
multiple of the grid or of a stage, K not a multiple of a chunk, fewer rows than SMs), with bf16
and fp16 weights, norm weights of any float dtype, PDL on or off; released early (PDL) inside a CUDA
graph replayed many times, they still read their inputs only when the previous op is done. CPU
machines check the launch plan only."""

import pytest
import torch
from kernel_helpers import HAS_CUDA, captured, needs_nvrtc, poisoned, randn, rel_err

from kernels import _cuda_rtc, stream_gemv as sg
from kernels.gate_up_silu import rmsnorm_gate_up_silu_ref
from kernels.gemv_residual import gemv_residual_ref
from kernels.gemv_residual_cols import gemv_residual_cols_ref
from kernels.rmsnorm_gemv import rmsnorm_gemv_ref

hopper = pytest.mark.skipif(
    not (HAS_CUDA and sg.supported(torch.zeros(16, 16, dtype=torch.bfloat16, device="cuda"))),
    reason="needs a CUDA GPU of compute capability >= 9.0 and NVRTC")


LAYER_1_5B = [("residual", 1536, 1536), ("gate_up", 8960, 1536), ("residual", 1536, 8960),
              ("rmsnorm_gemv", 2048, 1536)]
LAYER_3B = [("residual", 2048, 2048), ("gate_up", 11008, 2048), ("residual", 2048, 11008),
            ("rmsnorm_gemv", 2560, 2048)]


@pytest.mark.parametrize("op", [*LAYER_1_5B, *LAYER_3B, ("rmsnorm_gemv", 151936, 1536)])
def test_plan_fits_an_sm_with_wide_ring_slots(op):
    p = sg.plan(op, 132)
    assert p["smem"] + 1024 <= 227 * 1024
    assert p["stages"] >= 2 and p["grid"] <= min(132, op[1])
    assert p["kc"] >= 1024  # bulk copies of >= 2 KB per row: narrower ones starve the stream


def test_a_tiny_launch_still_gets_two_slots():
    p = sg.plan(("residual", 5, 16), 132)
    assert p["grid"] == 5 and p["stages"] >= 2 and p["kc"] == 128


@pytest.mark.parametrize("k", [16, 272, 768, 1536, 2048, 6144, 8960, 11008, 20000])
def test_a_ring_slot_gives_every_consumer_warp_whole_mma_steps(k):
    kc = sg.chunk(k)
    assert kc % (16 * sg.NWARP) == 0 and kc <= sg.MAX_KC
    slots = -(-k // kc)
    assert slots == -(-k // sg.MAX_KC)  # as few slots per row tile as the cap allows
    assert slots * kc - k < 16 * sg.NWARP * slots  # of about equal width: no narrow tail


def test_weights_it_cannot_stream_are_refused():
    assert not sg.supported(torch.zeros(4, 24, dtype=torch.bfloat16))  # K % 16 != 0 (and on CPU)
    assert not sg.supported(torch.zeros(4, 16))  # fp32


SHAPES = [(2048, 1536), (1536, 1536), (1536, 8960), (37, 1008), (300, 272), (1, 16)]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("wdtype,ndtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)])
@pytest.mark.parametrize("n,k", SHAPES)
def test_rmsnorm_gemv_matches_reference(n, k, wdtype, ndtype, pdl, gen):
    x = randn(k, gen=gen, device="cuda", scale=3.0)
    w = randn(n, k, gen=gen, dtype=wdtype, device="cuda", scale=0.05)
    norm_w = randn(k, gen=gen, dtype=ndtype, device="cuda")
    bias = randn(n, gen=gen, dtype=wdtype, device="cuda")
    for nw, b in ((norm_w, bias), (norm_w, None), (None, None)):
        out = poisoned(n, device="cuda")
        sg.stream_rmsnorm_gemv(x, w, out, norm_w=nw, eps=1e-6, bias=b, pdl=pdl)
        torch.cuda.synchronize()
        assert rel_err(out, rmsnorm_gemv_ref(x, w, nw, 1e-6, b)) <= 1e-5, (nw is None, b is None)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("wdtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,k", SHAPES)
def test_gemv_residual_adds_into_x_once(n, k, wdtype, gen):
    a = randn(k, gen=gen, device="cuda")
    w = randn(n, k, gen=gen, dtype=wdtype, device="cuda", scale=0.05)
    x = randn(n, gen=gen, device="cuda", scale=5.0)
    ref = gemv_residual_ref(a, w, x)
    assert sg.stream_gemv_residual(a, w, x, pdl=True) is x
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-5
    sg.stream_gemv_residual(a, w, x)
    torch.cuda.synchronize()
    assert rel_err(x, gemv_residual_ref(a, w, ref)) <= 1e-5


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("spans", [[(6 << 20,)], [(16,), (4096 * 2 + 48,)], [(3 << 20,), (131 * 16,)]])
def test_l2_prefetch_spans_leave_the_result_alone(spans, gen):
    """Spans of any size (fewer bytes than CTAs, odd multiples of 16, ending at their allocation's end)."""
    a = randn(2048, gen=gen, device="cuda")
    w = randn(2048, 2048, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    x = randn(2048, gen=gen, device="cuda", scale=5.0)
    other = [randn(n // 2, gen=gen, dtype=torch.bfloat16, device="cuda") for (n,) in spans]
    kept = [t.clone() for t in other]
    ref = gemv_residual_ref(a, w, x)
    sg.stream_gemv_residual(a, w, x, pdl=True, budget=80 * 1024, l2_prefetch=tuple(other))
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-5
    assert all(torch.equal(t, k) for t, k in zip(other, kept))


@pytest.mark.gpu
@hopper
def test_l2_prefetch_spans_must_be_aligned_whole_16_bytes():
    a, x = torch.zeros(16, device="cuda"), torch.zeros(16, device="cuda")
    w = torch.zeros(16, 16, dtype=torch.bfloat16, device="cuda")
    span = torch.zeros(64, dtype=torch.bfloat16, device="cuda")
    for bad in [(span[:7],), (span[1:9],), (span, span, span)]:
        with pytest.raises(AssertionError):
            sg.stream_gemv_residual(a, w, x, l2_prefetch=bad)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("wdtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("i,k", [(8960, 1536), (6144, 2048), (11008, 2048), (131, 272), (3, 16)])
def test_gate_up_silu_matches_reference(i, k, wdtype, gen):
    x = randn(k, gen=gen, device="cuda", scale=3.0)
    norm_w = randn(k, gen=gen, dtype=wdtype, device="cuda")
    w = randn(2 * i, k, gen=gen, dtype=wdtype, device="cuda", scale=0.05)
    out = poisoned(i, device="cuda")
    sg.stream_gate_up_silu(x, norm_w, 1e-6, w, out, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, w)) <= 1e-5


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("skew", [(32, 16), (132, 3), (1, 60)])
def test_a_skewed_split_still_computes_every_unit_once(skew, gen):
    """skew=(late, deficit): the last CTAs take fewer gate/up units, the first more; every output is
    still written, and equals the reference (the output starts poisoned)."""
    i, k = 8960, 1536
    x = randn(k, gen=gen, device="cuda", scale=3.0)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16, device="cuda")
    w = randn(2 * i, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    out = poisoned(i, device="cuda")
    sg.stream_gate_up_silu(x, norm_w, 1e-6, w, out, pdl=True, budget=164 * 1024, carveout=100, skew=skew)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, w)) <= 1e-5


def test_a_skew_that_leaves_a_cta_without_units_is_refused():
    with pytest.raises(AssertionError, match="skew"):
        sg.plan(("gate_up", 8960, 1536), 132, skew=(32, 100))


def mlp_ref(x, norm_w, wgu, wd):
    return gemv_residual_ref(rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, wgu), wd, x)


def check_replays(graph, x, x0, ref, times):
    """Replay `graph` `times` times from x = x0: x within 1e-4 of ref."""
    for _ in range(times):
        x.copy_(x0)
        graph.replay()
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-4


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("ring", [False, True])
@pytest.mark.parametrize("h,i", [(1536, 8960), (2048, 6144)])
def test_ops_released_early_in_a_graph_match_the_references(h, i, ring, gen):
    """early=True (the next kernel launches at once, its CTAs loading weights beside these): o_proj
    and gate/up released early (with the runner's rings and all-shared carveout), then down_proj (its activation
    staged, or fed through the ring by its producer), four layers in one CUDA graph replayed 10 times, give the
    references: every op still reads its input only when the previous op is done."""
    def w(n, k):
        return randn(n, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.02)
    layers = [(w(h, h), w(2 * i, h), w(h, i), randn(h, gen=gen, dtype=torch.bfloat16, device="cuda"))
              for _ in range(4)]
    a, x0 = randn(h, gen=gen, device="cuda"), randn(h, gen=gen, device="cuda")
    x, hid = x0.clone(), torch.zeros(i, device="cuda")

    def layer_stack():
        for wo, wgu, wd, nw in layers:
            sg.stream_gemv_residual(a, wo, x, pdl=True, budget=80 * 1024, early=True, carveout=100)
            sg.stream_gate_up_silu(x, nw, 1e-6, wgu, hid, pdl=True, budget=164 * 1024, early=True, carveout=100)
            sg.stream_gemv_residual(hid, wd, x, pdl=True, ring=ring)

    ref = x0.clone()
    for wo, wgu, wd, nw in layers:
        ref = mlp_ref(gemv_residual_ref(a, wo, ref), nw, wgu, wd)
    check_replays(captured(layer_stack), x, x0, ref, 10)


# -- several tokens a launch (a speculative verify step's columns) ------------------------------------------------

@pytest.mark.parametrize("op", [*LAYER_1_5B, *LAYER_3B])
@pytest.mark.parametrize("budget", [64 << 10, 80 << 10, 164 << 10, None])
def test_more_tokens_keep_a_one_token_launchs_slot_width(op, budget):
    """The slot width fixes the order in which a token's products are summed, so every token count gets the
    one-token launch's; the tokens' staged activations (and gate/up's sums) take ring stages instead, down to two."""
    one = sg.plan(op, 132, budget)
    for t in (2, 3, 8, 16):
        p = sg.plan((*op, t), 132, budget)
        assert p["kc"] == one["kc"] and p["grid"] == one["grid"]
        assert p["stages"] >= 2
        if op[0] == "gate_up":  # its tokens' sums and fragments take ring stages
            assert p["sums"] == one["sums"] and p["stages"] <= one["stages"]
        else:  # consume_cc keeps its sums in registers
            assert p["sums"] == 0


def test_eight_tokens_of_the_1_5b_gemvs_a_step_streams_fit_one_cta():
    """QKV, o_proj, gate/up and the LM head (down_proj's 8 x 8,960 staged activations do not fit: its activation
    goes through the ring, residual_ring; nor the 3B's gate/up)."""
    for op in [("residual", 1536, 1536), ("gate_up", 8960, 1536), ("rmsnorm_gemv", 2048, 1536),
               ("rmsnorm_gemv", 151936, 1536)]:
        assert sg.plan((*op, 8), 132)["smem"] <= sg.SMEM_MAX, op
    assert sg.plan(("residual", 1536, 8960, 8), 132)["smem"] > sg.SMEM_MAX
    assert sg.plan(("gate_up", 11008, 2048, 8), 132)["smem"] > sg.SMEM_MAX


@needs_nvrtc
@pytest.mark.parametrize("tokens", [1, 2, 3, 8])
@pytest.mark.parametrize("sig", [("rmsnorm_gemv", 0, 0, 1536), ("residual", -1, -1, 8960), ("gate_up", 0, -1, 1536)])
def test_token_variants_compile_for_sm90a(sig, tokens):
    src, name = sg.source(sig, False, 2, 1152, 1536, tokens=tokens)
    assert f"#define NTOK {tokens}\n" in src
    assert len(_cuda_rtc.nvrtc_compile(src, "sm_90a", ("--use_fast_math",))) > 0


@needs_nvrtc
def test_a_fused_reduction_with_several_tokens_does_not_compile():
    src, _ = sg.source(("gate_up", 0, -1, 1536), False, 2, 1152, 1536, fuse=2, world=2, tokens=2)
    with pytest.raises(_cuda_rtc.CudaError, match="one token a launch"):
        _cuda_rtc.nvrtc_compile(src, "sm_90a", ("--use_fast_math",))


TOKEN_SHAPES = [(2048, 1536), (1536, 1536), (37, 1008), (300, 272)]


def _one_token_launches(fn, acts, outs):
    for a, o in zip(acts, outs):
        fn(a, o)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("tokens", [2, 3, 8])
@pytest.mark.parametrize("n,k", TOKEN_SHAPES)
@pytest.mark.parametrize("mode", ["rmsnorm_gemv", "residual", "gate_up"])
def test_each_of_several_tokens_gets_the_bits_of_its_own_one_token_launch(mode, n, k, tokens, gen):
    budget = 64 << 10  # a step's small ring: the tokens then take the fewest stages
    x = randn(tokens, k, gen=gen, device="cuda", scale=3.0)
    x[1] *= 1e-3  # tokens of very different scales
    w = randn(2 * n if mode == "gate_up" else n, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16, device="cuda")
    bias = randn(n, gen=gen, dtype=torch.bfloat16, device="cuda")
    if mode == "rmsnorm_gemv":
        def run(a, o):
            sg.stream_rmsnorm_gemv(a, w, o, norm_w=norm_w, eps=1e-6, bias=bias, budget=budget, pdl=True)
        start = poisoned(tokens, n, device="cuda")
    elif mode == "residual":
        def run(a, o):
            sg.stream_gemv_residual(a, w, o, budget=budget, pdl=True)
        start = randn(tokens, n, gen=gen, device="cuda", scale=5.0)
    else:
        def run(a, o):
            sg.stream_gate_up_silu(a, norm_w, 1e-6, w, o, budget=budget, pdl=True)
        start = poisoned(tokens, n, device="cuda")
    many, one = start.clone(), start.clone()
    run(x, many)
    _one_token_launches(run, x, one)
    torch.cuda.synchronize()
    assert torch.equal(many, one)
    assert not many.isnan().any()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("n,k,tokens", [(1536, 8960, 2), (1536, 4480, 4), (300, 272, 16)])
def test_a_residual_gemv_of_down_projs_shapes_gives_each_token_its_bits(n, k, tokens, gen):
    """down_proj's long K (the 1.5B's, a TP=2 rank's) as far as the tokens' staged activations fit; 16 tokens."""
    a = randn(tokens, k, gen=gen, device="cuda")
    w = randn(n, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    x = randn(tokens, n, gen=gen, device="cuda", scale=5.0)
    many, one = x.clone(), x.clone()
    sg.stream_gemv_residual(a, w, many, pdl=True)
    for t in range(tokens):
        sg.stream_gemv_residual(a[t], w, one[t], pdl=True)
    torch.cuda.synchronize()
    assert torch.equal(many, one)
    assert rel_err(many, gemv_residual_cols_ref(a, w, x)) <= 1e-5


# -- residual_ring: the activation fed through the ring (down_proj over several tokens) ---------------------------

@pytest.mark.parametrize("budget", [64 << 10, 100 << 10, None])
@pytest.mark.parametrize("tokens", [1, 2, 8, 16])
@pytest.mark.parametrize("k", [272, 1536, 4480, 8960, 11008])
def test_ring_slots_are_whole_512_column_pairs_and_fit_the_budget(k, tokens, budget):
    """A lane's order of sums does not depend on a slot width that is a multiple of 512, so the ring takes any."""
    p = sg.plan(("residual_ring", 1536, k, tokens), 132, budget)
    assert p["kc"] % sg.RING_KC == 0 and p["stages"] >= 2
    assert p["smem"] <= (budget or sg.SMEM_BUDGET) or (p["stages"] == 2 and p["kc"] == sg.RING_KC)  # the least
    assert p["smem"] <= sg.SMEM_MAX


def test_down_projs_eight_and_sixteen_tokens_fit_one_cta_through_the_ring():
    for t in (8, 16):
        assert sg.plan(("residual_ring", 1536, 8960, t), 132)["smem"] <= sg.SMEM_MAX
        assert sg.plan(("residual_ring", 2048, 11008, t), 132)["smem"] <= sg.SMEM_MAX


@needs_nvrtc
@pytest.mark.parametrize("tokens", [1, 3, 8])
@pytest.mark.parametrize("sig", [("residual_ring", -1, -1, 8960), ("rmsnorm_gemv_mma", 0, -1, 1536),
                                 ("rmsnorm_gemv_mma", 0, 0, 1536)])
def test_ring_and_tensor_core_variants_compile_for_sm90a(sig, tokens):
    p = sg.plan((sig[0], 151936, sig[3], tokens), 132)
    src, name = sg.source(sig, False, p["stages"], p["sums"], p["kc"], tokens=tokens)
    assert f"#define ACT_RING {int('ring' in sig[0])}\n" in src and name == sg.MODES[sig[0]][1]
    assert len(_cuda_rtc.nvrtc_compile(src, "sm_90a", ("--use_fast_math",))) > 0


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("n,k", [(1536, 8960), (2048, 11008), (1536, 1536), (37, 1008), (300, 272)])
def test_a_ring_fed_gemv_gives_every_token_the_bits_of_its_one_token_launch_at_any_budget(n, k, gen):
    """Tokens 2, 3, 8 and 16 a launch, budgets of different slot widths: every token the bits of the one-token
    launch at the widest budget."""
    w = randn(n, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    a = randn(16, k, gen=gen, device="cuda", scale=3.0)
    a[1] *= 1e-3  # tokens of very different scales
    x = randn(16, n, gen=gen, device="cuda", scale=5.0)
    one = x.clone()
    for t in range(16):
        sg.stream_gemv_residual(a[t], w, one[t], ring=True, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(one, gemv_residual_cols_ref(a, w, x)) <= 1e-5
    for tokens in (2, 3, 8, 16):
        for budget in (64 << 10, 100 << 10, 200 << 10):
            many = x[:tokens].clone()
            sg.stream_gemv_residual(a[:tokens], w, many, ring=True, pdl=True, budget=budget)
            torch.cuda.synchronize()
            assert torch.equal(many, one[:tokens]), (tokens, budget)


def test_a_ring_fed_warp_takes_no_more_rows_than_its_ctas_tile_holds():
    assert sg.plan(("residual_ring", 1536, 8960, 8), 132)["rw"] == 3  # the 1.5B's down_proj: 11-12 rows a CTA
    assert sg.plan(("residual_ring", 2048, 11008, 8), 132)["rw"] == 4  # 15-16
    assert sg.plan(("residual_ring", 3000, 8960, 1), 132)["rw"] == 4  # two tiles a CTA
    assert sg.plan(("residual_ring", 300, 272, 2), 132)["rw"] == 1


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("tokens", [1, 8])
def test_a_ring_fed_rows_sums_do_not_depend_on_the_cta_or_warp_taking_it(tokens, gen):
    """The 1.5B's down_proj (three rows a warp) and the same rows inside a taller weight (four a warp, other CTAs):
    the same bits for every row."""
    w = randn(2048, 8960, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    a = randn(tokens, 8960, gen=gen, device="cuda", scale=3.0)
    x = randn(tokens, 2048, gen=gen, device="cuda", scale=5.0)
    one = (lambda t: t[0]) if tokens == 1 else (lambda t: t)
    short, tall = x[:, :1536].clone(), x.clone()
    sg.stream_gemv_residual(one(a), w[:1536], one(short), ring=True, pdl=True)
    sg.stream_gemv_residual(one(a), w, one(tall), ring=True, pdl=True)
    torch.cuda.synchronize()
    assert torch.equal(short, tall[:, :1536])


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("n,k", [(2048, 1536), (151936, 1536), (37, 1008), (300, 272)])
def test_a_normalizing_gemv_on_tensor_cores_gives_every_token_its_one_token_bits(n, k, gen):
    """rmsnorm_gemv_mma (a speculating run's LM head): tokens 2, 3 and 8 a launch, the reference within 1e-4."""
    w = randn(n, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16, device="cuda")
    bias = randn(n, gen=gen, dtype=torch.bfloat16, device="cuda")
    x = randn(8, k, gen=gen, device="cuda", scale=3.0)
    x[1] *= 1e-3
    one = poisoned(8, n, device="cuda")
    for t in range(8):
        sg.stream_rmsnorm_gemv(x[t], w, one[t], norm_w=norm_w, eps=1e-6, bias=bias, mma=True, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(one, torch.stack([rmsnorm_gemv_ref(x[t], w, norm_w, 1e-6, bias) for t in range(8)])) <= 1e-4
    for tokens in (2, 3, 8):
        many = poisoned(tokens, n, device="cuda")
        sg.stream_rmsnorm_gemv(x[:tokens], w, many, norm_w=norm_w, eps=1e-6, bias=bias, mma=True, pdl=True)
        torch.cuda.synchronize()
        assert torch.equal(many, one[:tokens]), tokens
