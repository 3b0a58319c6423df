"""The decode step's plan: which kernel each launch of a layer uses, with which tuned arguments.

`choose(cfg, tuning, target, attention, gemv)` is a pure function of the model's shape, the kernels.tuning
row, what the GPU and the loaded weights support (`Target`, measured once by FastRunner) and the requested
kernel modes. It returns a `StepPlan`: one `LayerPlan` for steps below the row's cuda_attention_context and
one from it on (the same one unless attention is "auto"), each naming the kernel and tuned keyword arguments
of a layer's five launches (qkv, attention, o_proj, gate_up, down) and of the LM head's two (logits for the
sampler; the greedy step's fused argmax). A mode the GPU or the weights cannot run is a ValueError here.
inference.fast.step binds a LayerPlan to the runner's buffers and weights; no kernel is imported here.

The choices (kernels/PERF.md has the measurements):
- attention "cuda": kernels.cluster_attention (CUDA C, thread-block clusters: Hopper, NVRTC, head_dim 128,
  <= 8 query heads per kv head); "triton": kernels.decode_attention; "auto": cuda below the row's
  cuda_attention_context with one cluster per kv head (where supported and the row says cuda_attention),
  triton from it on.
- gemv "overlap": kernels.stream_gemv for o_proj and, up to the row's stream_max_hidden, QKV and gate/up
  (weights streamed through shared memory from before the PDL wait, beside the cluster attention, which
  releases them early); where gate/up stays Triton, o_proj prefetches its first rows into L2. Beside the Triton
  attention (a speculating run's plain steps) down_proj streams too where the row says stream_down (its
  activation fed through the ring, so that a verify step streams it over k tokens), and the greedy LM head where
  it says stream_head (kernels.stream_lm_head: the logits streamed, then an argmax launch). "triton": one
  Triton launch per GEMV. "mma": kernels.gemv_mma_cols / lm_head_mma_cols (tensor cores, 1..16 columns, the
  same bits per column for any count): a speculating run's plain steps, whose verify steps run the same GEMVs
  on k columns. "cols": kernels.cols_gemv (CUDA C on CUDA cores, 1..16 columns, the same bits per column for
  any count; Target.cols), for the same use. "auto": overlap beside the CUDA attention (where it streams and
  the row says stream_gemv), else the row's one-launch GEMVs (`plain_gemv`: cols up to the row's
  cols_gemv_max_hidden where Target.cols, mma where it says mma_gemv, else triton) beside the Triton attention.
- FP8 weights: gemv "auto" or "overlap": the CUDA C FP8 GEMVs (kernels.fp8_cuda_gemv; kind "cuda") at every
  position where they run here (Target.fp8_cuda) and the row says fp8_cuda_gemv (auto), of which the weights
  the row names in fp8_stream (up to K = fp8_stream_max_k, where Target.fp8_stream allows) stream through a
  shared-memory ring (kernels.fp8_stream_gemv); "triton": the Triton FP8 twins (kernels/fp8_*), also the
  fallback of auto. The LM head's launches stay Triton. No "mma".
- down_proj prefetches the next weight's first bytes (the next layer's QKV, the LM head after the last) into L2.

Not here: the sampler's tail (FastRunner._step_body), launch configs (kernels.tuning rows, read by the kernels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernels.tuning import Tuning

from ..config import ModelConfig

ATTENTION_MODES = ("auto", "cuda", "triton")
GEMV_MODES = ("auto", "overlap", "triton", "mma", "cols")
STREAMED = ("o", "qkv", "gate_up", "down")  # the layer weights the overlap GEMVs can stream, by LayerWeights field


@dataclass(frozen=True)
class Target:
    """What the plan needs to know of the GPU and the loaded weights (FastRunner measures it once)."""
    sms: int  # streaming multiprocessors (the streamed gate/up's skew rule)
    cuda_attention: bool  # kernels.cluster_attention.supported for this model's heads and KV cache here
    streamable: frozenset[str] = frozenset()  # STREAMED fields kernels.stream_gemv can stream in every layer
    fp8: bool = False  # layer weights in FP8 (inference.quant.Fp8Weight)
    fp8_lm_head: bool = False  # the LM head in 8 bits (inference.quant.Fp8Weight or Int8Weight)
    int8_lm_head: bool = False  # ... in int8 (Int8Weight: the FP8 engine's; CUDA C beside the CUDA FP8 GEMVs)
    fp8_cuda: bool = False  # kernels.fp8_cuda_gemv runs every layer's FP8 weights here (Hopper, NVRTC)
    fp8_stream: frozenset = frozenset()  # weights (qkv, o, ...) kernels.fp8_stream_gemv takes in every layer
    cols: bool = False  # kernels.cols_gemv takes every 16-bit layer weight and the LM head here (Hopper, NVRTC)


@dataclass(frozen=True)
class Prefetch:
    """An l2_prefetch argument, resolved per layer when the plan is bound (inference.fast.step): about `nbytes`
    of "gate_up_head" (the layer's gate/up rows its Triton kernel reads first), "next" (the next weight's
    first elements: the next layer's QKV, the LM head after the last layer), "next_span" (the same as the one span
    of a streamed GEMV's l2_prefetch) or "next_bytes" (the same as raw bytes, for FP8 values)."""
    what: str
    nbytes: int


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the kernel's name (a key of inference.fast.step.KERNELS) and the tuned keyword
    arguments the plan adds to the operands every launch of its slot passes."""
    kernel: str
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        def show(v):
            return f"<tuning {v.name}>" if isinstance(v, Tuning) else repr(v)
        return f"{self.kernel}({', '.join(f'{k}={show(v)}' for k, v in self.kwargs)})"


def launch(kernel: str, **kwargs) -> Launch:
    return Launch(kernel, tuple(kwargs.items()))


@dataclass(frozen=True)
class Workspace:
    """The attention kernel's workspace: "cluster" (kernels.cluster_attention.ClusterWorkspace) or "split_kv"
    (kernels.decode_attention.AttentionWorkspace); splits None: the kernel's default for this GPU."""
    kind: str
    splits: int | None = None
    cluster: int | None = None


@dataclass(frozen=True)
class LayerPlan:
    """One kind of step: the kernels of a layer's five launches and of the LM head, with their tuned arguments."""
    attention_kind: str  # "cuda" | "triton"
    gemv_kind: str  # "overlap" | "triton" | "mma"; FP8 weights: "cuda" | "triton"
    workspace: Workspace
    qkv: Launch  # input RMSNorm + QKV projection (+ bias)
    attention: Launch  # q/k norm + RoPE + KV-cache write + attention
    o_proj: Launch  # o_proj, residual added in place
    gate_up: Launch  # post-attention RMSNorm + gate/up + SiLU * up
    down: Launch  # down_proj, residual added in place
    lm_head: Launch  # final RMSNorm + LM head -> logits
    lm_head_argmax: Launch  # the same + argmax + the token fed back (greedy steps)

    SLOTS = ("qkv", "attention", "o_proj", "gate_up", "down")

    def describe(self) -> list[str]:
        return [f"{slot}: {getattr(self, slot)}" for slot in self.SLOTS + ("lm_head", "lm_head_argmax")]


@dataclass(frozen=True)
class StepPlan:
    """The step's kernels for one model on one GPU: `below` for positions < `switch`, `above` from it on."""
    tuning: Tuning
    attention_mode: str  # "auto" | "cuda" | "triton" (auto where the GPU cannot run cuda: triton)
    gemv_mode: str  # "auto" | "overlap" | "triton" | "mma"; FP8 weights: "cuda" | "triton"
    switch: int
    below: LayerPlan
    above: LayerPlan

    def at(self, pos: int) -> LayerPlan:
        """The plan of a step at position `pos`."""
        return self.below if pos < self.switch else self.above

    def describe(self) -> list[str]:
        head = [f"tuning {self.tuning.name}, attention {self.attention_mode}, gemv {self.gemv_mode}"]
        kinds = [(f"positions < {self.switch}", self.below), (f"positions >= {self.switch}", self.above)]
        if self.below == self.above:
            kinds = [("every position", self.below)]
        return head + [line for name, p in kinds for line in
                       [f"{name}: attention {p.attention_kind}, gemv {p.gemv_kind}, {p.workspace}"]
                       + ["  " + s for s in p.describe()]]


def choose(cfg: ModelConfig, tuning: Tuning, target: Target, attention: str = "auto", gemv: str = "auto") -> StepPlan:
    """The plan for this model, tuning row and GPU with the requested kernel modes (see the module docstring)."""
    gemv_mode = _gemv_mode(cfg, tuning, target, gemv)
    attention_mode = _attention_mode(tuning, target, attention)

    def kind(attention_kind: str) -> LayerPlan:  # (FP8: gemv_mode is "cuda" or "triton", never auto)
        gemv_kind = gemv_mode if gemv_mode != "auto" else "overlap" if attention_kind == "cuda" else plain_gemv(tuning, target,
                                                                                                cfg.hidden_size)
        layer = _fp8_layer if target.fp8 else _layer
        return layer(cfg, tuning, target, attention_mode, attention_kind, gemv_kind)

    below = kind("triton" if attention_mode == "triton" else "cuda")
    above = kind("cuda" if attention_mode == "cuda" else "triton")
    return StepPlan(tuning, attention_mode, gemv_mode, tuning.cuda_attention_context, below, above)


def _gemv_mode(cfg: ModelConfig, t: Tuning, target: Target, mode: str) -> str:
    if target.fp8:  # "cuda" (a plan's resolved mode, passed back by use_attention) is "overlap" here
        if mode in ("mma", "cols"):
            raise ValueError(f"FP8 weights have no {'MMA' if mode == 'mma' else 'column'} GEMVs (gemv auto, "
                             "overlap or triton)")
        if mode not in GEMV_MODES + ("cuda",):
            raise ValueError(f"GEMV kernels must be auto, overlap or triton, not {mode!r}")
        if mode in ("overlap", "cuda") and not target.fp8_cuda:
            raise ValueError("the CUDA FP8 GEMVs need e4m3 weights with K % 32 == 0 and a GPU of compute "
                             "capability >= 9.0 with NVRTC")
        if mode in ("overlap", "cuda") or (mode == "auto" and target.fp8_cuda and t.fp8_cuda_gemv):
            return "cuda"
        return "triton"
    if mode not in GEMV_MODES:
        raise ValueError(f"GEMV kernels must be auto, overlap, triton, mma or cols, not {mode!r}")
    if mode == "cols" and not target.cols:
        raise ValueError("the CUDA column GEMVs need bf16/fp16 weights with K % 8 == 0 and a GPU of compute "
                         "capability >= 9.0 with NVRTC")
    if mode in ("mma", "cols"):
        return mode
    names = () if mode == "triton" else streams(t, cfg.hidden_size)
    ok = set(names) <= target.streamable
    if mode == "auto":
        return "auto" if ok and t.stream_gemv else plain_gemv(t, target, cfg.hidden_size)
    if not ok:
        raise ValueError("the CUDA GEMV kernels need bf16/fp16 weights with sizes that are multiples of 16 "
                         "and a GPU of compute capability >= 9.0 with NVRTC")
    return mode


def verify_gemv(t: Tuning, target: Target, cfg: ModelConfig) -> str:
    """The GEMVs of a speculating run's plain steps, which its verify steps repeat on k columns: "overlap" (QKV,
    o_proj and gate/up streamed, kernels.stream_gemv, k tokens a launch in a verify step; down_proj too where the
    row says stream_down, else Triton) where
    the row says stream_verify, streams them at this hidden size and the GPU runs them, unless the row's one-launch
    GEMVs are the CUDA column ones; else plain_gemv's."""
    plain = plain_gemv(t, target, cfg.hidden_size)
    ok = (t.stream_verify and t.streams_qkv_gate_up(cfg.hidden_size)
          and set(streams(t, cfg.hidden_size)) <= target.streamable)
    return "overlap" if ok and plain != "cols" else plain


def streams(t: Tuning, hidden_size: int) -> tuple[str, ...]:
    """The layer weights (STREAMED names) the overlap GEMVs may stream at this hidden size: o_proj; QKV and gate/up
    up to the row's stream_max_hidden, and there down_proj too where the row says stream_down."""
    if not t.streams_qkv_gate_up(hidden_size):
        return ("o",)
    return ("o", "qkv", "gate_up") + (("down",) if t.stream_down else ())


def plain_gemv(t: Tuning, target: Target, hidden_size: int) -> str:
    """The one-launch GEMVs of this row's 16-bit plain steps, which a speculating run's verify steps repeat on k
    columns: "cols" up to the row's cols_gemv_max_hidden where the GPU runs them, "mma" where the row says
    mma_gemv, else "triton"."""
    if target.cols and hidden_size <= t.cols_gemv_max_hidden:
        return "cols"
    return "mma" if t.mma_gemv else "triton"


def _attention_mode(t: Tuning, target: Target, mode: str) -> str:
    if mode not in ATTENTION_MODES:
        raise ValueError(f"attention kernel must be auto, cuda or triton, not {mode!r}")
    if mode == "cuda" and not target.cuda_attention:
        raise ValueError("the CUDA attention kernel needs head_dim 128, <= 8 query heads per kv head, "
                         "a 16-bit cache and a GPU of compute capability >= 9.0 with NVRTC")
    return mode if mode != "auto" or (target.cuda_attention and t.cuda_attention) else "triton"


def _attention(t: Tuning, mode: str, kind: str, overlap: bool, carveout: int | None) -> tuple[Workspace, Launch]:
    """The attention launch and its workspace. CUDA: auto runs only contexts of one cluster, so one cluster
    per kv head (no idle CTAs: 4.06 vs 4.23 us per launch); forced, enough clusters for any context. Beside
    the overlap GEMVs it releases the next kernel at its start (early)."""
    if kind == "cuda":
        splits = t.cluster if mode == "auto" else None
        return (Workspace("cluster", splits, t.cluster),
                launch("cluster_attention", early=overlap, carveout=carveout))
    return Workspace("split_kv"), launch("decode_attention")


def _layer(cfg: ModelConfig, t: Tuning, target: Target, attention_mode: str, attention_kind: str,
           gemv_kind: str) -> LayerPlan:
    """16-bit weights: the Triton GEMVs, the overlap GEMVs streamed beside the attention, or the MMA GEMVs."""
    if gemv_kind in ("mma", "cols"):
        workspace, attention = _attention(t, attention_mode, attention_kind, False, None)
        name = {"mma": "{}_mma", "cols": "cols_{}"}[gemv_kind].format
        residual = launch(name("gemv_residual"))
        return LayerPlan(attention_kind, gemv_kind, workspace, launch(name("rmsnorm_gemv")), attention, residual,
                         launch(name("rmsnorm_gate_up_silu")), residual, launch(name("rmsnorm_gemv")),
                         launch(name("lm_head_argmax")))
    overlap = gemv_kind == "overlap"
    streamed = overlap and t.streams_qkv_gate_up(cfg.hidden_size)  # QKV and gate/up stream too
    c = t.stream_carveout if streamed else None
    workspace, attention = _attention(t, attention_mode, attention_kind, overlap, c)
    speculating = streamed and attention_kind == "triton"  # a speculating run's plain steps (the rows' whys)
    if streamed:
        qkv = launch("stream_rmsnorm_gemv", budget=t.qkv_budget, early=True, carveout=c,
                     **({"mma": True} if speculating and t.qkv_mma else {}))
        gate_up = launch("stream_gate_up_silu", budget=t.gate_up_budget, carveout=c,
                         skew=t.skew_for(cfg.intermediate_size, target.sms))
    else:
        qkv = launch("rmsnorm_gemv", tuning=t)
        gate_up = launch("rmsnorm_gate_up_silu", tuning=t)
    if overlap:  # a Triton gate/up released early would only hold SM slots while it waits
        head = () if streamed else Prefetch("gate_up_head", t.gate_up_l2_prefetch)
        o_proj = launch("stream_gemv_residual", budget=t.o_budget, early=streamed, carveout=c, l2_prefetch=head)
    else:
        o_proj = launch("gemv_residual", tuning=t)
    if speculating and t.stream_down:
        ahead = Prefetch("next_span", t.down_l2_prefetch) if t.down_l2_prefetch else ()
        down = launch("stream_gemv_residual", ring=True, budget=t.down_budget, carveout=c, l2_prefetch=ahead)
    else:
        ahead = Prefetch("next", t.down_l2_prefetch) if t.down_l2_prefetch else None
        down = launch("gemv_residual", l2_prefetch=ahead, tuning=t)
    logits, greedy = _head(t, target)
    if speculating and t.stream_head:
        greedy = launch("stream_lm_head_argmax", **({"mma": True} if t.head_mma else {}), carveout=c)
    return LayerPlan(attention_kind, gemv_kind, workspace, qkv, attention, o_proj, gate_up, down, logits, greedy)


def _fp8_layer(cfg: ModelConfig, t: Tuning, target: Target, attention_mode: str, attention_kind: str,
               gemv_kind: str) -> LayerPlan:
    """FP8 weights: the CUDA C FP8 GEMVs (gemv_kind "cuda") or the kernels/fp8_* Triton twins of the
    weight-reading launches; the same attention."""
    early = t.fp8_attention_early and gemv_kind == "cuda"  # a Triton o_proj released early would only wait
    workspace, attention = _attention(t, attention_mode, attention_kind, early, None)
    n = t.fp8_down_l2_prefetch
    fp8 = "fp8_cuda_" if gemv_kind == "cuda" else "fp8_"
    ahead = Prefetch("next_bytes", n) if n else None
    if gemv_kind == "cuda":  # each slot the row streams: kernels.fp8_stream_gemv, the others fp8_cuda_gemv
        k = {"qkv": cfg.hidden_size, "o": cfg.q_size, "gate_up": cfg.hidden_size, "down": cfg.intermediate_size}

        def kind(weight: str) -> str:
            streamed = weight in t.fp8_stream and weight in target.fp8_stream and k[weight] <= t.fp8_stream_max_k
            return "fp8_stream_" if streamed else fp8
        down = launch(f"{kind('down')}gemv_residual", l2_prefetch=ahead)
        o_proj = launch(f"{kind('o')}gemv_residual", early=t.fp8_o_proj_early)
        qkv = launch(f"{kind('qkv')}rmsnorm_gemv", **({"early": True} if t.fp8_qkv_early else {}))
        gate_up = launch(f"{kind('gate_up')}rmsnorm_gate_up_silu")
    else:
        down = launch("fp8_gemv_residual", l2_prefetch=ahead)
        o_proj, qkv, gate_up = launch("fp8_gemv_residual"), launch("fp8_rmsnorm_gemv"), launch("fp8_rmsnorm_gate_up_silu")
    return LayerPlan(attention_kind, gemv_kind, workspace, qkv, attention, o_proj, gate_up, down,
                     *_head(t, target, cuda=gemv_kind == "cuda"))


def _head(t: Tuning, target: Target, cuda: bool = False) -> tuple[Launch, Launch]:
    """The LM head's launches: logits, and logits + argmax + feed. An int8 head beside the CUDA FP8 GEMVs: CUDA
    C logits, then a Triton argmax launch (kernels.fp8_cuda_gemv); other 8-bit heads: Triton, one launch."""
    if target.fp8_lm_head:
        if target.int8_lm_head and cuda:
            return launch("fp8_cuda_rmsnorm_gemv"), launch("fp8_cuda_lm_head_argmax")
        return launch("fp8_rmsnorm_gemv"), launch("fp8_lm_head_argmax")
    return launch("rmsnorm_gemv", tuning=t), launch("lm_head_argmax", tuning=t)
