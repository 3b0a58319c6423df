"""Prefill for the GPU fast path: cuBLAS GEMMs + fused SDPA attention, replayed as CUDA graphs.

Same math as `inference.reference`, with three differences that matter on a GPU:
- attention goes through PyTorch's scaled_dot_product_attention (flash kernels, no [T, T] scores);
- the residual stream stays in float32 (like the decode kernels), so the KV cache the prompt
  leaves behind is as accurate as the one decode writes;
- only the last position goes through the final norm and the LM head;
- FP8 weights (inference.quant.Fp8Weight) are dequantized to the activations' dtype before their GEMM, on
  a GPU in one pass (kernels/fp8_dequantize.py; the same bits as inference.quant.linear's PyTorch math); an
  int8 LM head (inference.quant.Int8Weight) takes its one row through the decode step's 8-bit GEMV.
Prompts are padded to a power-of-two bucket and each bucket's forward is captured once as a CUDA
graph, so TTFT is GPU time, not Python launch overhead; with graphs off the same padded forward runs
eagerly (the same GEMM shapes, so the same bits: cuBLAS need not round a 32-row and a 64-row product's
rows alike, and a sampled request's tokens followed the difference). Padding sits after the prompt: causal
attention keeps it out of every real position, and the KV rows it writes lie beyond the prompt,
where decode overwrites each row before it first reads it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from kernels.fp8_dequantize import fp8_dequantize
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv

from ..quant import Fp8Weight, Int8Weight
from ..reference import KVCache, ReferenceModel, rms_norm, rotate_half

MIN_BUCKET = 64


def linear(x: Tensor, w: Tensor | Fp8Weight | Int8Weight, bias: Tensor | None = None) -> Tensor:
    """F.linear for a plain weight or an Fp8Weight, dequantized to x's dtype by the one-pass kernel on a GPU
    (elsewhere by inference.quant's PyTorch math: the same values). An Int8Weight (the LM head) and one row of x
    on a GPU: the 8-bit GEMV, float32 out (no [V, K] copy of the head); elsewhere dequantized."""
    if isinstance(w, Int8Weight):
        if x.shape[0] == 1 and w.device.type == "cuda" and bias is None:
            out = torch.empty(w.shape[0], dtype=torch.float32, device=x.device)
            return fp8_rmsnorm_gemv(x[0].float().contiguous(), w.q, w.scale, None, out)[None]
        w = w.dequantize(x.dtype)
    elif isinstance(w, Fp8Weight):
        w = fp8_dequantize(w.q, w.scale, w.offset, x.dtype) if w.device.type == "cuda" else w.dequantize(x.dtype)
    return F.linear(x, w, bias)


class PrefillModel(ReferenceModel):
    def __init__(self, cfg, weights, max_len: int):
        super().__init__(cfg, weights, max_len)
        dt = weights.dtype
        self.cos_full = torch.cat([self.cos, self.cos], -1).to(dt)  # [Tmax, D]
        self.sin_full = torch.cat([self.sin, self.sin], -1).to(dt)
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, Tensor, Tensor, Tensor]] = {}

    def _norm(self, x: Tensor, w: Tensor) -> Tensor:
        """RMSNorm of the float32 stream, handed to the GEMMs in the norm weight's dtype (the model's)."""
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.rms_norm_eps) * w).to(w.dtype)

    def _sum(self, t: Tensor) -> Tensor:
        """o_proj's and down_proj's output as the residual adds it: itself here (a tensor-parallel rank's
        prefill, inference.parallel.fast, all-reduces its partial sum)."""
        return t

    def _rope(self, x: Tensor, T: int) -> Tensor:
        """x [T, heads, D] (q and k heads together) -> rotated, rotate-half convention."""
        return x * self.cos_full[:T, None] + rotate_half(x) * self.sin_full[:T, None]

    @torch.inference_mode()
    def forward_last(self, ids: Tensor, last: Tensor, cache: KVCache) -> Tensor:
        """ids [T] int64 from position 0; last: [1] index of the last real token -> logits [V] f32."""
        cfg, w = self.cfg, self.w
        T = ids.shape[0]
        Hq, Hkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        x = w.embed[ids].float()  # [T, H] float32 residual stream
        for i, layer in enumerate(w.layers):
            qkv = linear(self._norm(x, layer.attn_norm), layer.qkv, layer.qkv_bias)
            q, k, v = qkv.split([cfg.q_size, cfg.kv_size, cfg.kv_size], dim=-1)
            q, k, v = q.view(T, Hq, D), k.view(T, Hkv, D), v.view(T, Hkv, D)
            if layer.q_norm is not None:
                q, k = rms_norm(q, layer.q_norm, cfg.rms_norm_eps), rms_norm(k, layer.k_norm, cfg.rms_norm_eps)
            q, k = self._rope(q, T), self._rope(k, T)
            k, v = k.transpose(0, 1), v.transpose(0, 1)  # [Hkv, T, D]
            cache.k[i, :, :T] = k
            cache.v[i, :, :T] = v
            attn = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k[None], v[None], is_causal=True,
                                                  enable_gqa=Hq != Hkv)  # [1, Hq, T, D]
            x = x + self._sum(linear(attn[0].transpose(0, 1).reshape(T, cfg.q_size), layer.o))
            gate, up = linear(self._norm(x, layer.mlp_norm), layer.gate_up).chunk(2, dim=-1)
            x = x + self._sum(linear(F.silu(gate) * up, layer.down))
        h = self._norm(x.index_select(0, last), w.norm)  # [1, H]
        return linear(h, w.lm_head)[0].float()

    @torch.inference_mode()
    def prefill(self, ids: Tensor, cache: KVCache, use_graph: bool = True) -> Tensor:
        """ids [T] on the device -> logits of the last position [V] float32 (padded to the bucket, graph or not)."""
        T = ids.shape[0]
        last = torch.tensor([T - 1], device=ids.device)
        bucket = min(max(MIN_BUCKET, 1 << (T - 1).bit_length()), cache.max_len)
        if not use_graph:
            padded = torch.zeros(bucket, dtype=ids.dtype, device=ids.device)
            padded[:T] = ids
            return self.forward_last(padded, last, cache)
        graph, ids_buf, last_buf, out = self._graph(bucket, cache)
        ids_buf.zero_()
        ids_buf[:T].copy_(ids)
        last_buf.copy_(last)
        graph.replay()
        return out

    def _graph(self, bucket: int, cache: KVCache):
        if bucket not in self.graphs:
            dev = self.w.device
            ids_buf = torch.zeros(bucket, dtype=torch.int64, device=dev)
            last_buf = torch.zeros(1, dtype=torch.int64, device=dev)
            stream = torch.cuda.Stream(dev)
            stream.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(stream):
                self.forward_last(ids_buf, last_buf, cache)  # warm-up: cuBLAS/SDPA workspaces
            torch.cuda.current_stream(dev).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                out = self.forward_last(ids_buf, last_buf, cache)
            self.graphs[bucket] = (graph, ids_buf, last_buf, out)
        return self.graphs[bucket]
