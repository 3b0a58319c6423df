"""decode_attention for KC consecutive query positions pos..pos+KC-1 (the verify step of speculative
decoding): each column attends causally over cache rows 0..pos+c, and the KC new k/v rows are written.

Two launches:
  1. `_kv_rows_kernel`, grid (Hkv, KC): the KC new k rows (q/k norm + RoPE at their positions) and v rows
     into the caches, computed by kernels.decode_attention's own `_norm_rope` code (with PDL it releases the
     attention at its start: the attention's own wait covers these rows);
  2. kernels.decode_attention's `_attn_kernel` with a third grid axis over the columns (grid (Hkv, S, KC),
     row writing off; few_splits: grid (Hkv, P, KC), P programs taking the S splits in turn): column c runs
     the one-token kernel's code for the token at pos + c — the window's earlier rows pos..pos+c-1 come from
     the caches as they would after c one-token steps, its own row from registers — with its own workspace
     and counters.
Column c's output is then bit for bit that of the one-token kernel run at pos + c after the one-token
steps at pos..pos+c-1: the same compiled kernel, the same rows. K/V tiles are read once per column
(from L2 after the first): at batch 1 and short context they are small next to the weights.

Not here: the QKV projection, the causal window of a prefill (many tokens, kernels/ has none).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, pdl_launch_kwargs
from kernels.decode_attention import AttentionWorkspace, _norm_rope, attention_config, decode_attention_ref, \
    decode_attention_with


# Contract:
#   qkv [KC, (HQ + 2*HKV) * D] fp32;  pos [1] int32: column 0's position
#   k_cache, v_cache [HKV, Tmax, D]: rows pos..pos+KC-1 written;  cos, sin [Tmax, D/2] fp32
#   grid (HKV, KC)
@triton.jit
def _kv_rows_kernel(qkv_ptr, pos_ptr, k_cache_ptr, v_cache_ptr, cos_ptr, sin_ptr, k_norm_ptr, T_MAX, eps,
                    HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, HAS_QK_NORM: tl.constexpr,
                    USE_PDL: tl.constexpr):
    HALF: tl.constexpr = D // 2
    kvh = tl.program_id(0)
    col = tl.program_id(1)
    if USE_PDL:  # the QKV GEMV's output first; the attention launches now and waits for these rows itself
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    qkv_ptr += col * ((HQ + 2 * HKV) * D)
    pos = tl.load(pos_ptr) + col
    d = tl.arange(0, D)
    cos = tl.load(cos_ptr + pos * HALF + d % HALF)
    sin = tl.load(sin_ptr + pos * HALF + d % HALF)
    one = tl.arange(0, 1)
    k_new = _norm_rope(qkv_ptr + HQ * D, kvh + one, one < 1, d, k_norm_ptr, cos, sin, eps, D, HALF, HAS_QK_NORM)
    k_new = tl.reshape(k_new, (D,))
    v_new = tl.load(qkv_ptr + (HQ + HKV + kvh) * D + d).to(tl.float32)
    cache_off = kvh.to(tl.int64) * T_MAX * D
    cache_ty = k_cache_ptr.dtype.element_ty
    tl.store(k_cache_ptr + cache_off + pos * D + d, k_new.to(cache_ty))
    tl.store(v_cache_ptr + cache_off + pos * D + d, v_new.to(cache_ty))


def decode_attention_cols(
    qkv: torch.Tensor, pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cos: torch.Tensor,
    sin: torch.Tensor, out: torch.Tensor, workspace: AttentionWorkspace, scale: float,
    q_norm: torch.Tensor | None = None, k_norm: torch.Tensor | None = None, eps: float = 1e-6, *, pdl: bool = False,
    few_splits: bool = False,
) -> torch.Tensor:
    """Attention of the KC tokens at pos..pos+KC-1 (qkv [KC, (Hq+2Hkv)*D] fp32), each over cache rows
    0..its own position; writes cache rows pos..pos+KC-1; out [KC, Hq*D] fp32. The caller keeps
    pos + KC <= Tmax. workspace: built with columns >= KC. few_splits: the attention config's
    verify_split_programs programs per kv head and column take the splits in turn (the same bits; faster up to
    few_split_rows(config) rows of context, slower past them). Returns out."""
    assert qkv.dim() == 2 and out.dim() == 2 and qkv.shape[0] == out.shape[0], "qkv and out must be [KC, ...]"
    assert qkv.is_contiguous() and out.is_contiguous()
    kc = qkv.shape[0]
    hkv, t_max, d = k_cache.shape
    hq = workspace.m.shape[-2]
    assert qkv.shape[1] == (hq + 2 * hkv) * d and qkv.dtype == torch.float32
    assert k_cache.dtype in WEIGHT_DTYPES and k_cache.is_contiguous() and v_cache.is_contiguous()
    assert pos.shape == (1,) and pos.dtype == torch.int32, "pos must be an int32 tensor of shape [1]"
    if k_norm is not None:
        check_vec(k_norm, d, "k_norm", WEIGHT_DTYPES)
    _kv_rows_kernel[(hkv, kc)](qkv, pos, k_cache, v_cache, cos, sin, k_norm if k_norm is not None else cos,
                               t_max, eps, HQ=hq, HKV=hkv, D=d, HAS_QK_NORM=k_norm is not None, USE_PDL=pdl,
                               num_warps=attention_config(d, k_cache.dtype).num_warps,
                               **pdl_launch_kwargs(pdl, qkv.device))
    cfg = attention_config(d, k_cache.dtype)
    decode_attention_with(cfg, qkv.view(-1), pos, k_cache, v_cache, cos, sin, out.view(-1), workspace, scale,
                          q_norm, k_norm, eps, pdl=pdl, columns=kc,
                          split_programs=cfg.verify_split_programs if few_splits else 0)
    return out


def decode_attention_cols_ref(qkv, pos: int, k_cache, v_cache, cos, sin, scale, q_norm=None, k_norm=None, eps=1e-6):
    """Plain PyTorch twin: (out [KC, Hq*D], k_rows [KC, Hkv, D], v_rows [KC, Hkv, D]) in fp32, as KC
    decode_attention_ref calls that append their rows (in the cache dtype) one after another. Caches untouched."""
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    outs, ks, vs = [], [], []
    for c in range(qkv.shape[0]):
        out, k, v = decode_attention_ref(qkv[c], pos + c, k_cache, v_cache, cos, sin, scale, q_norm, k_norm, eps)
        k_cache[:, pos + c] = k.to(k_cache.dtype)
        v_cache[:, pos + c] = v.to(v_cache.dtype)
        outs.append(out), ks.append(k), vs.append(v)
    return torch.stack(outs), torch.stack(ks), torch.stack(vs)
