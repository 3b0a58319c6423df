"""Spec for the CUDA GEMVs of 1..16 columns (kernels/cols_gemv.py; kernels/csrc/cols_gemv.cu on CUDA cores,
cols_gemv_mma.cu on tensor cores, the "fma" and "mma" families of these tests): each equals
its PyTorch twin (kernels.gemv_mma_cols' references) to float32 precision, and a column's output is the same bits
whatever the other columns are and however many there are (1, 2, 3, 4, 8, 16; with column groups where the staged
columns outgrow a CTA's shared memory): what makes a verify step's column equal the plain step. The LM head
launch votes the argmax per column (ties to the lowest row), accepts the draft's agreeing prefix and feeds its
token as kernels.lm_head_mma_cols does. The kernels on Hopper GPUs only (NVRTC; the 135M default model's and the
1.5B's shapes); the launch rules everywhere.
"""

import pytest
import torch
from kernel_helpers import DEVICE, poisoned, randn, rel_err

from kernels import _cuda_rtc
from kernels.cols_gemv import (Config, bits_key, cols_gemv_residual, cols_lm_head_argmax, cols_rmsnorm_gate_up_silu,
                               cols_rmsnorm_gemv, column_groups, config_for, default_config, mma_config_for, mma_fits)
from kernels.gemv_mma_cols import gemv_residual_mma_ref, rmsnorm_gate_up_silu_mma_ref, rmsnorm_gemv_mma_ref
from kernels.lm_head_mma_cols import lm_head_argmax_mma_ref, mma_scratch

HOPPER = pytest.mark.skipif(not (torch.cuda.is_available() and _cuda_rtc.available()),
                            reason="the CUDA column GEMVs need a Hopper GPU with NVRTC")

WIDTHS = [1, 2, 3, 4, 8, 16]
SHAPES = [(960, 576), (576, 1536), (2048, 1536), (1536, 8960)]  # 135M QKV, down; 1.5B QKV, down (column groups)
DTYPES = [torch.bfloat16, torch.float16]
TOL = {"fma": 1e-5,  # relative error vs the float32 twin (float32 sums in another order)
       "mma": 3e-5}  # three bf16 parts of the activation, the tensor core's float32 sums (tests/kernels/test_mma_cols.py)
FAMILIES = ["fma", "mma"]


def family_config(family, mode, n, k, dtype=torch.bfloat16):
    """The launch config of `family` for a weight (None: the launchers' rule per column count, CUDA cores but
    for a bf16 LM head); skips what the tensor-core kernel does not take (fp16 weights, K over its shared
    memory)."""
    if family == "fma":
        return config_for(mode, n, k) if mode == "lm_head" else None
    if dtype != torch.bfloat16 or not mma_fits(k):
        pytest.skip("the tensor-core column GEMV takes bf16 weights and K up to SMEM_CAP / MMA_SMEM")
    return mma_config_for(mode, n, k)


def columns(n, k, gen, scale=1.0):
    """n activation columns: the first 8 random, later ones copies of them scaled (different bits)."""
    x = randn(min(n, 8), k, gen=gen, scale=scale)
    return torch.cat([x, x[: n - x.shape[0]] * 0.5]) if n > 8 else x


def per_column(launch, x, out_cols):
    """launch(x_c, out_c) for each column alone (one [K] vector), stacked: the plain step's view."""
    return torch.stack([launch(x[c].contiguous(), out_cols(c)) for c in range(x.shape[0])])


def test_column_groups_divide_the_columns_within_shared_memory_and_the_cap():
    assert column_groups(8, 1536) == 8 and column_groups(16, 576) == 16
    assert column_groups(8, 8960) == 2 and column_groups(3, 8960) == 1 and column_groups(1, 100000) == 1
    assert column_groups(8, 576, cap=2) == 2 and column_groups(3, 576, cap=2) == 1 and column_groups(4, 576, cap=4) == 4


