"""Helpers for the kernel tests: error metric, poisoned outputs, seeded random inputs, graph capture,
attention replays checked against the reference.

Imported by the test modules as `kernel_helpers` (pytest puts this folder on sys.path).
"""

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if HAS_CUDA else "cpu"


def _nvrtc_loads() -> bool:
    from kernels import _cuda_rtc

    try:
        _cuda_rtc.nvrtc_compile("extern \"C\" __global__ void k() {}", "sm_90a")
        return True
    except Exception:
        return False


# CUDA C compiled for sm_90a on any machine where NVRTC loads (CUDA builds of torch bring it; CI installs it)
needs_nvrtc = pytest.mark.skipif(not _nvrtc_loads(), reason="NVRTC is not installed (CUDA builds of torch bring it)")


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere in out gives inf."""
    out, ref = out.double().cpu(), ref.double().cpu()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def poisoned(*shape, device=DEVICE) -> torch.Tensor:
    """A float32 output buffer full of NaN, so any element a kernel forgets to write fails."""
    return torch.full(shape, float("nan"), dtype=torch.float32, device=device)


def randn(*shape, gen, dtype=torch.float32, device=DEVICE, scale=1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(device)


def captured(fn) -> torch.cuda.CUDAGraph:
    """fn() run once (compiles its kernels outside the capture), then captured in a CUDA graph."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def check_attention_replays(graph, pos, positions, layers, outs, ws, scale) -> None:
    """Replay `graph` (a decode-attention launch per layer of `layers`, (qkv, k, v, cos, sin, ...),
    writing `outs`) at each position: every output within 1e-4 of decode_attention_ref, and the
    workspace's tickets back at zero after each replay."""
    from kernels.decode_attention import decode_attention_ref
    for p in positions:
        pos.fill_(p)
        refs = [decode_attention_ref(qkv, p, k, v, cos, sin, scale)[0] for qkv, k, v, cos, sin, *_ in layers]
        graph.replay()
        torch.cuda.synchronize()
        for out, ref in zip(outs, refs):
            assert rel_err(out, ref) <= 1e-4, f"pos={p}"
        assert not ws.tickets.any(), f"pos={p}: {ws.tickets.tolist()}"


gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


def fp8_weight(n, k, gen, scale=0.02):
    """(q, scale, offset) of a random [n, k] weight (offsets not ~0: + 0.1 * scale), quantized on the GPU."""
    from inference.quant import quantize_fp8
    w = quantize_fp8(randn(n, k, gen=gen, scale=scale, device="cpu").cuda() + 0.1 * scale)
    return w.q, w.scale, w.offset


def check_replays(step, ref_step, x, replays: int = 3):
    """step() captured in one CUDA graph (captured) updates x in place: each replay from a new x equals
    ref_step(x) within 1e-5 (the next x: the last result, rescaled)."""
    x0 = x.clone()
    graph = captured(step)
    for _ in range(replays):
        x.copy_(x0)
        want = ref_step(x0)
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(x, want) <= 1e-5
        x0 = want / want.norm() * 40


def check_down_prefetch(residual, gen):
    """residual(a, q, scale, offset, x, pdl=, l2_prefetch=) (an FP8 x += W @ a) on the 1.5B's down_proj with an
    L2 prefetch span of 2 MB + 48 bytes: the same x as the reference."""
    from kernels.fp8_gemv_residual import fp8_gemv_residual_ref
    w = fp8_weight(1536, 8960, gen)
    nxt = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
    x, r = randn(8960, gen=gen), randn(1536, gen=gen)
    ref = fp8_gemv_residual_ref(x, *w, r)
    residual(x, *w, r, pdl=True, l2_prefetch=nxt[:(2 << 20) + 48])
    torch.cuda.synchronize()
    assert rel_err(r, ref) <= 1e-5
