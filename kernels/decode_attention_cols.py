"""decode_attention for KC consecutive query positions pos..pos+KC-1 (the verify step of speculative
decoding): each column attends causally over cache rows 0..pos+c, and the KC new k/v rows are written.

One launch: kernels.decode_attention's `_attn_kernel` with a third grid axis over the columns (grid (Hkv, S, KC);
few_splits: grid (Hkv, P, KC), P programs taking the S splits in turn): column c runs the one-token kernel's code for
the token at pos + c. The window's earlier rows pos..pos+c-1 that fall in a program's split are first computed by
that program from their columns' qkv (q/k norm + RoPE at their positions, the code that appends a token's own row)
and stored into the caches, then read back with the split's older rows, as they would be after c one-token steps;
its own row comes from registers and is appended. Columns that store the same row store the same bits.
Column c's output is then bit for bit that of the one-token kernel run at pos + c after the one-token
steps at pos..pos+c-1: the same compiled kernel, the same rows. K/V tiles are read once per column
(from L2 after the first): at batch 1 and short context they are small next to the weights.

Not here: the QKV projection, the causal window of a prefill (many tokens, kernels/ has none).
"""

import torch

from kernels._util import WEIGHT_DTYPES
from kernels.decode_attention import AttentionWorkspace, attention_config, decode_attention_ref, decode_attention_with


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