def test_what_sets_a_columns_bits_is_a_function_of_the_weight_never_of_the_column_count():
    """What makes a column's bits independent of the count: bits_key (WK; NW where the mode normalizes) is one per
    weight shape, whatever the count picks of the rest; small weights (read again from L2) take at most 2
    columns per CTA, the LM head keeps its columns together."""
    small, big = config_for("residual", 576, 1536), config_for("residual", 1536, 8960)
    assert small.CG == 2 and big.CG == 16 and big.R == 2 and small.R == 1
    assert config_for("gate_up", 1536, 576).CG == 2 and config_for("gate_up", 8960, 1536).CG == 16
    assert config_for("lm_head", 49152, 576).CG == 16 and config_for("lm_head", 49152, 576).R == 4
    for mode, n, k in [("rmsnorm_gemv", 960, 576), ("residual", 576, 576), ("residual", 576, 1536),
                       ("gate_up", 1536, 576), ("rmsnorm_gemv", 2048, 1536), ("residual", 1536, 8960),
                       ("gate_up", 8960, 1536), ("lm_head", 151936, 1536)]:
        keys = {bits_key(mode, config_for(mode, n, k, c)) for c in range(1, 17)}
        assert len(keys) == 1, (mode, n, k, keys)
    assert config_for("gate_up", 1536, 576, 8).R == 2 and config_for("residual", 576, 1536, 2).CG == 1
    assert config_for("gate_up", 8960, 1536, 8) == config_for("gate_up", 8960, 1536)  # big weights: one config
    assert config_for("residual", 576, 576, 16).R == 8 and config_for("residual", 576, 576, 8).R == 2  # o_proj
    for n, k in [(49152, 576), (151936, 896)]:  # the bf16 LM heads on tensor cores: two tiles a warp past 8 columns
        heads = [default_config("lm_head", n, k, torch.bfloat16, c) for c in range(1, 17)]
        assert len({bits_key("lm_head", c) for c in heads}) == 1 and {c.R for c in heads} == {1, 2}


def test_the_bits_key_holds_what_orders_a_columns_sums():
    base = Config(R=1, WK=2, NW=8, U=4, CG=2)
    assert bits_key("residual", base) == bits_key("residual", Config(R=2, WK=2, NW=4, U=2, CG=1))
    assert bits_key("rmsnorm_gemv", base) != bits_key("rmsnorm_gemv", Config(R=1, WK=2, NW=4))  # the norm's sum
    assert bits_key("residual", base) != bits_key("residual", Config(R=1, WK=1, NW=8))


def test_the_default_runs_a_bf16_lm_head_on_tensor_cores_and_the_layer_weights_on_cuda_cores():
    bf, fp = torch.bfloat16, torch.float16
    assert default_config("lm_head", 49152, 576, bf) == mma_config_for("lm_head", 49152, 576)
    assert default_config("lm_head", 49152, 576, fp) == config_for("lm_head", 49152, 576)
    assert default_config("lm_head", 49152, 4096, bf) == config_for("lm_head", 49152, 4096)  # K past the staging
    assert default_config("lm_head", 151936, 896, bf).mma and not default_config("lm_head", 151936, 1024, bf).mma
    for mode, n, k in [("rmsnorm_gemv", 960, 576), ("residual", 576, 1536), ("gate_up", 1536, 576)]:
        assert default_config(mode, n, k, bf) == config_for(mode, n, k)


def test_the_tensor_core_config_splits_k_over_a_cluster_for_small_weights_and_not_for_the_lm_head():
    """A 16-row tile per warp; the 135M model's layer weights (36-96 tiles) split K over 2-4 CTAs of a cluster
    (>= 128 CTAs) and a CTA's steps over its warps (about 2 each); the LM head's many tiles take all of K per
    warp; a K whose staged range outgrows the shared memory is refused."""
    qkv, down, gate_up = (mma_config_for("rmsnorm_gemv", 960, 576), mma_config_for("residual", 576, 1536),
                          mma_config_for("gate_up", 1536, 576))
    assert (qkv.SK, qkv.WK) == (4, 4) and (down.SK, down.WK) == (4, 8) and gate_up.SK == 2
    assert all(c.mma and c.NW == c.WK for c in (qkv, down, gate_up))
    head = mma_config_for("lm_head", 49152, 576)
    assert head.mma and head.WK == 1 and head.SK == 1 and head.units_per_cta() == 16 * head.NW
    assert mma_fits(1536) and not mma_fits(2048) and mma_fits(8960, 8)
    with pytest.raises(AssertionError, match="stages 56 K"):
        mma_config_for("lm_head", 151936, 4096)


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("with_norm,with_bias", [(True, True), (False, False)])
@pytest.mark.parametrize("family", FAMILIES)
def test_cols_rmsnorm_gemv_gives_each_column_the_same_bits_for_any_column_count(n, k, with_norm, with_bias, dtype,
                                                                               family, gen):
    cfg = family_config(family, "rmsnorm_gemv", n, k, dtype)
    w = randn(n, k, gen=gen, dtype=dtype, scale=0.05)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16) if with_norm else None
    bias = randn(n, gen=gen, dtype=torch.bfloat16) if with_bias else None
    x = columns(16, k, gen, scale=3.0)
    alone = per_column(lambda xc, o: cols_rmsnorm_gemv(xc, w, o, norm_w, 1e-6, bias, config=cfg), x,
                       lambda c: poisoned(n))
    assert rel_err(alone, rmsnorm_gemv_mma_ref(x, w, norm_w, 1e-6, bias)) <= TOL[family]
    for cols in WIDTHS:
        out = poisoned(cols, n)
        assert cols_rmsnorm_gemv(x[:cols].contiguous(), w, out, norm_w, 1e-6, bias, config=cfg) is out
        assert torch.equal(out, alone[:cols]), f"{cols} columns"


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_cols_gemv_residual_adds_in_place_with_the_same_bits_for_any_column_count(n, k, dtype, family, gen):
    cfg = family_config(family, "residual", n, k, dtype)
    w = randn(n, k, gen=gen, dtype=dtype, scale=0.05)
    a, x0 = columns(16, k, gen), columns(16, n, gen)

    def one(c):
        return cols_gemv_residual(a[c].contiguous(), w, x0[c].clone(), config=cfg)

    alone = torch.stack([one(c) for c in range(16)])
    assert rel_err(alone, gemv_residual_mma_ref(a, w, x0)) <= TOL[family]
    for cols in WIDTHS:
        x = x0[:cols].clone()
        assert cols_gemv_residual(a[:cols].contiguous(), w, x, config=cfg) is x
        assert torch.equal(x, alone[:cols]), f"{cols} columns"


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i,k", [(1536, 576), (8960, 1536)])
@pytest.mark.parametrize("family", FAMILIES)
def test_cols_gate_up_silu_gives_each_column_the_same_bits_for_any_column_count(i, k, dtype, family, gen):
    cfg = family_config(family, "gate_up", i, k, dtype)
    w = randn(2 * i, k, gen=gen, dtype=dtype, scale=0.05)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    x = columns(16, k, gen, scale=2.0)
    alone = per_column(lambda xc, o: cols_rmsnorm_gate_up_silu(xc, norm_w, 1e-6, w, o, config=cfg), x,
                       lambda c: poisoned(i))
    assert rel_err(alone, rmsnorm_gate_up_silu_mma_ref(x, norm_w, 1e-6, w)) <= TOL[family]
    for cols in WIDTHS:
        out = poisoned(cols, i)
        cols_rmsnorm_gate_up_silu(x[:cols].contiguous(), norm_w, 1e-6, w, out, config=cfg)
        assert torch.equal(out, alone[:cols]), f"{cols} columns"


