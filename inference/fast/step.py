"""A decode step's launches, bound once from a plan: per layer five zero-argument callables.

`bind_step(plan, state, workspace)` turns an inference.fast.plan.LayerPlan into a `StepLaunches`: for every
layer a `LayerLaunches(qkv, attention, o_proj, gate_up, down)` and the LM head's two launches, each a
functools.partial of the plan's kernel over the operands its slot always passes (the same for the Triton,
streamed and FP8 kernels: an FP8 weight passes its values and scales) and the plan's tuned arguments (L2
prefetches resolved to the weights they name). FastRunner binds each kind of step once; a step is then

    for layer in launches.layers:
        layer.qkv(); layer.attention(); layer.o_proj(); layer.gate_up(); layer.down()

(StepLaunches.run_layers) and the LM head's launch.

`kernels` (default KERNELS) maps the plan's kernel names to functions; tests pass recorders.
Not here: which kernel a step uses (plan.py), buffers and graph capture (runner.py).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import torch
from torch import Tensor

from kernels import cluster_attention as cluster
from kernels import stream_gemv as stream
from kernels.cols_gemv import cols_gemv_residual, cols_lm_head_argmax, cols_rmsnorm_gate_up_silu, cols_rmsnorm_gemv
from kernels.decode_attention import decode_attention
from kernels.fp8_cuda_gemv import (fp8_cuda_gemv_residual, fp8_cuda_lm_head_argmax, fp8_cuda_rmsnorm_gate_up_silu,
                                   fp8_cuda_rmsnorm_gemv)
from kernels.fp8_gate_up_silu import fp8_rmsnorm_gate_up_silu
from kernels.fp8_gemv_residual import fp8_gemv_residual
from kernels.fp8_lm_head_argmax import fp8_lm_head_argmax
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv
from kernels.fp8_stream_gemv import (fp8_stream_gemv_residual, fp8_stream_rmsnorm_gate_up_silu,
                                     fp8_stream_rmsnorm_gemv)
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_mma_cols import gemv_residual_mma, rmsnorm_gate_up_silu_mma, rmsnorm_gemv_mma
from kernels.gemv_residual import gemv_residual
from kernels.lm_head_argmax import lm_head_argmax
from kernels.lm_head_mma_cols import lm_head_argmax_mma
from kernels.rmsnorm_gemv import rmsnorm_gemv
from kernels.stream_lm_head import stream_lm_head_argmax

from ..quant import QUANTIZED, Fp8Weight, Int8Weight
from .plan import LayerPlan, Launch, Prefetch

KERNELS: dict[str, Callable] = {
    "rmsnorm_gemv": rmsnorm_gemv, "stream_rmsnorm_gemv": stream.stream_rmsnorm_gemv,
    "fp8_rmsnorm_gemv": fp8_rmsnorm_gemv, "fp8_cuda_rmsnorm_gemv": fp8_cuda_rmsnorm_gemv,
    "fp8_cuda_lm_head_argmax": fp8_cuda_lm_head_argmax,
    "decode_attention": decode_attention, "cluster_attention": cluster.cluster_attention,
    "gemv_residual": gemv_residual, "stream_gemv_residual": stream.stream_gemv_residual,
    "fp8_gemv_residual": fp8_gemv_residual, "fp8_cuda_gemv_residual": fp8_cuda_gemv_residual,
    "rmsnorm_gate_up_silu": rmsnorm_gate_up_silu, "stream_gate_up_silu": stream.stream_gate_up_silu,
    "fp8_rmsnorm_gate_up_silu": fp8_rmsnorm_gate_up_silu, "fp8_cuda_rmsnorm_gate_up_silu": fp8_cuda_rmsnorm_gate_up_silu,
    "lm_head_argmax": lm_head_argmax, "fp8_lm_head_argmax": fp8_lm_head_argmax,
    "fp8_stream_rmsnorm_gemv": fp8_stream_rmsnorm_gemv, "fp8_stream_gemv_residual": fp8_stream_gemv_residual,
    "fp8_stream_rmsnorm_gate_up_silu": fp8_stream_rmsnorm_gate_up_silu,
    "rmsnorm_gemv_mma": rmsnorm_gemv_mma, "gemv_residual_mma": gemv_residual_mma,
    "rmsnorm_gate_up_silu_mma": rmsnorm_gate_up_silu_mma, "lm_head_argmax_mma": lm_head_argmax_mma,
    "cols_rmsnorm_gemv": cols_rmsnorm_gemv, "cols_gemv_residual": cols_gemv_residual,
    "cols_rmsnorm_gate_up_silu": cols_rmsnorm_gate_up_silu, "cols_lm_head_argmax": cols_lm_head_argmax,
    "stream_lm_head_argmax": stream_lm_head_argmax,
}


class LayerLaunches(NamedTuple):
    """One layer's launches, in order, bound to their operands."""
    qkv: Callable[[], object]
    attention: Callable[[], object]
    o_proj: Callable[[], object]
    gate_up: Callable[[], object]
    down: Callable[[], object]


class StepLaunches(NamedTuple):
    layers: list[LayerLaunches]
    lm_head: Callable[[], object]  # logits from x
    lm_head_argmax: Callable[[], object]  # logits, argmax, token fed back (the greedy step's last launch)

    def run_layers(self) -> None:
        """All decoder layers, in order: what FastRunner's step launches before the LM head."""
        for layer in self.layers:
            layer.qkv()
            layer.attention()
            layer.o_proj()
            layer.gate_up()
            layer.down()


