"""A verify step's input columns in one launch:

    out[0] = x;   out[c] = embed[draft[c - 1]] as float32,   c = 1 .. KC - 1

x is the last accepted token's embedding (fed by the step before); the drafted tokens' embeddings follow, so the
verify step's KC columns start from their inputs. One program per column, no PDL (the verify graph's first launch:
the kernels after it wait for it whole). Replaces a copy, an index_select and a cast (three launches, ~9 us of an
8-column verify step on an H100: bench-results/h100-2026-11-26-session9/final9/profile.log). Values exact (16-bit
to float32).

Not here: the drafting (inference.speculative.drafter), the verify step (inference.speculative.fast_verify).
"""

import torch
import triton
import triton.language as tl

from kernels._util import check_vec

BLOCK_H = 256


@triton.jit
def _embed_cols_kernel(x_ptr, draft_ptr, embed_ptr, out_ptr, K, BLOCK_H: tl.constexpr):
    c = tl.program_id(0)
    h = tl.arange(0, BLOCK_H)
    if c == 0:
        for h0 in range(0, K, BLOCK_H):
            m = h0 + h < K
            tl.store(out_ptr + h0 + h, tl.load(x_ptr + h0 + h, mask=m, other=0.0), mask=m)
    else:
        row = embed_ptr + tl.load(draft_ptr + c - 1).to(tl.int64) * K
        for h0 in range(0, K, BLOCK_H):
            m = h0 + h < K
            e = tl.load(row + h0 + h, mask=m, other=0.0)
            tl.store(out_ptr + c * K + h0 + h, e.to(tl.float32), mask=m)


def embed_cols(x: torch.Tensor, draft: torch.Tensor, embed: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out [KC, K] fp32 (contiguous) = x [K] fp32, then embed [V, K] rows draft[0 .. KC - 2] (int64) as fp32.
    Returns out."""
    assert out.dim() == 2 and out.is_contiguous() and out.dtype == torch.float32, "out must be contiguous fp32 [KC, K]"
    kc, k = out.shape
    check_vec(x, k, "x")
    assert embed.dim() == 2 and embed.shape[1] == k and embed.is_contiguous(), "embed must be contiguous [V, K]"
    assert draft.dim() == 1 and draft.dtype == torch.int64 and draft.shape[0] >= kc - 1, "draft: int64, >= KC - 1"
    assert x.device == draft.device == embed.device == out.device
    _embed_cols_kernel[(kc,)](x, draft, embed, out, k, BLOCK_H=BLOCK_H)
    return out


def embed_cols_ref(x: torch.Tensor, draft: torch.Tensor, embed: torch.Tensor, kc: int) -> torch.Tensor:
    """Plain PyTorch twin: [KC, K] fp32."""
    return torch.cat([x[None].float(), embed.index_select(0, draft[:kc - 1]).float()])
