"""The last launch of a sampled decode step: Gumbel-max sample + feeding the token back.

    key    = hash32(seed_key ^ hash32(step));  step += 1
    noise  = -log(-log(u)),  u from hash32(hash32(token id) ^ key)   (24 bits, in (0, 1))
    token  = argmax(scores [/ temperature] + noise);  then feed_token (token, pos, ring, x)
    seen[token] = True   (with a repetition penalty)

Bit for bit the computation of inference.sampling.Sampler after its filters (same hash, IEEE
division, the same float32 log), in one launch instead of ~30 small torch
kernels (the hash alone is a dozen int64 element-wise ops over the vocabulary). The argmax is
lm_head_argmax's: one int64 atomic max per program, the last program to draw a ticket finishes.

Not here: the repetition penalty, top-k / top-p / min-p filters (torch, in Sampler.scores).
"""

import torch
import triton
import triton.language as tl

from kernels._util import check_vec
from kernels.feed_token import check_feed_args, feed, feed_args
from kernels.lm_head_argmax import NO_KEY, argmax_vote, argmax_winner


@triton.jit
def hash32(x):
    """lowbias32 on uint32 (inference.sampling.hash32 does the same on int64 holding 32 bits)."""
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


@triton.jit
def _step_key(seed_key_ptr, step_ptr):
    step = tl.load(step_ptr)
    s32 = (step - ((step >> 32) << 32)).to(tl.uint32)  # step & 0xFFFFFFFF
    return hash32(tl.load(seed_key_ptr).to(tl.uint32) ^ hash32(s32))


# Contract:
#   scores       [V] fp32 (filtered logits, -inf for removed tokens)
#   temperature  0-d fp32 (read only when DIVIDE: scores / temperature first, IEEE division)
#   seed_key     0-d int64 in [0, 2^32); step 0-d int64, incremented by the last program
#   seen         [V] bool (written only when HAS_SEEN: seen[token] = True)
#   scratch [2] int64 as lm_head_argmax's; token, pos, embed, x, ring as feed_token's
#   grid (cdiv(V, BLOCK),)
@triton.jit
def _gumbel_argmax_kernel(
    scores_ptr, temperature_ptr, seed_key_ptr, step_ptr, seen_ptr, scratch_ptr, token_ptr, pos_ptr, embed_ptr,
    x_ptr, V, K, n_programs, no_key, ring_ptr, ring_size,
    DIVIDE: tl.constexpr, HAS_SEEN: tl.constexpr, HAS_RING: tl.constexpr, BLOCK: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    mask = rows < V
    s = tl.load(scores_ptr + rows, mask=mask, other=float("-inf"))
    if DIVIDE:
        s = tl.math.div_rn(s, tl.load(temperature_ptr))
    bits = hash32(hash32(rows.to(tl.uint32)) ^ _step_key(seed_key_ptr, step_ptr))
    u = ((bits >> 8).to(tl.float32) + 0.5) * (1.0 / 16777216)
    y = s + -tl.log(-tl.log(u))  # fp32 log compiles to libdevice's logf (checked against torch on the GPU)
    if argmax_vote(y, rows, mask, scratch_ptr) == n_programs - 1:
        token = argmax_winner(scratch_ptr, no_key)
        tl.store(step_ptr, tl.load(step_ptr) + 1)
        if HAS_SEEN:
            tl.store(seen_ptr + token, 1)
        feed(token, token_ptr, pos_ptr, ring_ptr, ring_size, embed_ptr, x_ptr, K, HAS_RING, BLOCK_H)


def gumbel_argmax(
    scores: torch.Tensor, seed_key: torch.Tensor, step: torch.Tensor, scratch: torch.Tensor,
    token: torch.Tensor, pos: torch.Tensor, embed: torch.Tensor, x: torch.Tensor, *,
    temperature: torch.Tensor | None = None, seen: torch.Tensor | None = None, ring: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sample argmax(scores [/ temperature] + Gumbel(seed_key, step)), step += 1, mark seen, then
    feed_token (token, pos += 1, ring, x = embed[token]). Returns token."""
    v = scores.numel()
    check_vec(scores, v, "scores")
    check_vec(scratch, 2, "scratch", (torch.int64,))
    check_feed_args(token, pos, embed, x, ring)
    for name, t, dt in (("seed_key", seed_key, torch.int64), ("step", step, torch.int64),
                        ("temperature", temperature, torch.float32)):
        assert t is None or (t.numel() == 1 and t.dtype == dt), f"{name} must be a one-element {dt} tensor"
    if seen is not None:
        check_vec(seen, v, "seen", (torch.bool,))
    assert embed.shape[0] >= v, "the embedding table must cover every token"
    block = 1024
    grid = triton.cdiv(v, block)
    _gumbel_argmax_kernel[(grid,)](
        scores, temperature if temperature is not None else scores, seed_key, step,
        seen if seen is not None else scores, scratch, token, pos, embed, x, v, x.numel(), grid, NO_KEY,
        DIVIDE=temperature is not None, HAS_SEEN=seen is not None, BLOCK=block, num_warps=4,
        **feed_args(ring, token, x.numel()),
    )
    return token