def gate_up_head(w_gate_up: Tensor, nbytes: int) -> tuple[Tensor, ...]:
    """The first rows of a packed [2I, K] gate/up weight that its Triton kernel's first programs read (gate
    rows 0.. and the matching up rows I..), about `nbytes` in all in whole 16-row tiles: what the streamed
    o_proj prefetches into L2 (stream_gemv's l2_prefetch) for hidden sizes whose gate/up is Triton."""
    i, k = w_gate_up.shape[0] // 2, w_gate_up.shape[1]
    rows = min(i, nbytes // (2 * k * w_gate_up.element_size()) // 16 * 16)
    return (w_gate_up[:rows], w_gate_up[i:i + rows]) if rows else ()


def leading_bytes(w: Tensor, nbytes: int) -> Tensor:
    """The first `nbytes` of a contiguous weight (all of it if smaller), flat, in whole 16-byte units."""
    return w.view(-1)[:min(w.numel(), nbytes // w.element_size()) // 8 * 8]


def leading_raw_bytes(w: Tensor | Fp8Weight | Int8Weight, nbytes: int) -> Tensor:
    """The first `nbytes` of a weight's values (all of them if fewer) as uint8, flat, in whole 16-byte units."""
    t = (w.q if isinstance(w, QUANTIZED) else w).view(-1).view(torch.uint8)
    return t[:min(t.numel(), nbytes) // 16 * 16]


def operands(w: Tensor | Fp8Weight | Int8Weight) -> tuple[Tensor | None, ...]:
    """A weight as its kernels take it: the tensor, or an 8-bit weight's values, scales and offsets (int8: None)."""
    return (w.q, w.scale, w.offset) if isinstance(w, QUANTIZED) else (w,)


def bind_step(plan: LayerPlan, s, workspace, kernels: dict[str, Callable] = KERNELS) -> StepLaunches:
    """The plan's launches over runner state `s` (FastRunner: cfg, w, pdl, the buffers x, qkv, attn, h, logits,
    token, pos, ring, argmax_scratch, mma_scratch, cache, model.cos/sin, scale) and the attention's workspace."""
    w, eps, pdl = s.w, s.cfg.rms_norm_eps, s.pdl

    def bind(launch: Launch, *args, layer=None, after=None, **kwargs) -> Callable[[], object]:
        tuned = {k: _resolve(v, layer, after) for k, v in launch.kwargs}
        return partial(kernels[launch.kernel], *args, **kwargs, **tuned)

    layers = []
    for i, layer in enumerate(w.layers):
        after = w.layers[i + 1].qkv if i + 1 < len(w.layers) else w.lm_head  # what the kernel after down reads
        at = dict(layer=layer, after=after)
        layers.append(LayerLaunches(
            # The step's first launch waits for the whole step before it (no PDL): the kernels that follow it early
            # may read pos and old cache rows before their own PDL wait (kernels.cluster_attention), and the step
            # before writes pos in its last kernel's tail, after releasing its dependents. A graph replay starts
            # after the previous one anyway; launched eagerly, the next step's attention read a stale pos (greedy
            # tokens differed from run to run on an H100: scripts/gpu/determinism10.py).
            qkv=bind(plan.qkv, s.x, *operands(layer.qkv), s.qkv, norm_w=layer.attn_norm, eps=eps,
                     bias=layer.qkv_bias, pdl=pdl and i > 0, **at),
            attention=bind(plan.attention, s.qkv, s.pos, s.cache.k[i], s.cache.v[i], s.model.cos, s.model.sin,
                           s.attn, workspace, s.scale, q_norm=layer.q_norm, k_norm=layer.k_norm, eps=eps, pdl=pdl,
                           **at),
            o_proj=bind(plan.o_proj, s.attn, *operands(layer.o), s.x, pdl=pdl, **at),
            gate_up=bind(plan.gate_up, s.x, layer.mlp_norm, eps, *operands(layer.gate_up), s.h, pdl=pdl, **at),
            down=bind(plan.down, s.h, *operands(layer.down), s.x, pdl=pdl, **at)))
    head = operands(w.lm_head)
    # their scratch: kernels.lm_head_mma_cols'
    column_heads = ("lm_head_argmax_mma", "cols_lm_head_argmax", "stream_lm_head_argmax", "fp8_cuda_lm_head_argmax")
    scratch = s.mma_scratch if plan.lm_head_argmax.kernel in column_heads else s.argmax_scratch
    return StepLaunches(
        layers,
        lm_head=bind(plan.lm_head, s.x, *head, s.logits, norm_w=w.norm, eps=eps, pdl=pdl),
        lm_head_argmax=bind(plan.lm_head_argmax, s.x, *head, s.logits, s.token, s.pos, w.embed, scratch,
                            norm_w=w.norm, eps=eps, ring=s.ring, pdl=pdl))


def _resolve(value, layer, after):
    """A plan's argument as the kernel takes it: a Prefetch becomes the tensors it names."""
    if not isinstance(value, Prefetch):
        return value
    if value.what == "gate_up_head":
        return gate_up_head(layer.gate_up, value.nbytes)
    if value.what == "next":
        return leading_bytes(after, value.nbytes)
    if value.what == "next_span":
        return (leading_bytes(after, value.nbytes),)
    if value.what == "next_bytes":
        return leading_raw_bytes(after, value.nbytes)
    raise ValueError(f"unknown prefetch {value.what!r}")
