"""The GPU fast path with FP8 weights: FastRunner's decode step over the kernels/fp8_* Triton kernels.

Same step, same single CUDA graph per step, same attention kernels and sampler tail as FastRunner;
only the weight-reading launches change. Per layer:
    fp8_rmsnorm_gemv          input RMSNorm + QKV (+ bias)          e4m3 weights, scale+offset per 32 columns
    decode / cluster attention (unchanged: the KV cache stays bf16)
    fp8_gemv_residual         o_proj, residual added in place
    fp8_rmsnorm_gate_up_silu  post-attention RMSNorm + gate/up + SiLU*up
    fp8_gemv_residual         down_proj, residual added in place; its programs then prefetch the
                              next layer's first QKV bytes (the LM head's after the last layer) into L2
then the LM head: fp8_lm_head_argmax for greedy steps, fp8_rmsnorm_gemv + the sampler otherwise (the
bf16 kernels where the LM head stayed bf16). Activations are float32 between kernels as in bf16;
prefill dequantizes each weight before its cuBLAS GEMM (inference.quant.linear).

Not here: the streamed CUDA GEMVs (bf16 only: use_gemv accepts "auto" / "triton"), quantization
(inference.quant).
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels.fp8_gate_up_silu import fp8_rmsnorm_gate_up_silu
from kernels.fp8_gemv_residual import fp8_gemv_residual
from kernels.fp8_lm_head_argmax import fp8_lm_head_argmax
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv

from ..quant import Fp8Weight, is_fp8
from .runner import FastRunner



def leading_bytes(w: Tensor | Fp8Weight, nbytes: int) -> Tensor:
    """The first `nbytes` of a weight's values (all of them if fewer), flat, in whole 16-byte units."""
    t = (w.q if isinstance(w, Fp8Weight) else w).view(-1).view(torch.uint8)
    return t[:min(t.numel(), nbytes) // 16 * 16]


class Fp8Runner(FastRunner):
    name = "cuda-graph-fp8"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        assert is_fp8(self.w), "Fp8Runner needs weights from inference.quant.quantize_model"

    def use_gemv(self, mode: str = "auto") -> str:
        """FP8 weights decode with the Triton kernels only: "auto" and "triton" are the same."""
        if mode not in ("auto", "triton"):
            raise ValueError(f"FP8 weights decode with the Triton GEMVs only (gemv auto or triton), not {mode!r}")
        self.stream_qkv_gate_up, self.gate_up_skew = False, (0, 0)
        self.gemv_mode = "triton"
        self._select_gemv()
        self.sync = torch.zeros(2, dtype=torch.int32, device=self.device)
        self.graphs = {}
        return self.gemv_kind

    def _layers(self):
        w, eps, pdl = self.w, self.cfg.rms_norm_eps, self.pdl
        for i, layer in enumerate(w.layers):
            after = w.layers[i + 1].qkv if i + 1 < len(w.layers) else w.lm_head  # what the kernel after down reads
            qkv, o, gate_up, down = layer.qkv, layer.o, layer.gate_up, layer.down
            fp8_rmsnorm_gemv(self.x, qkv.q, qkv.scale, qkv.offset, self.qkv, norm_w=layer.attn_norm, eps=eps,
                             bias=layer.qkv_bias, pdl=pdl)
            self._attention(i)
            fp8_gemv_residual(self.attn, o.q, o.scale, o.offset, self.x, pdl=pdl)
            fp8_rmsnorm_gate_up_silu(self.x, layer.mlp_norm, eps, gate_up.q, gate_up.scale, gate_up.offset, self.h,
                                     pdl=pdl)
            nbytes = self.tuning.fp8_down_l2_prefetch  # kernels.tuning: bytes of the next weights into L2
            head = leading_bytes(after, nbytes) if nbytes else None
            fp8_gemv_residual(self.h, down.q, down.scale, down.offset, self.x, pdl=pdl, l2_prefetch=head)

    def _lm_head(self):
        head = self.w.lm_head
        if not isinstance(head, Fp8Weight):
            return super()._lm_head()
        fp8_rmsnorm_gemv(self.x, head.q, head.scale, head.offset, self.logits, norm_w=self.w.norm,
                         eps=self.cfg.rms_norm_eps, pdl=self.pdl)

    def _lm_head_argmax(self):
        w = self.w
        if not isinstance(w.lm_head, Fp8Weight):
            return super()._lm_head_argmax()
        head = w.lm_head
        fp8_lm_head_argmax(self.x, head.q, head.scale, head.offset, self.logits, self.token, self.pos, w.embed,
                           self.argmax_scratch, norm_w=w.norm, eps=self.cfg.rms_norm_eps, ring=self.ring, pdl=self.pdl)
