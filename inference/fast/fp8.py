"""The GPU fast path with FP8 weights: FastRunner's decode step over the FP8 GEMVs (kernels.fp8_cuda_gemv in
CUDA C on Hopper with NVRTC, kernels.fp8_stream_gemv for the weights the tuning row streams; the kernels/fp8_*
Triton kernels elsewhere or with use_gemv("triton")).

Same loop, same single CUDA graph per step, same attention kernels and sampler tail as FastRunner; the
step plan (inference.fast.plan, for FP8 weights) changes only the weight-reading launches. Per layer:
    qkv         fp8_(cuda_)rmsnorm_gemv          input RMSNorm + QKV (+ bias)  e4m3, scale+offset per 32 columns
    attention   decode / cluster attention (unchanged: the KV cache stays bf16)
    o_proj      fp8_(cuda_)gemv_residual         o_proj, residual added in place
    gate_up     fp8_(cuda_)rmsnorm_gate_up_silu  post-attention RMSNorm + gate/up + SiLU*up
    down        fp8_(cuda_)gemv_residual         down_proj, residual added in place; its programs then prefetch
                                                 the next layer's first QKV bytes (the LM head's after the last
                                                 layer) into L2
then the LM head, int8 by default (inference.quant.Int8Weight): fp8_cuda_lm_head_argmax (CUDA C logits, then a
Triton argmax) for greedy steps beside the CUDA FP8 GEMVs, fp8_lm_head_argmax (Triton, one launch) otherwise or
for an e4m3 head; fp8_(cuda_)rmsnorm_gemv + the sampler for sampled steps; the bf16 kernels for a 16-bit head.
Activations are float32 between kernels as in bf16; prefill dequantizes each weight before its cuBLAS GEMM
(inference.fast.prefill.linear, kernels/fp8_dequantize; the int8 head's one row takes the 8-bit GEMV).

Not here: the streamed bf16 GEMVs (kernels.stream_gemv; for FP8 use_gemv "overlap" means the CUDA FP8
GEMVs), quantization (inference.quant).
"""

from __future__ import annotations

from ..quant import is_fp8
from .runner import FastRunner


class Fp8Runner(FastRunner):
    name = "cuda-graph-fp8"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        assert is_fp8(self.w), "Fp8Runner needs weights from inference.quant.quantize_model"