def lm_head_case(gen, v, k, dtype=torch.bfloat16):
    w = randn(v, k, gen=gen, dtype=dtype, scale=0.05)
    embed = randn(v, k, gen=gen, dtype=dtype)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    return w, embed, norm_w


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("v,k", [(49152, 576), (151936, 1536)])
@pytest.mark.parametrize("family", FAMILIES)
def test_cols_lm_head_argmax_accepts_the_agreeing_prefix_and_feeds_its_token(v, k, family, gen):
    cfg = family_config(family, "lm_head", v, k)
    w, embed, norm_w = lm_head_case(gen, v, k)
    x = randn(8, k, gen=gen)
    logits_ref, g, _ = lm_head_argmax_mma_ref(x, w, norm_w=norm_w)
    scratch = mma_scratch(DEVICE)
    for cols, right, klen in [(8, 7, 7), (8, 3, 7), (8, 0, 7), (8, 7, 2), (4, 3, 3), (2, 1, 1), (2, 0, 1)]:
        draft = g[:7].clone()  # column j's input is the token before; its argmax g[j] is compared with draft[j]
        if right < 7:
            draft[right] = (g[right] + 1) % v  # agrees up to `right`
        token = torch.zeros(1, dtype=torch.int64, device=DEVICE)
        pos = torch.tensor([100], dtype=torch.int32, device=DEVICE)
        x_next, logits = poisoned(k), poisoned(cols, v)
        result = torch.zeros(cols + 1, dtype=torch.int64, pin_memory=True)  # as the verify step's: host memory
        cols_lm_head_argmax(x[:cols].contiguous(), w, logits, token, pos, embed, scratch, norm_w, 1e-6,
                            draft=draft, klen=torch.tensor([klen], device=DEVICE), x_next=x_next, result=result,
                            config=cfg)
        torch.cuda.synchronize()
        a = min(right, klen, cols - 1)
        assert result.tolist() == g[:cols].tolist() + [a], (cols, right, klen)
        assert int(token) == int(g[a]) and int(pos) == 100 + a + 1
        assert torch.equal(x_next, embed[int(g[a])].float())
        assert rel_err(logits, logits_ref[:cols]) <= TOL[family]
        assert scratch[:16].eq(scratch[0]).all() and int(scratch[16]) == 0  # reset for the next launch


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("family", FAMILIES)
def test_cols_lm_head_argmax_one_column_is_the_plain_greedy_step(family, gen):
    """One column, no draft (a plain step of a speculating run): token = argmax, pos + 1, the ring slot, x =
    its embedding, and the logits are the same bits as that column in an 8-column launch."""
    v, k = 49152, 576
    cfg = family_config(family, "lm_head", v, k)
    w, embed, norm_w = lm_head_case(gen, v, k)
    x8 = randn(8, k, gen=gen)
    logits8 = poisoned(8, v)
    scratch = mma_scratch(DEVICE)
    cols_lm_head_argmax(x8, w, logits8, torch.zeros(1, dtype=torch.int64, device=DEVICE),
                        torch.zeros(1, dtype=torch.int32, device=DEVICE), embed, scratch, norm_w, 1e-6,
                        draft=torch.zeros(7, dtype=torch.int64, device=DEVICE),
                        klen=torch.zeros(1, dtype=torch.int64, device=DEVICE), x_next=poisoned(k), config=cfg)
    ring = torch.full((8,), -1, dtype=torch.int64, device=DEVICE)
    for c in range(8):
        x, logits = x8[c].clone(), poisoned(v)
        token = torch.zeros(1, dtype=torch.int64, device=DEVICE)
        pos = torch.tensor([10 + c], dtype=torch.int32, device=DEVICE)
        assert cols_lm_head_argmax(x, w, logits, token, pos, embed, scratch, norm_w, 1e-6, ring, config=cfg) is token
        assert torch.equal(logits, logits8[c])
        assert int(token) == int(logits8[c].argmax()) and int(pos) == 11 + c and int(ring[(11 + c) % 8]) == int(token)
        assert torch.equal(x, embed[int(token)].float())


