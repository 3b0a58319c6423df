"""The GPU fast path: batch-1 decode as ONE CUDA graph per step over fused Triton kernels.

Per layer, five launches read every weight exactly once:
    rmsnorm_gemv          input RMSNorm + QKV projection + bias           -> qkv  [q+2kv] fp32
    decode_attention      q/k norm + RoPE + KV-cache write + split-KV attention (+ combine); on
                          Hopper below CUDA_ATTENTION_CONTEXT: cluster_attention (CUDA C, clusters)
    gemv_residual         o_proj, residual added in place                 -> x    [H] fp32
    rmsnorm_gate_up_silu  post-attention RMSNorm + gate/up + SiLU*up      -> h    [I] fp32
    gemv_residual         down_proj, residual added in place              -> x
                          (its first programs then prefetch the next kernel's first weights into L2)
then the final norm + LM head (rmsnorm_gemv), the sampler's filters (torch, only those the request
uses) and gumbel_argmax: the Gumbel-max sample and feed_token's tail (token and position written
back for the next step, the next token's embedding copied into x, the token put into a ring in
pinned host memory). Greedy requests without a repetition penalty do LM head, argmax and
feed_token in one launch (lm_head_argmax), so their step is Triton kernels only, chained with
PDL. Replaying the graph is all the host does per token; step() returns the token's
ring slot (a CPU tensor, -1 until the step writes it), so the engine needs no device-to-host
copy and no event per token. x holds the input embedding between steps (start() writes it for
the first step); the residual stream stays in float32 (a few KB).

use_gemv("overlap") runs o_proj with kernels.stream_gemv (CUDA C, weights streamed through shared
memory from before the PDL wait) in a ring small enough to share an SM with the cluster attention,
which releases it at its start: o_proj's weights are in shared memory when attention ends. Up to
the tuning row's stream_max_hidden QKV and gate/up stream too: QKV's CTAs load as soon as down_proj's programs leave
room and release the attention at their start (whose CTAs then copy their K/V tiles beside them),
gate/up's load during attention and o_proj (which then releases it at its start); beyond it, where
gate/up is Triton, o_proj prefetches gate/up's first rows into L2 during attention. "auto" picks it
beside the CUDA attention.

Every tuned number (ring budgets, skew, L2 prefetch sizes, launch configs, the attention switch point)
comes from the kernels.tuning row of this GPU (`tuning`; the generic fallback on a GPU not in the table).

Prefill (`PrefillModel`) uses cuBLAS GEMMs and SDPA on the same static KV cache. One graph is
captured per sampler mode (greedy, or the sampling variant a request needs), lazily.
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels import cluster_attention as cluster
from kernels import stream_gemv as stream
from kernels.decode_attention import AttentionWorkspace, decode_attention, default_num_splits
from kernels.feed_token import feed_token
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_residual import gemv_residual
from kernels.gumbel_argmax import gumbel_argmax
from kernels.lm_head_argmax import argmax_scratch, lm_head_argmax
from kernels.rmsnorm_gemv import rmsnorm_gemv
from kernels.tuning import Tuning, for_device

from ..config import ModelConfig
from ..kv_cache import KVCache
from ..quant import is_fp8
from ..runner import Runner
from ..sampling import Sampler, SamplingParams
from ..weights import ModelWeights
from .prefill import PrefillModel

RING = 256  # host ring slots for sampled tokens; the engine reads each within LAG steps

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


class FastRunner(Runner):
    name = "cuda-graph"

    def __init__(self, cfg: ModelConfig, weights: ModelWeights, max_context: int, pdl: bool | None = None,
                 use_graph: bool = True, fused_greedy: bool = True, attention: str = "auto", gemv: str = "auto",
                 tuning: Tuning | None = None):
        """attention, gemv: the kernel choices (use_attention, use_gemv); tuning: the kernels.tuning row
        (None: this GPU's, kernels.tuning.for_device)."""
        assert weights.device.type == "cuda", "FastRunner needs CUDA weights"
        self.cfg, self.w, self.max_context, self.device = cfg, weights, max_context, weights.device
        self.tuning = for_device(self.device) if tuning is None else tuning
        self.pdl = torch.cuda.get_device_capability(self.device)[0] >= 9 if pdl is None else pdl
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
        self.ring = torch.zeros(RING, dtype=torch.int64, pin_memory=True)
        self.host_pos = 0  # self.pos as the host knows it (the ring slot of each step's token)
        self.graphs: dict[tuple, torch.cuda.CUDAGraph] = {}  # (sampler mode, fused tail, attention, gemv) -> step
        self.use_gemv(gemv)
        self.use_attention(attention)
        self.seed = 0

    def use_attention(self, mode: str = "auto") -> str:
        """Which decode-attention kernel the steps use: "cuda" (kernels.cluster_attention: Hopper,
        NVRTC, head_dim 128, <= 8 query heads per kv head, 16-bit cache), "triton"
        (kernels.decode_attention, any GPU), or "auto": cuda while the context fits one cluster
        per kv head (pos < the tuning row's cuda_attention_context, where it is faster), triton beyond
        (faster at long context), each with its own captured graph; where the row says no cuda_attention,
        triton. Drops captured graphs; returns the mode."""
        cfg = self.cfg
        if mode not in ("auto", "cuda", "triton"):
            raise ValueError(f"attention kernel must be auto, cuda or triton, not {mode!r}")
        ok = cluster.supported(cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, self.cache.k.dtype, self.device)
        if mode == "cuda" and not ok:
            raise ValueError("the CUDA attention kernel needs head_dim 128, <= 8 query heads per kv head, "
                             "a 16-bit cache and a GPU of compute capability >= 9.0 with NVRTC")
        self.attention_mode = mode if mode != "auto" or (ok and self.tuning.cuda_attention) else "triton"
        self.workspaces: dict[str, object] = {}
        self.graphs = {}
        self._select_attention(self.host_pos)
        return self.attention_mode

    def use_gemv(self, mode: str = "auto") -> str:
        """Which kernels the layers' GEMVs (QKV, o_proj, gate/up, down) use: "triton" (one launch per
        GEMV, any GPU); "overlap": kernels.stream_gemv for o_proj and, up to the row's stream_max_hidden, QKV and
        gate/up (weights streamed through shared memory from before the PDL wait; Hopper, NVRTC, bf16/fp16
        weights), Triton for the rest; "auto": overlap where it is supported and the step uses the CUDA
        attention (and the tuning row streams), else triton. Drops captured graphs; returns the kind used."""
        if mode not in ("auto", "overlap", "triton"):
            raise ValueError(f"GEMV kernels must be auto, overlap or triton, not {mode!r}")
        t = self.tuning
        self.stream_qkv_gate_up = t.streams_qkv_gate_up(self.cfg.hidden_size)
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.gate_up_skew = t.skew_for(self.cfg.intermediate_size, sms)
        names = () if mode == "triton" else ("o", "qkv", "gate_up") if self.stream_qkv_gate_up else ("o",)
        ok = all(stream.supported(getattr(layer, n)) for layer in self.w.layers for n in names)
        if mode == "auto":
            mode = "auto" if ok and t.stream_gemv else "triton"
        elif not ok:
            raise ValueError("the CUDA GEMV kernels need bf16/fp16 weights with sizes that are multiples of 16 "
                             "and a GPU of compute capability >= 9.0 with NVRTC")
        self.gemv_mode = mode
        self._select_gemv()
        self.graphs = {}
        return self.gemv_kind

    def _select_gemv(self) -> None:
        """The GEMV kind of the next step: "auto" is overlap beside the CUDA attention and triton beside
        the Triton attention (long contexts: overlap measured 1% slower at ctx 4096 on 1.5B)."""
        auto = "overlap" if getattr(self, "attention_kind", None) == "cuda" else "triton"
        self.gemv_kind = auto if self.gemv_mode == "auto" else self.gemv_mode

    def _select_attention(self, pos: int) -> None:
        """Set the kernel (and its workspace) for a step at `pos`."""
        mode = self.attention_mode
        kind = mode if mode != "auto" else ("cuda" if pos < self.tuning.cuda_attention_context else "triton")
        if kind not in self.workspaces:
            cfg, dev = self.cfg, self.device
            if kind == "cuda":
                # auto: contexts of one cluster only, so one cluster per kv head (no idle CTAs:
                # 4.06 vs 4.23 us per launch); forced: enough clusters for any context
                n = self.tuning.cluster
                splits = n if mode == "auto" else cluster.default_splits(cfg.num_kv_heads, n, dev)
                self.workspaces[kind] = cluster.ClusterWorkspace(cfg.num_heads, cfg.num_kv_heads, cfg.head_dim,
                                                                 splits, n, dev)
            else:
                splits = default_num_splits(cfg.num_kv_heads, dev)
                self.workspaces[kind] = AttentionWorkspace(cfg.num_heads, cfg.head_dim, splits, dev)
        self.attention_kind, self.ws = kind, self.workspaces[kind]
        self._attend = cluster.cluster_attention if kind == "cuda" else decode_attention
        self._select_gemv()

    # -- one decode step, as captured -----------------------------------------------------------
    def _embed(self):
        self.x.copy_(self.w.embed.index_select(0, self.token)[0])

    def _layers(self):
        """All decoder layers for the token whose embedding is in self.x, at position self.pos."""
        w, eps, pdl, t = self.w, self.cfg.rms_norm_eps, self.pdl, self.tuning
        overlap = self.gemv_kind == "overlap"
        streamed = overlap and self.stream_qkv_gate_up  # QKV and gate/up
        c = t.stream_carveout if streamed else None
        for i, layer in enumerate(w.layers):
            after = w.layers[i + 1].qkv if i + 1 < len(w.layers) else w.lm_head  # what the kernel after down reads
            if streamed:
                stream.stream_rmsnorm_gemv(self.x, layer.qkv, self.qkv, layer.attn_norm, eps, layer.qkv_bias, pdl=pdl,
                                           budget=t.qkv_budget, early=True, carveout=c)
            else:
                rmsnorm_gemv(self.x, layer.qkv, self.qkv, norm_w=layer.attn_norm, eps=eps, bias=layer.qkv_bias, pdl=pdl,
                             tuning=t)
            self._attention(i, early=overlap, carveout=c)
            if overlap:  # a Triton gate/up released early would only hold SM slots while it waits
                head = () if streamed else gate_up_head(layer.gate_up, t.gate_up_l2_prefetch)
                stream.stream_gemv_residual(self.attn, layer.o, self.x, pdl=pdl, budget=t.o_budget, early=streamed,
                                            carveout=c, l2_prefetch=head)
            else:
                gemv_residual(self.attn, layer.o, self.x, pdl=pdl, tuning=t)
            if streamed:
                stream.stream_gate_up_silu(self.x, layer.mlp_norm, eps, layer.gate_up, self.h, pdl=pdl,
                                           budget=t.gate_up_budget, carveout=c, skew=self.gate_up_skew)
            else:
                rmsnorm_gate_up_silu(self.x, layer.mlp_norm, eps, layer.gate_up, self.h, pdl=pdl, tuning=t)
            head = leading_bytes(after, t.down_l2_prefetch) if t.down_l2_prefetch else None
            gemv_residual(self.h, layer.down, self.x, pdl=pdl, l2_prefetch=head, tuning=t)

    def _attention(self, i: int, early: bool = False, carveout: int | None = None):
        """Layer i's attention; early, carveout: the CUDA kernel's (release the next kernel at its start;
        preferred shared-memory carveout)."""
        layer = self.w.layers[i]
        extra = {"early": early, "carveout": carveout} if self._attend is cluster.cluster_attention else {}
        self._attend(self.qkv, self.pos, self.cache.k[i], self.cache.v[i], self.model.cos, self.model.sin,
                     self.attn, self.ws, self.scale, q_norm=layer.q_norm, k_norm=layer.k_norm,
                     eps=self.cfg.rms_norm_eps, pdl=self.pdl, **extra)

    def _forward_token(self) -> Tensor:
        """Logits [V] for the token in self.token at position self.pos (no sampling)."""
        self._embed()
        self._layers()
        self._lm_head()
        return self.logits

    def _lm_head(self):
        """Final norm + LM head: logits from x."""
        rmsnorm_gemv(self.x, self.w.lm_head, self.logits, norm_w=self.w.norm, eps=self.cfg.rms_norm_eps, pdl=self.pdl,
                     tuning=self.tuning)

    def _lm_head_argmax(self):
        """Final norm + LM head + argmax + feeding the token back (the greedy step's last launch)."""
        w = self.w
        lm_head_argmax(self.x, w.lm_head, self.logits, self.token, self.pos, w.embed, self.argmax_scratch,
                       norm_w=w.norm, eps=self.cfg.rms_norm_eps, ring=self.ring, pdl=self.pdl, tuning=self.tuning)

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
        """Whether this runner can speculate (the verify step's k-column kernels take 16-bit weights)."""
        return not is_fp8(self.w)

    def _speculative_kernels(self, params: SamplingParams) -> bool:
        """Whether this request speculates; if so its plain steps run the Triton GEMV and attention kernels
        (the verify step's arithmetic, so the output is the plain greedy output on those kernels), else the
        kernel modes from before the last speculating request. Switching drops the captured steps."""
        speculate = (params.speculate and params.greedy and params.repetition_penalty == 1.0
                     and params.logprobs is None and self.can_verify)
        saved = getattr(self, "_modes_before_speculation", None)
        if speculate and (self.attention_mode, self.gemv_mode) != ("triton", "triton"):
            self._modes_before_speculation = (self.attention_mode, self.gemv_mode)
            self.use_attention("triton")
            self.use_gemv("triton")
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

    @torch.inference_mode()
    def verify(self, draft: list[int]) -> list[int]:
        """The accepted drafted tokens and the model's next one (greedy); a plain step where the verify
        step's rows would pass the end of the cache."""
        v = self._verifier()
        if not v.fits(self.host_pos, len(draft)):
            slot = self.step().numpy()
            while slot[0] < 0:
                pass
            return [int(slot[0])]
        out = v.run(draft) if self.use_graph else v.run_eager(draft)
        self.host_pos += len(out)
        return out

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

    # -- public hooks for tools (lab/): the step as captured, and the tuning row ---------------------
    def step_graph(self) -> torch.cuda.CUDAGraph:
        """The captured step for the current sampler mode and kernels (captured on first use)."""
        return self._graph()

    def launch_step(self) -> None:
        """One step's kernels, launched now on the current stream (what step_graph() holds)."""
        self._step_body()

    def use_tuning(self, tuning: Tuning, attention: str = "auto", gemv: str = "auto") -> None:
        """Serve from another kernels.tuning row with these kernel choices; drops captured graphs (the lab's
        A/B of one tuned number: dataclasses.replace(row, down_l2_prefetch=0))."""
        self.tuning = tuning
        self.use_gemv(gemv)
        self.use_attention(attention)

    @torch.inference_mode()
    def forced_logits(self, token: int) -> Tensor:
        """Teacher forcing for tests: logits after feeding `token` at the current position."""
        self.token.fill_(token)
        logits = self._forward_token().clone()
        self.pos.add_(1)
        return logits
