"""GPU fast path: Triton decode kernels in one CUDA graph per step, cuBLAS + SDPA prefill."""
