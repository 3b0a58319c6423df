"""The fast path's verify step: the last token + up to `width - 1` drafted ones, over the DECODE kernels.

A verify step of KC tokens (a draft-width bucket: 2, 4, 8 or 16) runs the decode step's layer loop on KC columns:
every weight tile is read once for the KC columns (16 streamed columns: twice), and column c computes, bit for
bit, what the plain decode step of a speculating run computes at position pos + c. Four families of GEMVs
(`gemv`: the tuning row's, inference.fast.plan.verify_gemv; FastRunner.speculative_kernels):
- "triton" (the constructor's default): the k-column twins of the one-column Triton decode kernels on CUDA cores
  (kernels/{rmsnorm_gemv,gemv_residual,gate_up_silu,lm_head_argmax}_cols.py: the same launch configs and
  partial sums per column; `group` columns per program); the plain steps run the Triton kernels;
- "mma": the tensor-core GEMVs of 1..16 columns (kernels.gemv_mma_cols, kernels.lm_head_mma_cols), whose
  column bits do not depend on the column count; the plain steps run them on one column;
- "cols": the CUDA C GEMVs of 1..16 columns on CUDA cores (kernels.cols_gemv), the same property;
- "overlap": QKV, o_proj and gate/up stream their weights (kernels.stream_gemv) for up to STREAM_TOKENS columns a
  launch, each column's sums in the order of the plain step's one-token launch (the same ring budgets, so the same
  slot width); down_proj streams too where the row says stream_down (its activation fed through the ring: the
  same bits at any slot width and token count), else it is the "triton" family's; the LM head streams its logits
  where the row says stream_head (kernels.stream_lm_head), else it is the "triton" family's too; the plain steps
  run the overlap GEMVs beside the Triton attention.
Per layer: QKV, decode_attention_cols (the KC new k/v rows written, each column attending causally; column c
is the Triton decode attention at pos + c), o_proj, gate/up, down; then the LM head + argmax: the KC argmaxes,
the length n of the drafted prefix that agrees with them, and the runner's step state left as its own step
would (token = argmax n, pos += n + 1, x = that token's embedding), all on the device; the argmaxes and n land
in pinned host memory, which the host reads after the launch (drafting needs the tokens).

So a speculative greedy run yields exactly the tokens of the plain greedy run on the same kernels
(FastRunner switches a speculating request's plain steps to them). Rejected positions need
no rollback: their cache rows lie past the new position, and every later step writes a row before any
step reads it.

One CUDA graph per bucket and slot (positions live on the device, so a graph serves every position; a slot
has its own draft input and pinned result, so that a second verify step can be launched before the first's
result is read: inference.speculative.decode chains them). Drafts are padded to the bucket; `klen` keeps the
padding out of the acceptance. 16-bit weights only (the FP8 runner
does not speculate). `run_eager` launches the same kernels without a graph (CPU tests, interpreter).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from kernels.cols_gemv import cols_gemv_residual, cols_lm_head_argmax, cols_rmsnorm_gate_up_silu, cols_rmsnorm_gemv
from kernels.decode_attention import AttentionWorkspace, attention_config, few_split_rows
from kernels.decode_attention_cols import decode_attention_cols
from kernels.embed_cols import embed_cols
from kernels.gate_up_silu_cols import rmsnorm_gate_up_silu_cols
from kernels.gemv_mma_cols import gemv_residual_mma, rmsnorm_gate_up_silu_mma, rmsnorm_gemv_mma
from kernels.gemv_residual_cols import gemv_residual_cols
from kernels.lm_head_argmax_cols import cols_scratch, lm_head_argmax_cols
from kernels.lm_head_mma_cols import lm_head_argmax_mma, mma_scratch
from kernels.rmsnorm_gemv_cols import rmsnorm_gemv_cols
from kernels.stream_gemv import stream_gate_up_silu, stream_gemv_residual, stream_rmsnorm_gemv
from kernels.stream_lm_head import stream_lm_head_argmax

# tokens per verify step (the last one + up to 15 drafted; 16 only after a whole draft held: DraftConfig.short_draft)
BUCKETS = (2, 4, 8, 16)
SLOTS = 2  # verify steps in flight at once (inference.speculative.decode chains one behind another)
GEMVS = ("triton", "mma", "cols", "overlap")
STREAM_TOKENS = 8  # columns a streamed launch takes at most (gate/up's 16 would need more shared memory than a CTA)


def _by_tokens(launch, act: int, out: int, **kw):
    """launch(*args) over the rows of args[act] and args[out] (the columns), STREAM_TOKENS at a time."""
    def run(*args):
        for i in range(0, args[act].shape[0], STREAM_TOKENS):
            a = list(args)
            a[act], a[out] = args[act][i:i + STREAM_TOKENS], args[out][i:i + STREAM_TOKENS]
            launch(*a, **kw)
    return run


def streamed_launches(runner) -> dict[str, dict]:
    """The ring budget, skew, activation feed and core kind (what fixes a token's order of sums) of the streamed
    launches of a speculating run's plain step, by slot (qkv, o_proj, gate_up; down and lm_head_argmax where they
    stream): from the runner's plan for its speculative kernels (inference.fast.plan)."""
    from ..fast.plan import choose

    p = choose(runner.cfg, runner.tuning, runner.target, *runner.speculative_kernels).at(0)
    return {slot: {k: v for k, v in getattr(p, slot).kwargs if k in ("budget", "skew", "ring", "mma")}
            for slot in ("qkv", "o_proj", "gate_up", "down", "lm_head_argmax")
            if getattr(p, slot).kernel.startswith("stream_")}


