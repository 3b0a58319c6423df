"""Triton (and one CUDA C) kernels for a batch-1 decode step (Qwen2 / Qwen3 / Llama shapes).

One op per module; each holds its kernel, a launcher that checks shapes and computes the
grid, and a plain PyTorch `<name>_ref` twin the tests compare against:

- `rmsnorm_gemv`      out = W @ (rmsnorm(x) * norm_w) + bias   (fused-norm QKV, final norm + LM head)
- `gemv_residual`     x += W @ a                               (o_proj, down_proj)
- `gate_up_silu`      out = silu(W_g @ n) * (W_u @ n), n = rmsnorm(x) * norm_w
- `decode_attention`  q/k norm + RoPE + KV-cache append + split-KV GQA flash-decoding
- `lm_head_argmax`    final norm + LM head + argmax + feed_token's tail (greedy step's last launch)
- `gumbel_argmax`     Gumbel-max draw (the Sampler's noise, bit for bit) + feed_token's tail
- `feed_token`        token / position update, host ring, next token's embedding into x
- `embed_cols`        a verify step's input columns: x, then the drafted tokens' embedding rows
- `*_cols`            k-column twins of rmsnorm_gemv, gemv_residual, gate_up_silu, lm_head_argmax (+ the
                      draft's acceptance) and decode_attention for speculative decoding's verify step:
                      weights read once for k tokens, each column bit for bit the one-column kernel's
- `gemv_mma_cols`, `lm_head_mma_cols`  the same GEMVs for 1..16 columns on tensor cores (a column's bits do
                      not depend on the column count; the plain steps then run them too; off by default)
- `cluster_attention` decode_attention's op in CUDA C with thread-block clusters (Hopper only;
                      compiled by NVRTC and launched through `_cuda_rtc`), same reference twin
- `stream_gemv`       the GEMVs in CUDA C with their weights streamed through a shared-memory ring (Hopper,
                      NVRTC), one or several tokens a launch (each token the one-token launch's bits)
- `stream_lm_head`    the LM head's logits streamed (stream_gemv) + argmax / the draft's acceptance / feed:
                      a speculating run's last launches on the streamed GEMVs

All launchers are CUDA-graph safe: no allocation, no host sync, no autotuning (launch configs
come from a fixed rule in _util.py or the per-GPU table in tuning.py). Call each once before capturing so the
Triton JIT compiles outside the capture. They take `pdl=True` to use Hopper programmatic
dependent launch.

This package does not own weights, caches or the decode loop (see inference/fast/).

On a machine without CUDA the kernels only run under Triton's NumPy interpreter; we turn it
on here (before any kernel module is decorated) unless the caller already chose.
"""

import os

if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    from kernels import _interpreter_compat  # noqa: F401  (NumPy 2.4 fix for the interpreter)
