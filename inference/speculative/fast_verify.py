"""The fast path's verify step: the last token + up to `width - 1` drafted ones, over the DECODE kernels.

A verify step of KC tokens (a draft-width bucket: 2, 4 or 8) runs the decode step's layer loop with the
tensor-core GEMVs of 1..16 columns (kernels.gemv_mma_cols, kernels.lm_head_mma_cols) and the k-column
attention (kernels.decode_attention_cols): every weight tile is read once for the KC columns, and column c
computes, bit for bit, what the decode step of a speculating run (FastRunner with use_gemv("mma") and
use_attention("triton"): the same GEMVs on one column) computes at position pos + c. Per layer:
rmsnorm_gemv_mma (QKV), decode_attention_cols (the KC new k/v rows written, each column attending causally),
gemv_residual_mma (o_proj), rmsnorm_gate_up_silu_mma, gemv_residual_mma (down); then lm_head_argmax_mma: the
KC argmaxes, the length n of the drafted prefix that agrees with them, and the runner's step state left as its
own step would (token = argmax n, pos += n + 1, x = that token's embedding), all on the device; the argmaxes
and n land in pinned host memory, which the host reads after the launch (drafting needs the tokens).

So a speculative greedy run yields exactly the tokens of the plain greedy run on the same kernels
(FastRunner switches a speculating request's plain steps to them). Rejected positions need
no rollback: their cache rows lie past the new position, and every later step writes a row before any
step reads it.

One CUDA graph per bucket (positions live on the device, so a graph serves every position). Drafts are
padded to the bucket; `klen` keeps the padding out of the acceptance. 16-bit weights only (the FP8 runner
does not speculate; fp16 weights run the GEMVs' fp32 fallback). `run_eager` launches the same kernels without a graph (CPU tests, interpreter).
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels.decode_attention import AttentionWorkspace
from kernels.decode_attention_cols import decode_attention_cols
from kernels.gemv_mma_cols import gemv_residual_mma, rmsnorm_gate_up_silu_mma, rmsnorm_gemv_mma
from kernels.lm_head_mma_cols import lm_head_argmax_mma, mma_scratch

BUCKETS = (2, 4, 8)  # tokens per verify step (the last one + up to 7 drafted); the GEMVs take up to 16


class FastVerifier:
    def __init__(self, cfg, weights, cache, cos: Tensor, sin: Tensor, token: Tensor, pos: Tensor, x: Tensor,
                 attention: AttentionWorkspace, *, pdl: bool = False, buckets=BUCKETS):
        """token [1] int64, pos [1] int32, x [H] float32: the runner's step state (updated in place).
        cos, sin: the RoPE tables of the decode step; attention: the decode step's Triton attention
        workspace (its split count and combine group are copied: they fix the order of the sums)."""
        self.cfg, self.w, self.cache, self.cos, self.sin = cfg, weights, cache, cos, sin
        self.token, self.pos, self.x = token, pos, x
        self.pdl = pdl
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
        self.scratch = mma_scratch(dev)
        self.scale = cfg.head_dim ** -0.5
        self.draft = torch.zeros(W - 1, dtype=torch.int64, device=dev)
        self.klen = torch.zeros(1, dtype=torch.int64, device=dev)  # how many of `draft` are real
        self.host_in = torch.zeros(W, dtype=torch.int64, pin_memory=self.cuda)  # draft, then klen
        self.result = {kc: torch.zeros(kc + 1, dtype=torch.int64, pin_memory=self.cuda) if self.cuda
                       else torch.zeros(kc + 1, dtype=torch.int64) for kc in self.buckets}
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.done = torch.cuda.Event() if self.cuda else None  # recorded after each launched verify step

    @classmethod
    def for_runner(cls, runner, buckets=BUCKETS) -> "FastVerifier":
        """A verifier over a FastRunner's weights, cache, step state and Triton attention workspace."""
        ws = runner.workspaces.get("triton")
        assert ws is not None, "the runner has not set up its Triton attention (use_attention('triton'))"
        return cls(runner.cfg, runner.w, runner.cache, runner.model.cos, runner.model.sin, runner.token,
                   runner.pos, runner.x, ws, pdl=runner.pdl, buckets=buckets)

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
        """Capture every bucket's graph (before a request's first step)."""
        for kc in self.buckets:
            self.graph(kc)

    # -- the verify step, as captured ---------------------------------------------------------------
    def _body(self, kc: int):
        cfg, w, pdl, eps = self.cfg, self.w, self.pdl, self.cfg.rms_norm_eps
        X, qkv, attn, h = self.X[:kc], self.qkv[:kc], self.attn[:kc], self.h[:kc]
        X[0].copy_(self.x)
        if kc > 1:
            X[1:].copy_(w.embed.index_select(0, self.draft[:kc - 1]))
        for i, layer in enumerate(w.layers):
            rmsnorm_gemv_mma(X, layer.qkv, qkv, layer.attn_norm, eps, layer.qkv_bias, pdl=pdl)
            decode_attention_cols(qkv, self.pos, self.cache.k[i], self.cache.v[i], self.cos, self.sin, attn, self.ws,
                                  self.scale, layer.q_norm, layer.k_norm, eps, pdl=pdl)
            gemv_residual_mma(attn, layer.o, X, pdl=pdl)
            rmsnorm_gate_up_silu_mma(X, layer.mlp_norm, eps, layer.gate_up, h, pdl=pdl)
            gemv_residual_mma(h, layer.down, X, pdl=pdl)
        lm_head_argmax_mma(X, w.lm_head, self.logits[:kc], self.token, self.pos, w.embed, self.scratch, w.norm, eps,
                           draft=self.draft, klen=self.klen, x_next=self.x, result=self.result[kc], pdl=pdl)

    def _load(self, draft: list[int]) -> int:
        k = len(draft)
        assert 1 <= k < self.width, f"a draft of 1..{self.width - 1} tokens, not {k}"
        self.host_in[:k] = torch.tensor(draft, dtype=torch.int64)
        self.host_in[k:-1] = draft[-1]
        self.host_in[-1] = k
        self.draft.copy_(self.host_in[:-1], non_blocking=self.cuda)
        self.klen.copy_(self.host_in[-1:], non_blocking=self.cuda)
        return self.bucket(k)

    def _result(self, kc: int) -> list[int]:
        out = self.result[kc].tolist()
        return out[:out[-1] + 1]

    @torch.inference_mode()
    def run_eager(self, draft: list[int], pos: int | None = None) -> list[int]:
        """run() without a graph: the accepted drafted tokens plus the model's next one."""
        kc = self._load(draft)
        self._body(kc)
        if self.cuda:
            torch.cuda.current_stream().synchronize()
        return self._result(kc)

    @torch.inference_mode()
    def run(self, draft: list[int], pos: int | None = None) -> list[int]:
        """Verify `draft` after the runner's current token: the accepted drafted tokens plus the model's
        next one. The runner's token, pos and x are left for its next step."""
        return self.finish(self.launch(draft))

    @torch.inference_mode()
    def launch(self, draft: list[int]) -> int:
        """Replay the verify step of `draft` (run() without waiting); returns its bucket, for finish()."""
        kc = self.bucket(len(draft))
        graph = self.graph(kc)
        self._load(draft)
        graph.replay()
        self.done.record()
        return kc

    def finish(self, kc: int) -> list[int]:
        """Wait for the verify step launched last (bucket kc) and read its result."""
        self.done.synchronize()
        return self._result(kc)

    def graph(self, kc: int) -> torch.cuda.CUDAGraph:
        """The captured verify step of bucket kc (captured on first use; the warm-up writes cache rows at
        and past pos, which every later step rewrites before reading)."""
        if kc not in self.graphs:
            saved = (self.token.clone(), self.pos.clone(), self.x.clone())
            self.klen.zero_()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # compiles every kernel outside the capture
                    self._restore(saved)
                    self._body(kc)
            torch.cuda.current_stream().wait_stream(stream)
            self._restore(saved)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                self._body(kc)
            self._restore(saved)
            self.graphs[kc] = graph
        return self.graphs[kc]

    def _restore(self, saved):
        token, pos, x = saved
        self.token.copy_(token)
        self.pos.copy_(pos)
        self.x.copy_(x)