class FastVerifier:
    def __init__(self, cfg, weights, cache, cos: Tensor, sin: Tensor, token: Tensor, pos: Tensor, x: Tensor,
                 attention: AttentionWorkspace, *, gemv: str = "triton", tuning=None, pdl: bool = False,
                 buckets=BUCKETS, group: int | None = None, streamed: dict[str, dict] | None = None):
        """token [1] int64, pos [1] int32, x [H] float32: the runner's step state (updated in place).
        cos, sin: the RoPE tables of the decode step; attention: the decode step's Triton attention
        workspace (its split count and combine group are copied: they fix the order of the sums).
        gemv: the GEMV family (GEMVS, see the module docstring); tuning: the kernels.tuning row of the Triton
        family's launch configs; group: its columns per program (kernels.rmsnorm_gemv_cols; None: the
        tuning row's verify_group, or all of a bucket's without a row). streamed ("overlap"): the plain step's
        streamed launches' budget, skew and feed by slot (qkv, o_proj, gate_up, down where it streams; `streamed_launches`), which fix each
        token's order of sums."""
        assert gemv in GEMVS, f"verify GEMVs must be one of {GEMVS}, not {gemv!r}"
        assert gemv != "overlap" or streamed, "the overlap family needs the plain step's streamed launches"
        self.streamed = streamed
        self.gemv = gemv
        self.cfg, self.w, self.cache, self.cos, self.sin = cfg, weights, cache, cos, sin
        self.token, self.pos, self.x = token, pos, x
        self.tuning, self.pdl = tuning, pdl
        self.group = group if group is not None else tuning.verify_group if tuning is not None else None
        self.buckets = tuple(sorted(buckets))
        self.width = self.buckets[-1]
        dev = token.device
        self.cuda = dev.type == "cuda"
        W = self.width
        f32 = dict(device=dev, dtype=torch.float32)
        self.X = torch.zeros(W, cfg.hidden_size, **f32)
        self.qkv = torch.zeros(W, cfg.qkv_size, **f32)
        self.attn = torch.zeros(W, cfg.q_size, **f32)
        self.h = torch.zeros(W, cfg.intermediate_size, **f32)
        self.logits = torch.zeros(W, cfg.vocab_size, **f32)
        self.ws = AttentionWorkspace(cfg.num_heads, cfg.head_dim, attention.num_splits, dev,
                                     combine_group=attention.group, columns=W)
        column_head = gemv in ("mma", "cols") or "lm_head_argmax" in (streamed or {})  # kernels.lm_head_mma_cols'
        self.scratch = mma_scratch(dev) if column_head else cols_scratch(dev)
        self.scale = cfg.head_dim ** -0.5
        # Per slot (SLOTS verify steps may be in flight, launched in turn): the draft and its length on the
        # device (one copy from pinned host memory), the pinned result of each bucket, its graphs, its event.
        self.dev_in = [torch.zeros(W, dtype=torch.int64, device=dev) for _ in range(SLOTS)]  # draft, then klen
        self.host_in = [torch.zeros(W, dtype=torch.int64, pin_memory=self.cuda) for _ in range(SLOTS)]
        self.host_np = [h.numpy() for h in self.host_in]
        self.result = [{kc: torch.zeros(kc + 1, dtype=torch.int64, pin_memory=self.cuda) for kc in self.buckets}
                       for _ in range(SLOTS)]
        self.graphs: dict[tuple[int, int, bool], torch.cuda.CUDAGraph] = {}  # (slot, bucket, few splits)
        # contexts up to which the attention's split programs take one split each (decode_attention_cols'
        # few_splits: the same bits, faster there; slower past it): launch() picks the graph by position
        self.few_rows = few_split_rows(attention_config(cfg.head_dim, cache.k[0].dtype))
        self.done = [torch.cuda.Event() if self.cuda else None for _ in range(SLOTS)]  # after each launch

    @classmethod
    def for_runner(cls, runner, buckets=BUCKETS) -> "FastVerifier":
        """A verifier over a FastRunner's weights, cache, step state and Triton attention workspace."""
        ws = runner.workspaces.get("triton")
        assert ws is not None, "the runner has not set up its Triton attention (use_attention('triton'))"
        gemv = runner.speculative_kernels[1]
        return cls(runner.cfg, runner.w, runner.cache, runner.model.cos, runner.model.sin, runner.token,
                   runner.pos, runner.x, ws, gemv=gemv, tuning=runner.tuning, pdl=runner.pdl, buckets=buckets,
                   streamed=streamed_launches(runner) if gemv == "overlap" else None)

    def use_group(self, group: int | None) -> None:
        """Columns per program of the Triton family's GEMVs from now on (the bench's A/B); drops the graphs."""
        self.group = group
        self.graphs = {}

    @property
    def max_draft(self) -> int:
        return self.width - 1

    def bucket(self, k: int) -> int:
        """Columns of the verify step for k drafted tokens: the smallest bucket that holds k + 1."""
        return next(b for b in self.buckets if b >= k + 1)

    def fits(self, pos: int, k: int | None = None) -> bool:
        """Whether a verify step of k drafted tokens (default: the widest) at `pos` stays inside the cache."""
        return pos + (self.width if k is None else self.bucket(k)) <= self.cache.max_len

    def capture(self):
        """Capture every slot's and bucket's graphs (before a request's first step)."""
        for slot in range(SLOTS):
            for kc in self.buckets:
                for few in (False, True) if self.few_rows else (False,):
                    self.graph(kc, slot, few)

    # -- the verify step, as captured ---------------------------------------------------------------
    def _body(self, kc: int, slot: int = 0, few: bool = False):
        w, pdl, eps = self.w, self.pdl, self.cfg.rms_norm_eps
        X, qkv, attn, h = self.X[:kc], self.qkv[:kc], self.attn[:kc], self.h[:kc]
        draft, klen, result = self.dev_in[slot][:-1], self.dev_in[slot][-1:], self.result[slot][kc]
        if self.cuda and torch.cuda.is_current_stream_capturing():  # the draft's copy is the graph's first node
            self.dev_in[slot].copy_(self.host_in[slot], non_blocking=True)
        embed_cols(self.x, draft, w.embed, X)  # X[0] = x, X[c] = embed[draft[c - 1]]: one launch
        g = None if self.group is None or kc % min(self.group, kc) else self.group
        if self.gemv in ("mma", "cols"):
            fs = ((rmsnorm_gemv_mma, gemv_residual_mma, rmsnorm_gate_up_silu_mma) if self.gemv == "mma" else
                  (cols_rmsnorm_gemv, cols_gemv_residual, cols_rmsnorm_gate_up_silu))
            qkv_, o_, gate_up_, down_ = (partial(f, pdl=pdl) for f in fs + fs[1:2])
        else:
            at = dict(pdl=pdl, tuning=self.tuning, group=g)
            qkv_, o_, gate_up_, down_ = (partial(f, **at) for f in (rmsnorm_gemv_cols, gemv_residual_cols,
                                                                    rmsnorm_gate_up_silu_cols, gemv_residual_cols))
        if self.gemv == "overlap":  # the plain step's streamed launches, k columns
            s = self.streamed
            qkv_ = _by_tokens(stream_rmsnorm_gemv, 0, 2, pdl=pdl, **s["qkv"])
            o_ = _by_tokens(stream_gemv_residual, 0, 2, pdl=pdl, **s["o_proj"])
            gate_up_ = _by_tokens(stream_gate_up_silu, 0, 4, pdl=pdl, **s["gate_up"])
            if "down" in s:
                down_ = _by_tokens(stream_gemv_residual, 0, 2, pdl=pdl, **s["down"])
        for i, layer in enumerate(w.layers):
            qkv_(X, layer.qkv, qkv, layer.attn_norm, eps, layer.qkv_bias)
            decode_attention_cols(qkv, self.pos, self.cache.k[i], self.cache.v[i], self.cos, self.sin, attn, self.ws,
                                  self.scale, layer.q_norm, layer.k_norm, eps, pdl=pdl, few_splits=few)
            o_(attn, layer.o, X)
            gate_up_(X, layer.mlp_norm, eps, layer.gate_up, h)
            down_(h, layer.down, X)
        if self.gemv in ("mma", "cols") or "lm_head_argmax" in (self.streamed or {}):
            head = {"mma": lm_head_argmax_mma, "cols": cols_lm_head_argmax}.get(self.gemv)
            head = head or partial(stream_lm_head_argmax, **self.streamed["lm_head_argmax"])
            head(X, w.lm_head, self.logits[:kc], self.token, self.pos, w.embed, self.scratch, w.norm,
                 eps, draft=draft, klen=klen, x_next=self.x, result=result, pdl=pdl)
        else:
            lm_head_argmax_cols(X, w.lm_head, self.logits[:kc], self.scratch, draft, klen, self.token,
                                self.pos, w.embed, self.x, result, norm_w=w.norm, eps=eps, pdl=pdl,
                                tuning=self.tuning, group=g)

    def load(self, draft: list[int], slot: int = 0, copy: bool = True) -> int:
        """Put `draft` into the slot's verify step inputs (padded to its bucket); returns the bucket. The
        slot's previous launch must have been finished (its copy reads the same pinned memory). copy=False: into
        the pinned host memory only (a graph's replay copies it: one call less on the host per verify step)."""
        k = len(draft)
        assert 1 <= k < self.width, f"a draft of 1..{self.width - 1} tokens, not {k}"
        h = self.host_np[slot]
        h[:k] = draft
        h[k:-1] = draft[-1]
        h[-1] = k
        if copy:
            self.dev_in[slot].copy_(self.host_in[slot], non_blocking=self.cuda)
        return self.bucket(k)

    def _result(self, kc: int, slot: int = 0) -> list[int]:
        out = self.result[slot][kc].tolist()
        return out[:out[-1] + 1]

    @torch.inference_mode()
    def run_eager(self, draft: list[int], pos: int | None = None) -> list[int]:
        """run() without a graph: the accepted drafted tokens plus the model's next one."""
        kc = self.load(draft)
        self._body(kc)
        if self.cuda:
            torch.cuda.current_stream().synchronize()
        return self._result(kc)

    @torch.inference_mode()
    def run(self, draft: list[int], pos: int | None = None) -> list[int]:
        """Verify `draft` after the runner's current token: the accepted drafted tokens plus the model's
        next one. The runner's token, pos and x are left for its next step."""
        return self.finish(self.launch(draft, pos=pos))

    @torch.inference_mode()
    def launch(self, draft: list[int], slot: int = 0, pos: int | None = None) -> int:
        """Replay the verify step of `draft` in `slot` (run() without waiting); returns its bucket, for
        finish(). Steps in flight run in launch order on the stream, each from the state the one before left.
        pos: where it starts at the latest (the host's count), to pick the attention's split programs."""
        kc = self.bucket(len(draft))
        graph = self.graph_at(kc, pos, slot)
        self.load(draft, slot, copy=False)
        graph.replay()
        self.done[slot].record()
        return kc

    def finish(self, kc: int, slot: int = 0) -> list[int]:
        """Wait for the slot's verify step launched last (bucket kc) and read its result."""
        self.done[slot].synchronize()
        return self._result(kc, slot)

    def graph_at(self, kc: int, pos: int | None, slot: int = 0) -> torch.cuda.CUDAGraph:
        """The graph a verify step of bucket kc starting at `pos` (at the latest; None: unknown) runs."""
        return self.graph(kc, slot, pos is not None and pos + kc <= self.few_rows)

    def graph(self, kc: int, slot: int = 0, few: bool = False) -> torch.cuda.CUDAGraph:
        """The captured verify step of bucket kc in `slot`, the attention's few split programs or not (captured
        on first use; the warm-up writes cache rows at and past pos, which every later step rewrites before
        reading)."""
        if (slot, kc, few) not in self.graphs:
            saved = (self.token.clone(), self.pos.clone(), self.x.clone())
            self.dev_in[slot][-1:].zero_()  # klen 0: no draft counts during the warm-up
            self.host_np[slot][-1] = 0  # (nor in the capture's copy, should it run)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # compiles every kernel outside the capture
                    self._restore(saved)
                    self._body(kc, slot, few)
            torch.cuda.current_stream().wait_stream(stream)
            self._restore(saved)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                self._body(kc, slot, few)
            self._restore(saved)
            self.graphs[(slot, kc, few)] = graph
        return self.graphs[(slot, kc, few)]

    def _restore(self, saved):
        token, pos, x = saved
        self.token.copy_(token)
        self.pos.copy_(pos)
        self.x.copy_(x)
