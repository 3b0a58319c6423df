"""Feeding a sampled token back into the decode loop, on the device, in one launch:

    token_out = token;  pos += 1;  ring[pos % R] = token;  x = embed[token]

The end of every decode step: the next step reads its token, position and input embedding from
these buffers, and the host reads the token from `ring` (pinned host memory, written through
unified addressing) once the step's event completes - no device-to-host copy per token
(measured ~10 us per step on an H200 for an 8-byte copy + event). `feed` is the same tail as a
jit helper; lm_head_argmax runs it in its last program for greedy steps.

Not here: choosing the token (inference.sampling, lm_head_argmax).
"""

import torch
import triton
import triton.language as tl

from kernels._util import check_vec


@triton.jit
def feed(token, token_ptr, pos_ptr, ring_ptr, ring_size, embed_ptr, x_ptr, K,
         HAS_RING: tl.constexpr, BLOCK_H: tl.constexpr):
    """Store token, pos += 1, ring[new pos % ring_size] = token, x[0:K] = embed[token] as fp32."""
    tl.store(token_ptr, token)
    new_pos = tl.load(pos_ptr) + 1
    tl.store(pos_ptr, new_pos)
    if HAS_RING:
        tl.store(ring_ptr + new_pos % ring_size, token)
    h = tl.arange(0, BLOCK_H)
    row = embed_ptr + token.to(tl.int64) * K
    for h0 in range(0, K, BLOCK_H):
        e = tl.load(row + h0 + h, mask=h0 + h < K, other=0.0)
        tl.store(x_ptr + h0 + h, e.to(tl.float32), mask=h0 + h < K)


@triton.jit
def _feed_token_kernel(src_ptr, token_ptr, pos_ptr, embed_ptr, x_ptr, K, ring_ptr, ring_size,
                       HAS_RING: tl.constexpr, BLOCK_H: tl.constexpr):
    feed(tl.load(src_ptr), token_ptr, pos_ptr, ring_ptr, ring_size, embed_ptr, x_ptr, K, HAS_RING, BLOCK_H)


def check_feed_args(token, pos, embed, x, ring):
    """Shared argument checks of feed_token and lm_head_argmax."""
    check_vec(token, 1, "token", (torch.int64,))
    check_vec(pos, 1, "pos", (torch.int32,))
    check_vec(x, x.numel(), "x")
    assert embed.dim() == 2 and embed.shape[1] == x.numel() and embed.is_contiguous(), "embed must be [V, len(x)]"
    if ring is not None:
        check_vec(ring, ring.numel(), "ring", (torch.int64,))
        assert ring.device == x.device or ring.is_pinned(), "ring must be on the device or in pinned host memory"
    assert token.device == pos.device == embed.device == x.device


def feed_args(ring, token, k: int) -> dict:
    """Launch kwargs for the kernels that run `feed`: ring_ptr, ring_size, HAS_RING, BLOCK_H
    (without a ring, ring_ptr is any valid pointer and never written)."""
    return {"ring_ptr": ring if ring is not None else token, "ring_size": ring.numel() if ring is not None else 1,
            "HAS_RING": ring is not None, "BLOCK_H": min(1024, triton.next_power_of_2(k))}


def feed_token(sampled: torch.Tensor, token: torch.Tensor, pos: torch.Tensor, embed: torch.Tensor,
               x: torch.Tensor, ring: torch.Tensor | None = None) -> torch.Tensor:
    """token[0] = sampled[0]; pos += 1; ring[pos % len(ring)] = token (new pos); x = embed[token]."""
    check_vec(sampled, 1, "sampled", (torch.int64,))
    check_feed_args(token, pos, embed, x, ring)
    k = x.numel()
    _feed_token_kernel[(1,)](sampled, token, pos, embed, x, k, **feed_args(ring, token, k))
    return token


def feed_token_ref(sampled, pos: int, embed):
    """Plain PyTorch twin: (token [1], new pos, x [K] fp32). The ring slot is new pos % len(ring)."""
    return sampled.clone(), pos + 1, embed[int(sampled[0])].float()