@pytest.mark.gpu
@HOPPER
def test_the_default_lm_head_gives_a_column_the_same_logits_alone_and_among_16(gen):
    """The launchers' own config per column count (two tiles a warp past 8 columns on tensor cores): a verify
    step's 16 columns get the logits and argmax their plain steps do."""
    v, k = 49152, 576
    w, embed, norm_w = lm_head_case(gen, v, k)
    x16 = columns(16, k, gen)
    logits16, result = poisoned(16, v), torch.zeros(17, dtype=torch.int64, device=DEVICE)
    scratch = mma_scratch(DEVICE)
    cols_lm_head_argmax(x16, w, logits16, torch.zeros(1, dtype=torch.int64, device=DEVICE),
                        torch.zeros(1, dtype=torch.int32, device=DEVICE), embed, scratch, norm_w, 1e-6,
                        draft=torch.zeros(15, dtype=torch.int64, device=DEVICE),
                        klen=torch.zeros(1, dtype=torch.int64, device=DEVICE), x_next=poisoned(k), result=result)
    for c in range(16):
        logits, token = poisoned(v), torch.zeros(1, dtype=torch.int64, device=DEVICE)
        cols_lm_head_argmax(x16[c].clone(), w, logits, token, torch.zeros(1, dtype=torch.int32, device=DEVICE),
                            embed, scratch, norm_w, 1e-6)
        assert torch.equal(logits, logits16[c]), c
        assert int(token) == int(logits16[c].argmax())
    assert int(result[0]) == int(logits16[0].argmax())


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("family", FAMILIES)
def test_cols_lm_head_argmax_ties_go_to_the_lowest_row(family, gen):
    v, k = 300, 64
    cfg = family_config(family, "lm_head", v, k)
    w, embed, _ = lm_head_case(gen, v, k)
    w[250] = w[40]  # rows 40 and 250 give equal logits; 40 must win wherever it is the best
    x = randn(2, k, gen=gen)
    x[0] = w[40].float()
    x[1] = w[250].float()
    result = torch.zeros(3, dtype=torch.int64, device=DEVICE)
    cols_lm_head_argmax(x, w, poisoned(2, v), torch.zeros(1, dtype=torch.int64, device=DEVICE),
                        torch.zeros(1, dtype=torch.int32, device=DEVICE), embed, mma_scratch(DEVICE),
                        draft=torch.zeros(1, dtype=torch.int64, device=DEVICE),
                        klen=torch.zeros(1, dtype=torch.int64, device=DEVICE), x_next=poisoned(k), result=result,
                        config=cfg)
    assert result[:2].tolist() == [40, 40]


@pytest.mark.gpu
@HOPPER
def test_cols_launchers_refuse_bad_shapes(gen):
    w = randn(32, 64, gen=gen, dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="columns, must be 1..16"):
        cols_rmsnorm_gemv(randn(17, 64, gen=gen), w, poisoned(17, 32))
    with pytest.raises(AssertionError, match="same number of columns"):
        cols_gemv_residual(randn(2, 64, gen=gen), w, poisoned(3, 32))
    with pytest.raises(AssertionError, match="CUDA column GEMVs need"):
        cols_rmsnorm_gemv(randn(2, 60, gen=gen), randn(32, 60, gen=gen, dtype=torch.bfloat16), poisoned(2, 32))
