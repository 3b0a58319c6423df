"""One rank's GPU fast path under tensor parallelism: the one-GPU fast path's kernels on the rank's
shard, the step's reductions inside the same CUDA graph.

`FastRankRunner` is `FastRunner` (inference.fast.runner: fused Triton kernels, one CUDA graph per
step) built on the rank's shard with the shard's config (`TPPlan.local_cfg`: its heads, FFN slice
and vocabulary rows), plus what a split step needs:
- o_proj and down_proj each leave a partial sum of the layer's output in the residual buffer; an
  all-reduce captured in the graph completes it (reduce.py: NCCL's in place, or symmetric memory's
  one-shot into the other of two buffers: then a layer's attention half works in x, its MLP half in
  x_mlp). Rank 0's kernels add onto the stream as on one GPU, so its partial carries the residual;
  the other ranks zero the buffer first. With our flag reduction, o_proj and down add into two partial
  buffers of their own and each reduction, summing them into x, also starts the next partial buffer (the
  sum on rank 0, zeros elsewhere): no zeroing launches (`_flag_layers`); the greedy token then comes from
  the reducer's one-kernel argmax. The layer launches are FastRunner's, bound from its step plan
  (inference.fast.plan/step); this class runs them with the reductions between.
- the LM head gives the rank's vocabulary slice of the logits; the greedy token is a distributed
  argmax (each rank's best (value, id), one all-gather of two numbers: `Comm.argmax`), fed back
  by feed_token on every rank, so every rank's graph continues from the same token.
- sampled requests and repetition penalties: the reference rank's `ShardedSampler` (device ops and
  collectives only) runs inside the graph after the LM head, as the one-GPU step runs its Sampler.
- prefill is the fast path's (`RankPrefill`: cuBLAS/SDPA, float32 residual, a CUDA graph per prompt
  bucket) with the same two all-reduces per layer; decode of requests that want logprobs runs the
  reference rank (`RankRunner`: eager PyTorch, the same collectives) on the same shard and KV cache.
`time_steps` replays the step back to back with or without its collectives (the bench's
compute-vs-sync split). GPU only; the CPU tests check the reference rank, the gpu tests of
tests/inference/test_parallel.py check this against the one-GPU fast path.
- with the fused reduction ("fused"), where the plan streams every GEMV (kernels.stream_gemv), no reduction
  launches in the layers: o_proj and down_proj push their rows to every rank, gate/up and the next QKV sum
  them as their input (`_fused_layers`; reduce.FusedReduce); the down_proj of those steps is streamed too
  (the one-GPU plan's is Triton) and QKV / gate/up stream at any hidden size. Elsewhere it runs "flag".
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch
from torch import Tensor

from kernels import stream_gemv as stream
from kernels.feed_token import feed_token
from kernels.tuning import for_device

from ..fast.prefill import PrefillModel
from ..fast.runner import FastRunner
from ..fast.step import LayerLaunches, bind_step
from ..sampling import SamplingParams
from ..weights import ModelWeights
from .comm import Comm
from .plan import TPPlan
from .reduce import FusedReduce, NoReduce, make_reducer
from .runner import RankRunner

GREEDY = (True, False, False, False)  # Sampler.mode of greedy requests without a repetition penalty


class LocalComm(Comm):
    """No collectives: each rank alone (the timing of a step's compute without its sync)."""

    world = 1

    def all_reduce_(self, t: Tensor) -> Tensor:
        return t

    def all_gather(self, t: Tensor) -> Tensor:
        return t


class RankPrefill(PrefillModel):
    """The fast path's prefill (cuBLAS GEMMs, SDPA, float32 residual stream, one CUDA graph per prompt
    bucket) on a shard: o_proj's and down_proj's partial outputs summed over the ranks in float32 before
    the residual adds them; the logits are the rank's vocabulary slice."""

    def __init__(self, cfg, weights, max_len: int, comm: Comm):
        super().__init__(cfg, weights, max_len)
        self.comm = comm

    def _sum(self, t: Tensor) -> Tensor:
        return self.comm.all_reduce_(t.float())


class _WithX:
    """A runner's state with another residual buffer: what bind_step reads, x replaced."""

    def __init__(self, runner, x: Tensor):
        self._runner, self.x = runner, x

    def __getattr__(self, name):
        return getattr(self._runner, name)


class FastRankRunner(FastRunner):
    name = "tp-cuda-graph"

    def __init__(self, plan: TPPlan, rank: int, shard: ModelWeights, comm: Comm, max_context: int,
                 attention: str = "auto", gemv: str = "auto", tuning=None, pdl: bool | None = None,
                 reduce: str = "nccl"):
        """plan: the split (FastRunner's own `plan` is its step plan); reduce: the all-reduce in the step
        (reduce.py: "nccl", "symm", "flag" or "fused")."""
        self.tp_plan, self.rank, self.comm = plan, rank, comm
        self.ref = RankRunner(plan, rank, shard, comm, max_context)  # its sampler; logprobs requests
        if reduce == "fused":  # QKV and gate/up stream at any hidden size: they take the reduction in
            tuning = tuning or for_device(shard.device)
            tuning = replace(tuning, stream_max_hidden=max(tuning.stream_max_hidden, plan.cfg.hidden_size))
        super().__init__(plan.local_cfg(), shard, max_context, pdl=pdl, attention=attention, gemv=gemv,
                         tuning=tuning)
        self.model = RankPrefill(plan.local_cfg(), shard, max_context, comm)
        self.reduce_kind = reduce
        self.reducer = make_reducer(reduce, comm, plan.cfg.hidden_size, self.device, 2 * plan.cfg.num_layers)
        # x, and where the attention half's all-reduce leaves its sum for the MLP half: x itself (NCCL, in
        # place), or the second of the reducer's two symmetric buffers (x is the first).
        self.x, self.x_mlp = self.reducer.buffers or (self.x, self.x)
        self.cache = self.ref.cache  # one KV cache for both paths (the same layout)
        self._plan(self.plan)  # rebind the launches to that cache and x
        self.sampler = self.ref.sampler.full  # the request's mode, step and seen tokens (whole vocabulary)
        self.vocab_start = plan.vocab(rank).start
        self.graph_decode = False  # the current request decodes with the graph

    # -- the split step, as captured ----------------------------------------------------------
    def _plan(self, plan) -> None:
        self._layer_launches: dict[tuple[str, str], list[LayerLaunches]] = {}
        self.fused_launches = None  # this kind of step's layers with the fused reduction, where it has them
        super()._plan(plan)

    def _fusable(self) -> bool:
        """Whether this kind of step can fuse its reductions: the fused reducer, every GEMV streamed."""
        p, reducer = self.layer_plan, getattr(self, "reducer", None)
        return (isinstance(reducer, FusedReduce)
                and (p.qkv.kernel, p.o_proj.kernel, p.gate_up.kernel)
                == ("stream_rmsnorm_gemv", "stream_gemv_residual", "stream_gate_up_silu")
                and all(stream.supported(layer.down) for layer in self.w.layers))

    def _fuse(self, layers: list[LayerLaunches]) -> list[LayerLaunches]:
        """The layer launches (bound to x) with the reductions fused in (reduce.FusedReduce): o_proj pushes kind 0,
        down_proj (streamed here) kind 1; gate/up reads kind 0's slots, each QKV but the first kind 1's."""
        r = self.reducer
        fused = []
        for i, layer in enumerate(layers):
            qkv = layer.qkv
            if i > 0:
                qkv = partial(qkv.func, r.slots(1), *qkv.args[1:], **qkv.keywords, fuse=r.reduce_in(1, i - 1, self.x))
            o = partial(layer.o_proj.func, *layer.o_proj.args, **layer.o_proj.keywords, fuse=r.push_to(0, i))
            g = layer.gate_up
            gate_up = partial(g.func, r.slots(0), *g.args[1:], **g.keywords, fuse=r.reduce_in(0, i, self.x))
            down = partial(stream.stream_gemv_residual, self.h, self.w.layers[i].down, self.x, pdl=self.pdl,
                           budget=self.tuning.fused_down_budget, fuse=r.push_to(1, i))
            fused.append(LayerLaunches(qkv, layer.attention, o, gate_up, down))
        return fused

    def _select_attention(self, pos: int) -> None:
        """FastRunner's choice and binding of the step's launches, plus the layer launches this rank runs:
        with x_mlp apart from x, gate/up and down bound to x_mlp (a second binding of the same plan)."""
        super()._select_attention(pos)
        partials = getattr(getattr(self, "reducer", None), "partials", None)
        p = self.layer_plan
        if partials is not None:  # flag: o_proj adds into partial buffer a, down into b; the rest read x
            key = ("flag", p.attention_kind, p.gemv_kind)
            if key not in self._layer_launches:
                ws = self.workspaces[p.attention_kind]
                a, b = (bind_step(p, _WithX(self, t), ws).layers for t in partials)
                self._layer_launches[key] = [LayerLaunches(x.qkv, x.attention, pa.o_proj, x.gate_up, pb.down)
                                             for x, pa, pb in zip(self.launches.layers, a, b)]
            self.flag_launches = self._layer_launches[key]
            self.fused_launches = None
            if self._fusable():
                key = ("fused", p.attention_kind, p.gemv_kind)
                if key not in self._layer_launches:
                    self._layer_launches[key] = self._fuse(self.launches.layers)
                self.fused_launches = self._layer_launches[key]
        if getattr(self, "x_mlp", self.x) is self.x:
            self.layer_launches = self.launches.layers
            return
        key = (p.attention_kind, p.gemv_kind)
        if key not in self._layer_launches:
            mlp = bind_step(p, _WithX(self, self.x_mlp), self.workspaces[p.attention_kind]).layers
            self._layer_launches[key] = [LayerLaunches(a.qkv, a.attention, a.o_proj, b.gate_up, b.down)
                                         for a, b in zip(self.launches.layers, mlp)]
        self.layer_launches = self._layer_launches[key]

    def _layers(self):
        """FastRunner's layer launches (the step plan, bound to this shard), each residual-adding GEMV
        (o_proj into x, down into x_mlp) leaving a partial sum that the reducer completes into the buffer
        the next half reads (x_mlp, then x); ranks other than 0 start those GEMVs from zero, so only rank
        0's partial carries the residual."""
        if getattr(self, "fused_launches", None) and isinstance(self.reducer, FusedReduce):  # not time_steps' NoReduce
            return self._fused_layers()
        if self.reducer.partials is not None:
            return self._flag_layers()
        from_zero = self.rank != 0
        x, x_mlp = self.x, self.x_mlp
        self.reducer.begin_step(self.pdl)
        for layer in self.layer_launches:
            layer.qkv()
            layer.attention()
            if from_zero:
                x.zero_()
            layer.o_proj()
            self.reducer(x, x_mlp)
            layer.gate_up()
            if from_zero:
                x_mlp.zero_()
            layer.down()
            self.reducer(x_mlp, x)

    def _flag_layers(self):
        """The layers with the flag reduction: o_proj adds into partial buffer a, down into b, each reduction
        sums the ranks' partials into x (what the norms read) and starts the other partial buffer (rank 0:
        the sum, the others: zeros), so no rank zeroes a buffer between kernels."""
        a, b = self.reducer.partials
        x = self.x
        self.reducer.begin_step(self.pdl, x)  # the step counter; a := x on rank 0, zeros elsewhere
        for layer in self.flag_launches:
            layer.qkv()
            layer.attention()
            layer.o_proj()
            self.reducer(a, x)
            layer.gate_up()
            layer.down()
            self.reducer(b, x)

    def _fused_layers(self):
        """The layers with the fused reduction: no reduction launches between them, one sum for the LM head."""
        self.reducer.begin_step(self.pdl, fused=True)
        for layer in self.fused_launches:
            layer.qkv()
            layer.attention()
            layer.o_proj()
            layer.gate_up()
            layer.down()
        self.reducer.sum_into(self.x)

    def _fused_step(self) -> bool:
        return False  # the argmax spans ranks: LM head, then the distributed argmax

    def _step_body(self):
        self._layers()
        self._lm_head()
        greedy, use_penalty = self.sampler.mode[:2]
        if greedy and not use_penalty:  # the flag reducer's one-kernel argmax, or Comm.argmax's ops and all-gather
            flag_argmax = getattr(self.reducer, "argmax", None)
            token = (flag_argmax or self.comm.argmax)(self.logits, self.vocab_start)
        else:  # the sharded sampler's device ops and collectives, captured like the rest
            token = self.ref.sampler(self.logits)
        feed_token(token, self.token, self.pos, self.w.embed, self.x, ring=self.ring)

    # -- Runner API (every rank runs the same calls in the same order) ------------------------
    @torch.inference_mode()
    def start(self, prompt_ids: list[int], params: SamplingParams) -> Tensor:
        """Prefill with the fast path's prefill (RankPrefill), then the graphs of the first and last step."""
        n = len(prompt_ids)
        ids = torch.tensor(prompt_ids, dtype=torch.int64, device=self.device)
        self.seed = self.ref.sampler.configure(params, ids)
        first = self.ref.sampler(self.model.prefill(ids, self.cache, use_graph=self.use_graph))
        self.ref.pos, self.ref.last = n, first  # a logprobs request goes on with the reference rank
        self.logprobs_k = None
        self.graph_decode = params.logprobs is None
        if not self.graph_decode:
            return first
        self.token.copy_(first)
        self.pos.fill_(n)
        self.host_pos = n
        self._embed()
        if self.use_graph:  # the graphs of the last and the first step, as FastRunner.start captures them
            for pos in (n + params.max_tokens - 1, n):
                self._select_attention(pos)
                self._graph()
        return first

    @torch.inference_mode()
    def step(self) -> Tensor:
        return super().step() if self.graph_decode else self.ref.step()

    @torch.inference_mode()
    def forced_logits(self, token: int) -> Tensor:
        """Teacher forcing (GPU tests): the whole vocabulary's logits [V] float32 after `token`,
        through the graph's kernels (eagerly), or the reference rank's forward on a logprobs request."""
        if not self.graph_decode:
            return self.ref.forced_logits(token)
        self.token.fill_(token)
        self._select_attention(self.host_pos)
        logits = self._forward_token().clone()
        self.pos.add_(1)
        self.host_pos += 1
        return self.comm.all_gather(logits)

    def use_graphs(self, on: bool) -> None:
        """Replay the captured step (on) or launch its kernels eagerly (off: the GPU tests' twin)."""
        self.use_graph = on

    def use_pdl(self, on: bool) -> None:
        """Launch with programmatic dependent launch or not (FastRunner.pdl: rebinds, drops graphs)."""
        self.pdl = on

    def release(self) -> None:
        """Drop the captured graphs, decode and prefill (they hold NCCL work), before the process group is
        destroyed."""
        self.graphs = {}
        self.model.graphs = {}

    @torch.inference_mode()
    def time_steps(self, pos: int, steps: int, collectives: bool = True) -> float:
        """Device ms per greedy step over `steps` back-to-back replays of the step graph from position
        `pos` (pos + steps <= max_context), the request's state restored afterwards. collectives=False
        replays a graph captured without them (each rank alone: the compute of a step, no sync)."""
        assert pos + steps <= self.max_context
        self._select_attention(pos + steps - 1)
        last = (self.attention_kind, self.gemv_kind)
        self._select_attention(pos)
        assert last == (self.attention_kind, self.gemv_kind), "time_steps: the kernels change within these positions"
        saved = (self.token.clone(), self.pos.clone(), self.x.clone(), self.sampler.step.clone(),
                 self.sampler.seen.clone())
        host_pos, comm, reducer, graphs, mode = self.host_pos, self.comm, self.reducer, self.graphs, self.graph_decode
        sampler_mode = self.sampler.mode
        self.graph_decode, self.sampler.mode = True, GREEDY
        try:
            if not collectives:
                self.comm, self.reducer, self.graphs = LocalComm(), NoReduce(), {}
            graph = self._graph()
            self.token.fill_(0)
            self.pos.fill_(pos)
            self._embed()
            graph.replay()  # warm
            self.pos.fill_(pos)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(steps):
                graph.replay()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / steps
        finally:
            self.comm, self.reducer, self.graphs, self.graph_decode = comm, reducer, graphs, mode
            self.sampler.mode = sampler_mode
            self._restore(saved)
            self.host_pos = host_pos
            self._select_attention(host_pos)
