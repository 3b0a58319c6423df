"""The GPU fast path: batch-1 decode as ONE CUDA graph per step over fused Triton kernels.

Per layer, five launches read every weight exactly once:
    qkv         input RMSNorm + QKV projection + bias                     -> qkv  [q+2kv] fp32
    attention   q/k norm + RoPE + KV-cache write + split-KV attention (+ combine)   -> attn [q] fp32
    o_proj      o_proj, residual added in place                           -> x    [H] fp32
    gate_up     post-attention RMSNorm + gate/up + SiLU*up                -> h    [I] fp32
    down        down_proj, residual added in place; its programs then prefetch the next weights into L2
then the final norm + LM head, the sampler's filters (torch, only those the request uses) and gumbel_argmax:
the Gumbel-max sample and feed_token's tail (token and position written back for the next step, the next
token's embedding copied into x, the token put into a ring in pinned host memory). Greedy requests without
a repetition penalty do LM head, argmax and feed_token in one launch (lm_head_argmax), so their step is
kernels only, chained with PDL. Replaying the graph is all the host does per token; step() returns the
token's ring slot (a CPU tensor, -1 until the step writes it), so the engine needs no device-to-host copy
and no event per token. x holds the input embedding between steps (start() writes it for the first step);
the residual stream stays in float32 (a few KB).

Which kernel each launch uses, with which tuned arguments, is the step plan (inference.fast.plan.choose),
chosen once per model, GPU (the kernels.tuning row `tuning`; the generic fallback on a GPU not in the table)
and kernel modes (use_attention, use_gemv): one kind of step below the row's cuda_attention_context (the CUDA
cluster attention with the streamed "overlap" GEMVs beside it, where supported) and one from it on.
inference.fast.step binds each kind once to these buffers; this class keeps the buffers, start/step and
graph capture. FP8 weights (inference.fast.fp8) plan their own launches over the same loop.

Prefill (`PrefillModel`) uses cuBLAS GEMMs and SDPA on the same static KV cache. One graph is
captured per sampler mode (greedy, or the sampling variant a request needs) and kind of step, lazily.
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels import cluster_attention as cluster
from kernels import cols_gemv, fp8_cuda_gemv, fp8_stream_gemv
from kernels import stream_gemv as stream
from kernels.decode_attention import AttentionWorkspace, default_num_splits
from kernels.feed_token import feed_token
from kernels.gumbel_argmax import gumbel_argmax
from kernels.lm_head_argmax import argmax_scratch
from kernels.lm_head_mma_cols import mma_scratch
from kernels.tuning import Tuning, for_device

from ..config import ModelConfig
from ..kv_cache import KVCache
from ..quant import LINEAR_FIELDS, QUANTIZED, Int8Weight, is_fp8
from ..runner import Runner
from ..sampling import Sampler, SamplingParams
from ..weights import ModelWeights
from .plan import STREAMED, LayerPlan, StepPlan, Target, Workspace, choose, verify_gemv
from .prefill import PrefillModel
from .step import StepLaunches, bind_step

RING = 256  # host ring slots for sampled tokens; the engine reads each within LAG steps


class FastRunner(Runner):
    name = "cuda-graph"

    def __init__(self, cfg: ModelConfig, weights: ModelWeights, max_context: int, pdl: bool | None = None,
                 use_graph: bool = True, fused_greedy: bool = True, attention: str = "auto", gemv: str = "auto",
                 tuning: Tuning | None = None):
        """attention, gemv: the kernel modes (use_attention, use_gemv); tuning: the kernels.tuning row
        (None: this GPU's, kernels.tuning.for_device)."""
        assert weights.device.type == "cuda", "FastRunner needs CUDA weights"
        self.cfg, self.w, self.max_context, self.device = cfg, weights, max_context, weights.device
        self.tuning = for_device(self.device) if tuning is None else tuning
        self._pdl = torch.cuda.get_device_capability(self.device)[0] >= 9 if pdl is None else pdl
        self.use_graph = use_graph
        self.fused_greedy = fused_greedy  # greedy steps end with lm_head_argmax (else LM head + sampler)
        self.model = PrefillModel(cfg, weights, max_context)
        self.cache = KVCache(cfg, max_context, self.device, weights.dtype)
        self.sampler = Sampler(cfg.vocab_size, self.device)
        f32 = dict(device=self.device, dtype=torch.float32)
        self.token = torch.zeros(1, device=self.device, dtype=torch.int64)  # input token of the next step
        self.pos = torch.zeros(1, device=self.device, dtype=torch.int32)  # its position
        self.x = torch.zeros(cfg.hidden_size, **f32)
        self.qkv = torch.zeros(cfg.qkv_size, **f32)
        self.attn = torch.zeros(cfg.q_size, **f32)
        self.h = torch.zeros(cfg.intermediate_size, **f32)
        self.logits = torch.zeros(cfg.vocab_size, **f32)
        self.scale = cfg.head_dim ** -0.5
        self.argmax_scratch = argmax_scratch(self.device)
        self.mma_scratch = mma_scratch(self.device)  # the column GEMVs' LM head (gemv "mma", "cols")
        self.ring = torch.zeros(RING, dtype=torch.int64, pin_memory=True)
        self.host_pos = 0  # self.pos as the host knows it (the ring slot of each step's token)
        self.graphs: dict[tuple, torch.cuda.CUDAGraph] = {}  # (sampler mode, fused tail, attention, gemv) -> step
        self.workspaces: dict[str, object] = {}  # attention kind -> its kernel's workspace
        self.target = self._target()
        self._plan(choose(cfg, self.tuning, self.target, attention, gemv))
        self.seed = 0
        self._verify_slot = 1  # the verify step's graph slot launched last (they alternate; the first is 0)

    def _target(self) -> Target:
        """What this GPU and these weights support, for the plan."""
        cfg, w = self.cfg, self.w
        fp8 = is_fp8(w)
        streamable = frozenset() if fp8 else frozenset(
            n for n in STREAMED if all(stream.supported(getattr(layer, n)) for layer in w.layers))
        fp8_cuda = fp8 and all(fp8_cuda_gemv.supported(getattr(layer, n).q) for layer in w.layers
                               for n in LINEAR_FIELDS)
        fp8_stream = frozenset(n for n in LINEAR_FIELDS if fp8_cuda and all(
            fp8_stream_gemv.supported(getattr(layer, n).q) for layer in w.layers))
        cols = not fp8 and all(cols_gemv.supported(getattr(layer, n)) for layer in w.layers
                               for n in LINEAR_FIELDS) and cols_gemv.supported(w.lm_head)
        return Target(sms=torch.cuda.get_device_properties(self.device).multi_processor_count,
                      cuda_attention=cluster.supported(cfg.num_heads, cfg.num_kv_heads, cfg.head_dim,
                                                       self.cache.k.dtype, self.device),
                      streamable=streamable, fp8=fp8, fp8_lm_head=isinstance(w.lm_head, QUANTIZED),
                      int8_lm_head=isinstance(w.lm_head, Int8Weight),
                      fp8_cuda=fp8_cuda, fp8_stream=fp8_stream, cols=cols)

    # -- the plan: which kernels the steps launch --------------------------------------------------
    def _plan(self, plan: StepPlan) -> None:
        """Serve from `plan`: drops the bound launches and captured graphs."""
        self.plan = plan
        self._bound: dict[tuple[str, str], StepLaunches] = {}
        self.graphs = {}
        self._select_attention(self.host_pos)

    @property
    def attention_mode(self) -> str:
        return self.plan.attention_mode

    @property
    def gemv_mode(self) -> str:
        return self.plan.gemv_mode

    @property
    def pdl(self) -> bool:
        return self._pdl

    @pdl.setter
    def pdl(self, on: bool) -> None:
        """Launch with programmatic dependent launch or not (the bench's --no-pdl); rebinds the launches."""
        self._pdl = on
        self._plan(self.plan)

    def use_attention(self, mode: str = "auto", workspace=None) -> str:
        """Which decode-attention kernel the steps use: "cuda" (kernels.cluster_attention: Hopper,
        NVRTC, head_dim 128, <= 8 query heads per kv head, 16-bit cache), "triton"
        (kernels.decode_attention, any GPU), or "auto": cuda while the context fits one cluster
        per kv head (pos < the tuning row's cuda_attention_context, where it is faster), triton beyond
        (faster at long context), each with its own captured graph; where the row says no cuda_attention,
        triton. workspace: that kernel's workspace instead of the plan's (the lab's sweeps of split counts;
        cuda or triton only). Drops captured graphs; returns the mode."""
        plan = choose(self.cfg, self.tuning, self.target, mode, self.plan.gemv_mode)
        if workspace is not None and mode == "auto":
            raise ValueError("a workspace goes with attention cuda or triton, not auto")
        self.workspaces = {} if workspace is None else {mode: workspace}
        self._plan(plan)
        return self.attention_mode

    def use_gemv(self, mode: str = "auto") -> str:
        """Which kernels the layers' GEMVs (QKV, o_proj, gate/up, down) use: "triton" (one launch per
        GEMV, any GPU); "mma" (kernels.gemv_mma_cols on tensor cores) or "cols" (kernels.cols_gemv, CUDA C): a
        speculating run's plain steps; "overlap": kernels.stream_gemv for o_proj and, up to the row's stream_max_hidden, QKV and
        gate/up (weights streamed through shared memory from before the PDL wait; Hopper, NVRTC, bf16/fp16
        weights), Triton for the rest; "auto": overlap where it is supported and the step uses the CUDA
        attention (and the tuning row streams), else triton. FP8 weights: "auto" / "overlap" run the CUDA C FP8
        GEMVs (kernels.fp8_cuda_gemv, kind "cuda") where supported, "triton" the Triton FP8 kernels. Drops captured graphs;
        returns the kind the next step uses."""
        self._plan(choose(self.cfg, self.tuning, self.target, self.plan.attention_mode, mode))
        return self.gemv_kind

    def use_tuning(self, tuning: Tuning, attention: str = "auto", gemv: str = "auto") -> None:
        """Serve from another kernels.tuning row with these kernel choices; drops captured graphs (the lab's
        A/B of one tuned number: dataclasses.replace(row, down_l2_prefetch=0))."""
        plan = choose(self.cfg, tuning, self.target, attention, gemv)
        self.tuning, self.workspaces = tuning, {}
        self.verifier = None  # its GEMV family and launch configs come from the row
        self._plan(plan)

    def _select_attention(self, pos: int) -> None:
        """Set the kind of step (the plan's kernels, bound, and the attention's workspace) for a step at `pos`."""
        p = self.plan.at(pos)
        if p.attention_kind not in self.workspaces:
            self.workspaces[p.attention_kind] = self._workspace(p.workspace)
        key = (p.attention_kind, p.gemv_kind)
        if key not in self._bound:
            self._bound[key] = bind_step(p, self, self.workspaces[p.attention_kind])
        self.layer_plan, self.launches = p, self._bound[key]

    def _workspace(self, spec: Workspace):
        cfg, dev = self.cfg, self.device
        if spec.kind == "cluster":
            splits = spec.splits or cluster.default_splits(cfg.num_kv_heads, spec.cluster, dev)
            return cluster.ClusterWorkspace(cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, splits, spec.cluster, dev)
        return AttentionWorkspace(cfg.num_heads, cfg.head_dim, spec.splits or default_num_splits(cfg.num_kv_heads, dev),
                                  dev)

    @property
    def attention_kind(self) -> str:
        return self.layer_plan.attention_kind

    @property
    def gemv_kind(self) -> str:
        return self.layer_plan.gemv_kind

    # -- one decode step, as captured -----------------------------------------------------------
    def _embed(self):
        self.x.copy_(self.w.embed.index_select(0, self.token)[0])

    def _layers(self):
        """All decoder layers for the token whose embedding is in self.x, at position self.pos: per layer
        qkv, attention, o_proj, gate_up, down, as the plan bound them (StepLaunches.run_layers)."""
        self.launches.run_layers()

    def _forward_token(self) -> Tensor:
        """Logits [V] for the token in self.token at position self.pos (no sampling)."""
        self._embed()
        self._layers()
        self._lm_head()
        return self.logits

    def _lm_head(self):
        """Final norm + LM head: logits from x."""
        self.launches.lm_head()

    def _lm_head_argmax(self):
        """Final norm + LM head + argmax + feeding the token back (the greedy step's last launch)."""
        self.launches.lm_head_argmax()

    def _fused_step(self) -> bool:
        greedy, use_penalty = self.sampler.mode[:2]  # logprobs need the full logits the fused tail skips
        return self.fused_greedy and greedy and not use_penalty and self.logprobs_k is None

    def _step_body(self):
        """One decode step for the embedding in x: ends with token, pos, x and the ring updated."""
        self._layers()
        w = self.w
        if self._fused_step():
            self._lm_head_argmax()
            return
        self._lm_head()
        s = self.sampler
        greedy, use_penalty = s.mode[:2]
        if greedy:  # with a repetition penalty (or fused_greedy off)
            feed_token(s(self.logits), self.token, self.pos, w.embed, self.x, ring=self.ring)
            return
        scores, divide = s.scores(self.logits)
        gumbel_argmax(scores, s.seed_key, s.step, self.argmax_scratch, self.token, self.pos, w.embed, self.x,
                      temperature=s.temperature if divide else None, seen=s.seen if use_penalty else None,
                      ring=self.ring)

    def _graph(self) -> torch.cuda.CUDAGraph:
        """The captured step for the current sampler mode and attention kernel (captured on first use)."""
        key = (self.sampler.mode, self._fused_step(), self.attention_kind, self.gemv_kind)
        if key not in self.graphs:
            saved = (self.token.clone(), self.pos.clone(), self.x.clone(), self.sampler.step.clone(),
                     self.sampler.seen.clone())
            stream = torch.cuda.Stream(self.device)
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                # Warm-up runs autotuning and compiles every kernel outside the capture. It writes
                # one KV row at self.pos; the real step rewrites that row before anyone reads it.
                for _ in range(2):
                    self._restore(saved)
                    self._step_body()
            torch.cuda.current_stream(self.device).wait_stream(stream)
            self._restore(saved)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                self._step_body()
            self._restore(saved)
            self.graphs[key] = graph
        return self.graphs[key]

    def _restore(self, saved):
        token, pos, x, step, seen = saved
        self.token.copy_(token)
        self.pos.copy_(pos)
        self.x.copy_(x)
        self.sampler.step.copy_(step)
        self.sampler.seen.copy_(seen)

    # -- Runner API -----------------------------------------------------------------------------
    @torch.inference_mode()
    def start(self, prompt_ids: list[int], params: SamplingParams) -> Tensor:
        ids = torch.tensor(prompt_ids, dtype=torch.int64).to(self.device, non_blocking=True)
        speculate = self._speculative_kernels(params)
        self.seed = self.sampler.configure(params, ids)
        self.logprobs_k = params.logprobs
        logits = self.model.prefill(ids, self.cache, use_graph=self.use_graph)
        self.token.copy_(self.sampler(logits))
        self._keep_logprobs(logits, self.token)
        self.pos.fill_(len(prompt_ids))
        self.host_pos = len(prompt_ids)
        self._embed()  # every step starts from the input embedding in x
        if self.use_graph:  # capture (once per mode and kernel) before the first step: the graphs
            for pos in (len(prompt_ids) + params.max_tokens - 1, len(prompt_ids)):  # of the last and first step
                self._select_attention(pos)
                self._graph()
            if speculate:
                self._verifier().capture()
        return self.token.clone()

    @property
    def can_verify(self) -> bool:
        """Whether this runner can speculate (the verify step's kernels take 16-bit weights)."""
        return not is_fp8(self.w)

    @property
    def speculative_kernels(self) -> tuple[str, str]:
        """(attention, gemv) modes of a speculating run's plain steps, whose arithmetic its verify steps repeat
        per column: the Triton attention, and the column GEMVs the runner was asked for (gemv "cols" or "mma"),
        else plan.verify_gemv's (the streamed GEMVs, the CUDA column ones, the tensor-core ones or Triton's;
        inference.speculative.fast_verify)."""
        asked = (getattr(self, "_modes_before_speculation", None) or (self.attention_mode, self.gemv_mode))[1]
        return "triton", asked if asked in ("cols", "mma") else verify_gemv(self.tuning, self.target, self.cfg)

    @property
    def speculation_keeps_kernels(self) -> bool:
        """Whether a speculating request would run exactly the kernels this runner's plain steps use (its
        plan, from before any speculating request, equals the plan of `speculative_kernels`): then speculation
        changes no output and the engine turns it on by default."""
        if not self.can_verify:
            return False
        modes = getattr(self, "_modes_before_speculation", None) or (self.attention_mode, self.gemv_mode)
        usual = choose(self.cfg, self.tuning, self.target, *modes)
        spec = choose(self.cfg, self.tuning, self.target, *self.speculative_kernels)
        return (usual.below, usual.above) == (spec.below, spec.above)

    def _speculative_kernels(self, params: SamplingParams) -> bool:
        """Whether this request speculates; if so its plain steps run `speculative_kernels` (the verify step's
        arithmetic, so the output is the plain greedy output on those kernels), else the
        kernel modes from before the last speculating request. Switching drops the captured steps."""
        speculate = (params.speculate and params.greedy and params.repetition_penalty == 1.0
                     and params.logprobs is None and self.can_verify)
        saved = getattr(self, "_modes_before_speculation", None)
        if speculate and (self.attention_mode, self.gemv_mode) != self.speculative_kernels:
            self._modes_before_speculation = (self.attention_mode, self.gemv_mode)
            self.use_attention(self.speculative_kernels[0])
            self.use_gemv(self.speculative_kernels[1])
        elif not speculate and saved is not None:
            self._modes_before_speculation = None
            self.use_attention(saved[0])
            self.use_gemv(saved[1])
        return speculate

    def _verifier(self):
        """Speculative decoding's verify step (inference.speculative.fast_verify), built on first use."""
        if getattr(self, "verifier", None) is None:
            from ..speculative.fast_verify import FastVerifier
            self._select_attention(self.host_pos)  # the Triton attention workspace exists
            self.verifier = FastVerifier.for_runner(self)
        return self.verifier

    @property
    def max_draft(self) -> int:
        return self._verifier().max_draft

    def verify(self, draft: list[int]) -> list[int]:
        """The accepted drafted tokens and the model's next one (greedy)."""
        return self.verify_async(draft)()

    can_chain = True  # verify_async(draft, ahead_of=n) may launch a verify step behind one in flight

    @torch.inference_mode()
    def verify_async(self, draft: list[int], ahead_of: int = 0):
        """Launch the verify step of `draft`; returns the callable that waits for its result (the accepted
        drafted tokens and the model's next one). A plain step where the verify step's rows would pass the
        end of the cache. Nothing but another verify step may run on the runner before the result is taken.
        ahead_of > 0: launched behind a verify step in flight that yields at most `ahead_of` tokens (it runs
        from the state that one leaves; results are taken in launch order, at most 2 in flight); None where
        it would not fit in the cache."""
        v = self._verifier()
        if ahead_of:
            if not self.use_graph or not v.fits(self.host_pos + ahead_of, len(draft)):
                return None
        elif not v.fits(self.host_pos, len(draft)):
            slot = self.step().numpy()

            def plain() -> list[int]:
                while slot[0] < 0:
                    pass
                return [int(slot[0])]
            return plain
        if not self.use_graph:
            out = v.run_eager(draft)
            self.host_pos += len(out)
            return lambda: out
        slot = self._verify_slot = (self._verify_slot + 1) % 2  # the slots in turn
        kc = v.launch(draft, slot, pos=self.host_pos + ahead_of)

        def result() -> list[int]:
            out = v.finish(kc, slot)
            self.host_pos += len(out)
            return out
        return result

    @torch.inference_mode()
    def step(self) -> Tensor:
        """The next token's slot in the pinned host ring: -1 until the step writes the token."""
        self._select_attention(self.host_pos)
        slot = (self.host_pos + 1) % RING
        self.ring[slot] = -1  # its last token (RING steps ago) was read long since
        if self.use_graph:
            self._graph().replay()
        else:
            self._step_body()
        self._keep_logprobs(self.logits, self.token)  # after the step: its logits and the token it sampled
        self.host_pos += 1
        return self.ring[slot:slot + 1]

    # -- public hooks for tools (lab/): the step as captured, and its plan ---------------------------
    def verify_step(self):
        """The speculative verify step (inference.speculative.fast_verify.FastVerifier; built on first use)."""
        return self._verifier()

    def step_graph(self) -> torch.cuda.CUDAGraph:
        """The captured step for the current sampler mode and kernels (captured on first use)."""
        return self._graph()

    def launch_step(self) -> None:
        """One step's kernels, launched now on the current stream (what step_graph() holds)."""
        self._step_body()

    def step_plan(self, pos: int | None = None) -> LayerPlan:
        """The kernels a step at `pos` (default: the next step) launches, with their tuned arguments."""
        return self.plan.at(self.host_pos if pos is None else pos)

    @torch.inference_mode()
    def forced_logits(self, token: int) -> Tensor:
        """Teacher forcing for tests: logits after feeding `token` at the current position."""
        self.token.fill_(token)
        logits = self._forward_token().clone()
        self.pos.add_(1)
        return logits
