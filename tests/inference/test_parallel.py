"""Tensor parallelism (inference.parallel): the plan, the shards, and decoding split across ranks.

On CPU: the plan's ranges and refusals; shards that put every weight back together; ranks run
as threads over an in-process Comm (tp 2 and 4, every model family, K/V heads split and
replicated) giving the tokens the unsplit reference gives; and two real processes over gloo
behind `Engine.from_pretrained(tp=2)`. On >= 2 GPUs (marker gpu): NCCL, the reference ranks and
the fast ranks (inference.parallel.fast) against the single-GPU paths.
"""

import threading
import time

import pytest
import torch

from inference.checkpoint import load_weights
from inference.config import ModelConfig
from inference.errors import EngineError
from inference.parallel.comm import Comm
from inference.parallel.plan import SPLITS, TPPlan
from inference.parallel.runner import RankRunner
from inference.parallel.shard import shard_weights
from inference.reference import KVCache, ReferenceModel
from inference.runner import ReferenceRunner
from inference.sampling import SamplingParams
from inference.weights import LayerWeights, ModelWeights

Q15 = ModelConfig(model_type="qwen2", vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28,
                  num_heads=12, num_kv_heads=2, head_dim=128, rms_norm_eps=1e-6, max_position_embeddings=32768,
                  attention_bias=True, tie_word_embeddings=True)


# ---- the plan -------------------------------------------------------------------------------

def test_plan_names_a_split_for_every_weight():
    fields = {f for cls in (LayerWeights, ModelWeights) for f in cls.__dataclass_fields__} - {"layers"}
    assert set(SPLITS) == fields


def test_plan_splits_heads_ffn_and_vocabulary_evenly_on_the_1_5b_shape():
    p = TPPlan(Q15, 2)
    assert [p.q_heads(r) for r in (0, 1)] == [range(0, 6), range(6, 12)]
    assert [p.kv_heads(r) for r in (0, 1)] == [range(0, 1), range(1, 2)]
    assert [p.ffn(r) for r in (0, 1)] == [range(0, 4480), range(4480, 8960)]
    assert [p.vocab(r) for r in (0, 1)] == [range(0, 75968), range(75968, 151936)]
    local = p.local_cfg()
    assert (local.num_heads, local.num_kv_heads, local.intermediate_size, local.vocab_size) == (6, 1, 4480, 75968)
    assert (local.hidden_size, local.head_dim, local.num_layers) == (1536, 128, 28)


def test_plan_replicates_each_kv_head_on_the_ranks_whose_q_heads_read_it_when_tp_exceeds_kv_heads():
    p = TPPlan(Q15, 4)  # 12 q heads in groups of 6 per K/V head; 3 q heads per rank
    assert [p.kv_heads(r) for r in range(4)] == [range(0, 1), range(0, 1), range(1, 2), range(1, 2)]
    group = Q15.num_heads // Q15.num_kv_heads
    for r in range(4):
        assert {h // group for h in p.q_heads(r)} == set(p.kv_heads(r))


@pytest.mark.parametrize("tp, what", [(3, "key/value heads"), (5, "attention heads"), (0, "integer >= 1")])
def test_plan_refuses_splits_that_do_not_divide_the_model(tp, what):
    with pytest.raises(EngineError, match=what):
        TPPlan(Q15, tp)


# ---- the shards -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def models(synth_dir):
    """shape -> (cfg, float32 weights on CPU) for the tiny shapes of every family."""
    out = {}
    for shape in ("tiny", "tiny-qwen3", "tiny-llama"):
        d = synth_dir(shape)
        cfg = ModelConfig.from_file(d / "config.json")
        out[shape] = (cfg, load_weights(d, cfg, device="cpu", dtype=torch.float32))
    return out


@pytest.mark.parametrize("tp", [2, 4])
def test_shards_put_back_together_give_the_full_weights(models, tp):
    cfg, w = models["tiny"]  # 4 q heads, 2 K/V heads: split at tp 2, replicated at tp 4
    plan = TPPlan(cfg, tp)
    shards = [shard_weights(w, plan, r) for r in range(tp)]
    D, I = cfg.head_dim, cfg.intermediate_size
    for n, full in enumerate(w.layers):
        parts = [s.layers[n] for s in shards]
        q = torch.cat([p.qkv[:plan.heads_per_rank * D] for p in parts])
        assert torch.equal(q, full.qkv[:cfg.q_size])
        for r, p in enumerate(parts):  # each rank's k and v are the K/V heads its plan names
            kv = plan.kv_heads(r)
            k0, v0 = cfg.q_size, cfg.q_size + cfg.kv_size
            local_k = p.qkv[plan.heads_per_rank * D:][:plan.kv_heads_per_rank * D]
            local_v = p.qkv[plan.heads_per_rank * D + plan.kv_heads_per_rank * D:]
            assert torch.equal(local_k, full.qkv[k0 + kv.start * D:k0 + kv.stop * D])
            assert torch.equal(local_v, full.qkv[v0 + kv.start * D:v0 + kv.stop * D])
            assert torch.equal(p.qkv_bias, torch.cat([full.qkv_bias[:cfg.q_size][r * plan.heads_per_rank * D:
                                                                                  (r + 1) * plan.heads_per_rank * D],
                                                      full.qkv_bias[k0 + kv.start * D:k0 + kv.stop * D],
                                                      full.qkv_bias[v0 + kv.start * D:v0 + kv.stop * D]]))
            assert torch.equal(p.attn_norm, full.attn_norm) and torch.equal(p.mlp_norm, full.mlp_norm)
        assert torch.equal(torch.cat([p.o for p in parts], 1), full.o)
        assert torch.equal(torch.cat([p.down for p in parts], 1), full.down)
        assert torch.equal(torch.cat([p.gate_up[:I // tp] for p in parts]), full.gate_up[:I])
        assert torch.equal(torch.cat([p.gate_up[I // tp:] for p in parts]), full.gate_up[I:])
    assert torch.equal(torch.cat([s.lm_head for s in shards]), w.lm_head)
    assert all(torch.equal(s.embed, w.embed) and not s.tied for s in shards)
    assert all(s.lm_head.is_contiguous() and s.layers[0].o.is_contiguous() for s in shards)


def test_sharding_leaves_the_full_weights_untouched(models):
    cfg, w = models["tiny"]
    before = [t.clone() for t in w.layers[0].tensors()]
    shard = shard_weights(w, TPPlan(cfg, 2), 1)
    shard.layers[0].qkv.zero_()
    assert all(torch.equal(a, b) for a, b in zip(before, w.layers[0].tensors()))


# ---- ranks as threads: the split forward against the whole one ---------------------------------

class ThreadComm(Comm):
    """Collectives between threads of one process (a barrier and a list of slots)."""

    def __init__(self, rank: int, world: int, shared: dict):
        self.rank, self.world, self.shared = rank, world, shared

    def _exchange(self, t):
        slots, barrier = self.shared["slots"], self.shared["barrier"]
        slots[self.rank] = t.clone()
        barrier.wait()
        parts = list(slots)
        barrier.wait()
        return parts

    def all_reduce_(self, t):
        parts = self._exchange(t)
        total = parts[0].clone()
        for p in parts[1:]:
            total += p
        return t.copy_(total)

    def all_gather(self, t):
        return torch.cat(self._exchange(t))


def run_ranks(cfg, w, tp, fn):
    """fn(rank_runner) on tp threads, one RankRunner each; -> the list of results by rank."""
    plan = TPPlan(cfg, tp)
    shared = {"slots": [None] * tp, "barrier": threading.Barrier(tp, timeout=60)}
    runners = [RankRunner(plan, r, shard_weights(w, plan, r), ThreadComm(r, tp, shared), 128) for r in range(tp)]
    results, errors = [None] * tp, []

    def body(r):
        try:
            results[r] = fn(runners[r])
        except Exception as e:  # surfaced below; the barrier timeout frees the other ranks
            errors.append(e)
            shared["barrier"].abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(tp)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def generate(runner, prompt, n, params):
    tokens = [int(runner.start(prompt, params))]
    tokens += [int(runner.step()) for _ in range(n - 1)]
    return tokens


PROMPT = [5, 77, 301, 12, 999, 4, 1500, 42]
MODES = {"greedy": dict(), "sampled": dict(temperature=0.9, seed=7),
         "top-p": dict(temperature=1.0, top_p=0.8, seed=3), "top-k+penalty": dict(top_k=20, repetition_penalty=1.3, seed=1),
         "greedy+penalty": dict(repetition_penalty=1.5), "min-p": dict(temperature=1.2, min_p=0.05, seed=9)}


@pytest.mark.parametrize("shape", ["tiny", "tiny-qwen3", "tiny-llama"])
@pytest.mark.parametrize("tp", [2, 4])
def test_split_logits_add_up_to_the_reference_logits(models, shape, tp):
    cfg, w = models[shape]
    ids = torch.tensor(PROMPT)
    ref = ReferenceModel(cfg, w, 128).forward(ids, 0, KVCache(cfg, 128, "cpu", torch.float32))
    parts = run_ranks(cfg, w, tp, lambda rr: rr.model.forward(ids, 0, rr.cache))
    torch.testing.assert_close(torch.cat(parts, -1), ref, rtol=1e-5, atol=1e-5)


@pytest.fixture
def one_thread_each():
    """Rank threads with one intra-op thread each (the barriers then wait less on a busy CPU)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("shape, tp, modes", [
    ("tiny", 2, list(MODES)), ("tiny", 4, list(MODES)),
    ("tiny-qwen3", 2, ["greedy", "top-p"]), ("tiny-qwen3", 4, ["sampled", "greedy+penalty"]),
    ("tiny-llama", 2, ["sampled", "min-p"]), ("tiny-llama", 4, ["greedy", "top-k+penalty"]),
])
def test_every_rank_generates_the_tokens_of_the_unsplit_reference(models, one_thread_each, shape, tp, modes):
    cfg, w = models[shape]
    for mode in modes:
        params = SamplingParams(max_tokens=32, **{"seed": 0, **MODES[mode]})  # rank runners take a resolved seed
        want = generate(ReferenceRunner(cfg, w, 128), PROMPT, 16, params)
        got = run_ranks(cfg, w, tp, lambda rr: generate(rr, PROMPT, 16, params))
        assert got == [want] * tp, mode


# ---- the fast rank's layer loop (its launches recorded on CPU; the kernels run in the gpu tests) ----

@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("two_buffers", [False, True], ids=["nccl-in-place", "symm-two-buffers"])
def test_a_fast_rank_reduces_after_o_proj_and_down_and_only_rank_0_keeps_the_residual(rank, two_buffers):
    """Each launch logs the sum of the buffer it works on; the fake all-reduce writes 10 into every
    element of its destination (NCCL: x in place; symmetric memory: x -> x_mlp after attention,
    x_mlp -> x after the MLP, so the MLP launches work on x_mlp)."""
    from types import SimpleNamespace

    from inference.fast.step import LayerLaunches
    from inference.parallel.fast import FastRankRunner

    log, x = [], torch.ones(4)
    x_mlp = torch.full((4,), 7.0) if two_buffers else x

    def launch(name, buf):
        return lambda: log.append((name, buf.sum().item()))

    class AllReduce:
        partials = None

        def begin_step(self, pdl):
            log.append(("begin-step", pdl))

        def __call__(self, src, dst):
            log.append(("all-reduce", src.sum().item()))
            dst.fill_(10.0)

    layers = [LayerLaunches(launch("qkv", x), launch("attention", x), launch("o_proj", x), launch("gate_up", x_mlp),
                            launch("down", x_mlp)) for _ in range(2)]
    fake = SimpleNamespace(rank=rank, x=x, x_mlp=x_mlp, layer_launches=layers, reducer=AllReduce(), pdl=True)
    FastRankRunner._layers(fake)
    keep = 1.0 if rank == 0 else 0.0  # o_proj and down add onto the stream on rank 0, onto zeros elsewhere
    assert log == [("begin-step", True), ("qkv", 4.0), ("attention", 4.0), ("o_proj", 4.0 * keep), ("all-reduce", 4.0 * keep),
                   ("gate_up", 40.0), ("down", 40.0 * keep), ("all-reduce", 40.0 * keep),
                   ("qkv", 40.0), ("attention", 40.0), ("o_proj", 40.0 * keep), ("all-reduce", 40.0 * keep),
                   ("gate_up", 40.0), ("down", 40.0 * keep), ("all-reduce", 40.0 * keep)]
    assert torch.equal(x, torch.full((4,), 10.0))  # the step ends with the sum in x, where the LM head reads


@pytest.mark.parametrize("rank", [0, 1])
def test_with_the_flag_reduction_o_proj_and_down_add_into_partial_buffers_the_reduction_starts(rank):
    """The flag reduction's layer loop: o_proj adds into partial buffer a, down into b, and each reduction
    sums them into x, where qkv and gate/up read. The fake reduction writes 10 into x and starts the
    other partial buffer as the kernel does (the sum on rank 0, zeros elsewhere); the step's begin starts
    a (x on rank 0, zeros elsewhere). No zeroing launch between kernels."""
    from types import SimpleNamespace

    from inference.fast.step import LayerLaunches
    from inference.parallel.fast import FastRankRunner

    log, x, a, b = [], torch.ones(4), torch.full((4,), 5.0), torch.full((4,), 7.0)
    keep = 1.0 if rank == 0 else 0.0

    class Flag:
        partials = (a, b)

        def begin_step(self, pdl, x_):
            log.append(("begin-step", pdl, x_ is x))
            a.copy_(x_ * keep)

        def __call__(self, src, dst):
            log.append(("reduce", "a" if src is a else "b", dst is x, src.sum().item()))
            dst.fill_(10.0)
            (b if src is a else a).copy_(dst * keep)

    def launch(name, buf):
        return lambda: log.append((name, buf.sum().item()))

    layers = [LayerLaunches(launch("qkv", x), launch("attention", x), launch("o_proj", a), launch("gate_up", x),
                            launch("down", b)) for _ in range(2)]
    fake = SimpleNamespace(rank=rank, x=x, flag_launches=layers, reducer=Flag(), pdl=True)
    FastRankRunner._flag_layers(fake)
    assert log == [("begin-step", True, True), ("qkv", 4.0), ("attention", 4.0), ("o_proj", 4.0 * keep),
                   ("reduce", "a", True, 4.0 * keep), ("gate_up", 40.0), ("down", 40.0 * keep),
                   ("reduce", "b", True, 40.0 * keep),
                   ("qkv", 40.0), ("attention", 40.0), ("o_proj", 40.0 * keep), ("reduce", "a", True, 40.0 * keep),
                   ("gate_up", 40.0), ("down", 40.0 * keep), ("reduce", "b", True, 40.0 * keep)]
    assert torch.equal(x, torch.full((4,), 10.0))


def test_with_the_fused_reduction_the_layers_launch_no_reduction_and_one_sum_feeds_the_lm_head():
    """The fused reduction's layer loop: the step counts itself as fused, the five launches of each layer follow
    each other with nothing between (o_proj and down push, gate/up and QKV take the sums in), and one sum after
    the last layer leaves x for the LM head."""
    from types import SimpleNamespace

    from inference.fast.step import LayerLaunches
    from inference.parallel.fast import FastRankRunner

    log, x = [], torch.ones(4)

    class Fused:
        def begin_step(self, pdl, fused=False):
            log.append(("begin-step", pdl, fused))

        def sum_into(self, dst):
            log.append(("sum", dst is x))

    def launch(name):
        return lambda: log.append(name)

    layers = [LayerLaunches(*map(launch, ("qkv", "attention", "o_proj", "gate_up", "down"))) for _ in range(2)]
    fake = SimpleNamespace(x=x, fused_launches=layers, reducer=Fused(), pdl=True)
    FastRankRunner._fused_layers(fake)
    assert log == [("begin-step", True, True)] + ["qkv", "attention", "o_proj", "gate_up", "down"] * 2 + [("sum", True)]


def test_the_fused_reduction_binds_pushes_to_the_residual_gemvs_and_sums_into_the_next_norms():
    """FastRankRunner._fuse over a plan's bound launches: o_proj pushes kind 0 and down_proj (streamed, in the
    tuning row's ring budget) kind 1; gate/up reads kind 0's slots as its input (use = the layer), every QKV but
    the first reads kind 1's (use = the layer before); the attention and the first QKV are left as bound."""
    from functools import partial
    from types import SimpleNamespace

    from inference.fast.step import LayerLaunches
    from inference.parallel.fast import FastRankRunner
    from kernels import stream_gemv

    def kernel(*args, **kw):
        return args, kw

    class Fused:
        def slots(self, kind):
            return f"slots{kind}"

        def push_to(self, kind, use):
            return f"push{kind}-{use}"

        def reduce_in(self, kind, use, x):
            return ("in", kind, use, x)

    x, h = torch.zeros(4), torch.zeros(8)
    downs = [f"w_down{i}" for i in range(3)]
    layers = [LayerLaunches(partial(kernel, x, f"w_qkv{i}", "qkv_out", norm_w="n", early=True), f"attention{i}",
                            partial(kernel, "attn", f"w_o{i}", x, early=True), partial(kernel, x, "mlp_norm", 1e-6,
                            f"w_gu{i}", h), "triton down") for i in range(3)]
    fake = SimpleNamespace(x=x, h=h, pdl=True, reducer=Fused(), tuning=SimpleNamespace(fused_down_budget=12345),
                           w=SimpleNamespace(layers=[SimpleNamespace(down=d) for d in downs]))
    fused = FastRankRunner._fuse(fake, layers)
    assert fused[0].qkv is layers[0].qkv
    for i, layer in enumerate(fused):
        assert layer.attention == f"attention{i}"
        if i:
            assert layer.qkv() == ((f"slots1", f"w_qkv{i}", "qkv_out"),
                                   dict(norm_w="n", early=True, fuse=("in", 1, i - 1, x)))
        assert layer.o_proj() == (("attn", f"w_o{i}", x), dict(early=True, fuse=f"push0-{i}"))
        assert layer.gate_up() == (("slots0", "mlp_norm", 1e-6, f"w_gu{i}", h), dict(fuse=("in", 0, i, x)))
        assert layer.down.func is stream_gemv.stream_gemv_residual
        assert layer.down.args == (h, downs[i], x)
        assert layer.down.keywords == dict(pdl=True, budget=12345, fuse=f"push1-{i}")


def test_the_fused_reduction_counts_its_steps_and_addresses_each_kind_on_every_rank():
    """FusedReduce's bookkeeping (its memory needs GPUs): a fused step advances the step counter (the greedy
    argmax's epoch) and the fused-step counter in one op, a flag step only the first; kind k's receive slots sit
    at the same offset on every rank; pushes and reads of a use count epochs from the fused steps."""
    from inference.parallel.reduce import FusedReduce

    red = FusedReduce.__new__(FusedReduce)
    red._counts = torch.zeros(2, dtype=torch.int64)
    red.step, red.fused_step = red._counts[0:1], red._counts[1:2]
    red.partials, red.rank, red.r, red.pdl = (torch.zeros(4), torch.zeros(4)), 1, 3, False
    red.world, red.layers, red.hidden = 2, 28, 1536
    red.recv = torch.zeros(2 * 2 * 1536, dtype=torch.int64)
    red._recv_ptrs = (1 << 20, 2 << 20)
    red.begin_step(pdl=True, fused=True)
    assert red._counts.tolist() == [1, 1] and (red.r, red.pdl) == (0, True)
    red.begin_step(pdl=True, x=torch.ones(4))  # a flag step (a position the fused launches do not cover)
    assert red._counts.tolist() == [2, 1] and torch.equal(red.partials[0], torch.zeros(4))  # rank 1: zeros
    push = red.push_to(1, 7)
    assert push.slots == ((1 << 20) + 2 * 1536 * 8, (2 << 20) + 2 * 1536 * 8)
    assert (push.rank, push.per_step, push.use) == (1, 28, 7) and push.step is red.fused_step
    rin = red.reduce_in(0, 5, torch.zeros(1536))
    assert (rin.world, rin.per_step, rin.use) == (2, 28, 5) and rin.step is red.fused_step
    assert red.slots(1).numel() == 2 * 1536


def test_the_flag_reduction_gives_every_reduction_of_every_step_a_larger_epoch(monkeypatch):
    """FlagReduce's bookkeeping (its buffers and kernel need GPUs): begin_step advances the device step counter
    and starts partial buffer a (rank 0: x; others: zeros), each reduction passes the peers' addresses of its
    source, the other partial buffer as next, and its index r; epoch = step * per_step + r + 1 grows strictly
    from one reduction to the next, across steps; more reductions than per_step in a step are refused."""
    import kernels.flag_reduce as fr
    from inference.parallel.reduce import FlagReduce

    calls = []
    monkeypatch.setattr(fr, "flag_reduce", lambda peers, dst, step, rank, r, per_step, pdl, next, blocks:
                        calls.append((peers, next, int(step.item()), r, per_step, pdl)))
    for rank in (0, 1):
        calls.clear()
        red = FlagReduce.__new__(FlagReduce)
        x, a, b = torch.full((4,), 3.0), torch.full((4,), 9.0), torch.full((4,), 9.0)
        red.partials, red.peers = (a, b), {id(a): ("peers-of-a", b), id(b): ("peers-of-b", a)}
        red.rank, red.per_step, red.r, red.pdl, red.step = rank, 4, 0, False, torch.zeros(1, dtype=torch.int64)
        red.blocks = None
        for _ in range(2):
            red.begin_step(pdl=True, x=x)
            assert torch.equal(a, x if rank == 0 else torch.zeros(4))
            for _ in range(2):
                red(a, x)
                red(b, x)
        assert [c[0] for c in calls] == ["peers-of-a", "peers-of-b"] * 4
        assert [c[1] for c in calls] == [b, a] * 4
        epochs = [step * per_step + r + 1 for _, _, step, r, per_step, _ in calls]
        assert epochs == [5, 6, 7, 8, 9, 10, 11, 12] and all(c[5] for c in calls)
        with pytest.raises(AssertionError, match="more than 4 reductions"):
            red(a, x)
        with pytest.raises(AssertionError):
            red(a, b)  # dst must be the residual stream, not a partial buffer


@pytest.mark.parametrize("shape", ["tiny", "tiny-qwen3"])
def test_the_fast_ranks_prefill_is_the_fast_prefill_split(models, shape):
    """RankPrefill (the fast path's prefill math on a shard, partial sums all-reduced in float32) on
    CPU threads: its vocabulary slices are the one-device PrefillModel's logits, and each rank's KV
    cache holds its heads of the one-device cache."""
    from inference.fast.prefill import PrefillModel
    from inference.parallel.fast import RankPrefill

    cfg, w = models[shape]
    ids = torch.tensor(PROMPT)
    full_cache = KVCache(cfg, 64, "cpu", torch.float32)
    want = PrefillModel(cfg, w, 64).prefill(ids, full_cache, use_graph=False)
    plan = TPPlan(cfg, 2)
    shared = {"slots": [None] * 2, "barrier": threading.Barrier(2, timeout=60)}
    caches = [KVCache(plan.local_cfg(), 64, "cpu", torch.float32) for _ in range(2)]
    parts = [None, None]

    def rank(r):
        model = RankPrefill(plan.local_cfg(), shard_weights(w, plan, r), 64, ThreadComm(r, 2, shared))
        parts[r] = model.prefill(ids, caches[r], use_graph=False)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.testing.assert_close(torch.cat(parts), want, rtol=1e-5, atol=1e-5)
    for r in range(2):
        kv = plan.kv_heads(r)
        torch.testing.assert_close(caches[r].k[:, :, :len(PROMPT)], full_cache.k[:, kv.start:kv.stop, :len(PROMPT)])


# ---- two processes over gloo behind the Engine ----------------------------------------------------

def tokens_and_stats(engine, prompt, n=16, **kw):
    from inference.engine import FinishEvent

    events = list(engine.generate(prompt, SamplingParams(max_tokens=n, ignore_eos=True, **kw)))
    assert isinstance(events[-1], FinishEvent)
    return [t for e in events[:-1] for t in e.token_ids], events[-1].stats


@pytest.mark.slow
def test_engine_tp2_over_gloo_generates_what_tp1_generates_and_close_stops_the_ranks(synth_dir):
    from inference.engine import Engine
    from inference.parallel.profile import sync_split

    path = synth_dir("tiny")
    one = Engine.from_pretrained(path, device="cpu", max_context=256)
    two = Engine.from_pretrained(path, device="cpu", max_context=256, tp=2)
    try:
        assert (two.info["tp"], two.info["runner"], two.info["fast_path"]) == (2, "tp-reference", False)
        assert one.info["tp"] == 1
        for mode, kw in MODES.items():
            prompt = "def fib(n):"
            assert tokens_and_stats(two, prompt, **kw)[0] == tokens_and_stats(one, prompt, **kw)[0], mode
        # No seed given: rank 0 picks one for every rank and reports it; TP=1 with that seed agrees.
        got, stats = tokens_and_stats(two, "x = ", temperature=1.0)
        assert got == tokens_and_stats(one, "x = ", temperature=1.0, seed=stats.seed)[0]
        # The bench's --no-pdl reaches every rank (nothing to switch on reference ranks), which go on in step.
        assert two.runner.pdl is False
        two.runner.pdl = False
        # Teacher forcing (the GPU tests' tool) reaches every rank: the whole vocabulary's logits.
        cfg, prompt, forced = two.cfg, [5, 6, 7, 8, 9], [11, 12, 13]
        model, cache = ReferenceModel(cfg, load_weights(path, cfg), 64), KVCache(cfg, 64, "cpu", torch.float32)
        model.forward(torch.tensor(prompt), 0, cache)
        want = [model.forward(torch.tensor([t]), len(prompt) + i, cache)[0] for i, t in enumerate(forced)]
        two.runner.start(prompt, SamplingParams(max_tokens=8))
        for t, w in zip(forced, want):
            torch.testing.assert_close(two.runner.forced_logits(t), w, rtol=1e-5, atol=1e-5)
        # The bench's split: 2 all-reduces per layer + 1 argmax gather per token, timed on rank 0.
        split = sync_split(two, [5, 6, 7, 8], 6, ms_per_token=10.0)
        assert split["collectives_per_token"] == 2 * two.cfg.num_layers + 1
        assert 0 < split["sync_ms_per_token"] and split["compute_ms_per_token"] == 10.0 - split["sync_ms_per_token"]
        assert two.runner.comm.timed is False and two.runner.comm.spans_ms() == []  # timing is off again
        procs = two.runner.followers.procs
        assert all(p.is_alive() for p in procs)
    finally:
        t0 = time.monotonic()
        two.close()
        closed_in = time.monotonic() - t0
    assert not any(p.is_alive() for p in procs)
    assert closed_in < 5.0, f"close took {closed_in:.1f} s"
    two.close()  # twice is fine


def _launch_tiny(synth_dir, tp=2):
    import functools

    from inference.parallel.launch import LaunchSpec, launch

    path = synth_dir("tiny")
    cfg = ModelConfig.from_file(path / "config.json")
    return launch(LaunchSpec(cfg, functools.partial(load_weights, path, cfg, dtype=torch.float32), tp, "cpu", 64))


def _gone(pid: int) -> bool:
    """The process has exited (a zombie left unreaped by an orphan's new parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.slow
def test_a_dead_follower_fails_the_next_call_and_close_still_returns_within_seconds(synth_dir):
    runner = _launch_tiny(synth_dir)
    try:
        runner.start([5, 6, 7], SamplingParams(max_tokens=8))
        follower = runner.followers.procs[0]
        follower.kill()
        follower.join(timeout=10)
        with pytest.raises(EngineError, match="tp-rank-1 exited"):  # not a collective that never completes
            runner.step()
    finally:
        t0 = time.monotonic()
        runner.close()
    assert time.monotonic() - t0 < 8.0
    assert not torch.distributed.is_initialized()  # a later group can start in this process


@pytest.mark.slow
def test_followers_exit_within_seconds_when_rank_0_dies(synth_dir, tmp_path):
    """Rank 0 is a child process here, SIGKILLed while its group idles: its follower must not
    outlive it (it would hold a GPU forever)."""
    import os
    import signal
    import subprocess
    import sys

    script = (
        "import functools, sys, time, torch\n"
        "from inference.checkpoint import load_weights\n"
        "from inference.config import ModelConfig\n"
        "from inference.parallel.launch import LaunchSpec, launch\n"
        "from pathlib import Path\n"
        "path = Path(sys.argv[1]); cfg = ModelConfig.from_file(path / 'config.json')\n"
        "r = launch(LaunchSpec(cfg, functools.partial(load_weights, path, cfg, dtype=torch.float32), 2, 'cpu', 64))\n"
        "print(r.followers.procs[0].pid, flush=True)\n"
        "time.sleep(600)\n")
    rank0 = subprocess.Popen([sys.executable, "-c", script, str(synth_dir("tiny"))], stdout=subprocess.PIPE, text=True)
    try:
        follower = int(rank0.stdout.readline())
        assert not _gone(follower)
        rank0.send_signal(signal.SIGKILL)
        rank0.wait(timeout=10)
        deadline = time.monotonic() + 5.0
        while not _gone(follower) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(follower), "the follower outlived rank 0"
    finally:
        rank0.kill()
        if "follower" in locals() and not _gone(follower):
            os.kill(follower, signal.SIGKILL)


@pytest.mark.slow
def test_allreduce_bench_times_gloo_between_two_processes():
    from inference.parallel.allreduce_bench import run

    rows = run(2, "cpu", [64, 1536], iters=5)
    assert [(r["elements"], r["bytes"]) for r in rows] == [(64, 256), (1536, 6144)]
    assert all(isinstance(r["eager_us"], float) and r["eager_us"] > 0 for r in rows)


def test_engine_refuses_bad_tp_requests_before_starting_any_process(synth_dir):
    from inference.engine import Engine

    with pytest.raises(EngineError, match="cannot split this model evenly"):
        Engine.from_pretrained(synth_dir("tiny"), device="cpu", tp=3)
    with pytest.raises(EngineError, match="fast path needs device='cuda'"):
        Engine.from_pretrained(synth_dir("tiny"), device="cpu", tp=2, fast=True)


def test_the_fast_ranks_refuse_the_cpu_before_starting_any_process(synth_dir):
    from inference.parallel.launch import LaunchSpec, launch

    path = synth_dir("tiny")
    cfg = ModelConfig.from_file(path / "config.json")
    with pytest.raises(EngineError, match="fast path runs on GPUs"):
        launch(LaunchSpec(cfg, None, 2, "cpu", 64, fast=True))
    with pytest.raises(EngineError, match="reduction must be auto or one of nccl, symm"):
        launch(LaunchSpec(cfg, None, 2, "cuda", 64, fast=True, reduce="ring"))
    assert not torch.distributed.is_initialized()


def test_the_default_reduction_is_the_fused_one_where_every_gpu_reads_its_peers_memory(synth_dir, monkeypatch):
    """auto: the fused reduction (which runs the flag one where a step's GEMVs are not all streamed) where every
    GPU reads its peers' memory and NVRTC compiles, else NCCL."""
    from kernels import _cuda_rtc
    from inference.parallel.launch import LaunchSpec, resolve_reduce

    cfg = ModelConfig.from_file(synth_dir("tiny") / "config.json")
    spec = LaunchSpec(cfg, None, 2, "cuda", 64, fast=True)
    assert spec.reduce == "auto"
    assert resolve_reduce(LaunchSpec(cfg, None, 2, "cpu", 64)) == "nccl"  # reference ranks: no fast reducer
    assert resolve_reduce(LaunchSpec(cfg, None, 2, "cuda", 64, fast=True, reduce="symm")) == "symm"  # as asked
    peers = {(0, 1): True, (1, 0): True}
    monkeypatch.setattr(_cuda_rtc, "available", lambda device=None: True)
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda i, j: peers[(i, j)])
    assert resolve_reduce(spec) == "fused"
    peers[(1, 0)] = False  # one direction without peer access: NCCL
    assert resolve_reduce(spec) == "nccl"
    peers[(1, 0)] = True
    monkeypatch.setattr(_cuda_rtc, "available", lambda device=None: False)  # no NVRTC: NCCL
    assert resolve_reduce(spec) == "nccl"


# ---- >= 2 GPUs: NCCL ------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
@pytest.mark.parametrize("shape", ["qwen2.5-coder-1.5b", "qwen3-1.7b"])
@pytest.mark.parametrize("tp", [2, 4])
def test_nccl_tp_matches_the_single_gpu_paths(tmp_path, shape, tp):
    """The reference ranks (fast=False). float32: greedy tokens identical to the one-GPU reference. bf16, teacher-forced over 128
    positions: against the one-GPU bf16 reference forward (the same eager math unsplit: only the
    split sums differ; >= 99% top-1, rel err <= 1e-2) and against the one-GPU fast path with the
    fast path's own bars for a bf16 prefill then decode (>= 98%, <= 2e-2)."""
    if torch.cuda.device_count() < tp:
        pytest.skip(f"needs {tp} CUDA GPUs")
    from inference.engine import Engine
    from inference.prompts import Prompt
    from inference.synth import write_checkpoint

    path = write_checkpoint(shape, tmp_path / "m", layers=4, device="cuda")
    cfg = ModelConfig.from_file(path / "config.json")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 30000, (160,), generator=g).tolist()
    prompt, forced = ids[:32], ids[32:]

    ref = Engine.from_pretrained(path, device="cuda", dtype="float32", fast=False, max_context=512)
    tp32 = Engine.from_pretrained(path, device="cuda", dtype="float32", fast=False, max_context=512, tp=tp)
    try:
        want = tokens_and_stats(ref, Prompt.from_ids(prompt))[0]
        assert tokens_and_stats(tp32, Prompt.from_ids(prompt))[0] == want
    finally:
        tp32.close()
        del ref

    ref16 = ReferenceModel(cfg, load_weights(path, cfg, device="cuda", dtype=torch.bfloat16), 512)
    cache = KVCache(cfg, 512, "cuda", torch.bfloat16)
    ref16.forward(torch.tensor(prompt, device="cuda"), 0, cache)
    r = torch.stack([ref16.forward(torch.tensor([t], device="cuda"), len(prompt) + i, cache)[0]
                     for i, t in enumerate(forced)]).float()
    del ref16, cache
    fast = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=512)
    tp16 = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", fast=False, max_context=512, tp=tp)
    try:
        params = SamplingParams(max_tokens=256)
        fast.runner.start(prompt, params)
        a = torch.stack([fast.runner.forced_logits(t) for t in forced]).float()
        tp16.runner.start(prompt, params)
        b = torch.stack([tp16.runner.forced_logits(t) for t in forced]).float().to(a.device)
    finally:
        tp16.close()

    def agreement(x, y):
        return (x.argmax(-1) == y.argmax(-1)).float().mean().item(), ((x - y).norm() / y.norm()).item()

    vs_ref, vs_fast = agreement(b, r), agreement(b, a)
    print(f"{shape} tp={tp} bf16 teacher-forced (top-1 agreement, rel err): vs the unsplit reference {vs_ref}, "
          f"vs the fast path {vs_fast}")
    assert vs_ref[0] >= 0.99 and vs_ref[1] <= 1e-2
    assert vs_fast[0] >= 0.98 and vs_fast[1] <= 2e-2


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
@pytest.mark.parametrize("shape, reduce, tp", [("qwen2.5-coder-1.5b", "nccl", 2), ("qwen2.5-coder-1.5b", "symm", 2),
                                               ("qwen2.5-coder-1.5b", "flag", 2),
                                               ("qwen3-1.7b", "nccl", 2), ("qwen2.5-coder-1.5b", "flag", 4),
                                               ("qwen2.5-coder-1.5b", "fused", 2), ("qwen2.5-coder-1.5b", "fused", 4),
                                               ("qwen3-1.7b", "flag", 2), ("qwen3-1.7b", "fused", 2)])
def test_fast_ranks_decode_in_one_graph_like_their_kernels_and_the_one_gpu_fast_path(tmp_path, shape, reduce, tp):
    """TP=2 (and 4: each K/V head on two ranks) fast ranks (NCCL, symmetric-memory or flag all-reduce, or fused
    into the streamed GEMVs), bf16, 4 layers of the real shape. (1) The step graph (kernels + NCCL
    all-reduces + distributed argmax, captured) generates exactly the greedy tokens that the same
    kernels launched eagerly pick, token by token (teacher-forced on the graph's own tokens).
    (2) Sampled requests and a repetition penalty, decoded in the graph, give the tokens of the same
    kernels and sampler ops launched eagerly. (3) Teacher-forced over 256 positions against the
    one-GPU fast path: the bars the fast path's own bf16 prefill-then-decode test uses (>= 98% top-1,
    rel err <= 2e-2; only the split sums differ in rounding). (4) The bench's timing hooks run.
    (5) close() stops the other rank within seconds."""
    from inference.engine import Engine
    from inference.prompts import Prompt
    from inference.synth import write_checkpoint

    if torch.cuda.device_count() < tp:
        pytest.skip(f"needs {tp} CUDA GPUs")
    path = write_checkpoint(shape, tmp_path / "m", layers=4, device="cuda")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 30000, (288,), generator=g).tolist()
    prompt, forced = ids[:32], ids[32:]
    one = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=512)
    two = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=512, tp=tp, tp_reduce=reduce)
    try:
        assert (two.info["runner"], two.info["fast_path"], two.info["tp"]) == ("tp-cuda-graph", True, tp)
        assert two.info["tp_reduce"] == reduce
        greedy = SamplingParams(max_tokens=256)
        got = tokens_and_stats(two, Prompt.from_ids(prompt), n=64)[0]
        assert len(got) == 64
        first = int(two.runner.start(prompt, greedy).cpu()[0])
        eager = [first] + [int(two.runner.forced_logits(t).argmax()) for t in got[:-1]]
        assert eager == got, f"graph and eager kernels part at token {next(i for i, (a, b) in enumerate(zip(eager, got)) if a != b)}"
        want = tokens_and_stats(one, Prompt.from_ids(prompt), n=64)[0]
        same = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(got))

        one.runner.start(prompt, greedy)
        a = torch.stack([one.runner.forced_logits(t) for t in forced]).float()
        two.runner.start(prompt, greedy)
        b = torch.stack([two.runner.forced_logits(t) for t in forced]).float().to(a.device)
        top1 = (a.argmax(-1) == b.argmax(-1)).float().mean().item()
        rel = ((b - a).norm() / a.norm()).item()
        # Sampling and a repetition penalty run in the graph too: the tokens of the same kernels and
        # sampler ops launched eagerly.
        for kw in (dict(temperature=0.8, top_p=0.95, seed=3), dict(temperature=1.0, seed=5), dict(repetition_penalty=1.3)):
            runs = []
            for graphs in (True, False):
                two.runner.use_graphs(graphs)
                runs.append(tokens_and_stats(two, Prompt.from_ids(prompt), n=32, **kw)[0])
            two.runner.use_graphs(True)
            assert runs[0] == runs[1], kw
        with_sync, alone = two.runner.time_steps(64, 32, True), two.runner.time_steps(64, 32, False)
        print(f"{shape} tp={tp} fast ranks ({reduce}): greedy tokens equal to the one-GPU fast path's for {same} of 64; "
              f"teacher-forced top-1 {top1:.4f}, rel err {rel:.2e}; step {with_sync:.3f} ms, "
              f"without collectives {alone:.3f} ms")
        assert top1 >= 0.98 and rel <= 2e-2
        assert with_sync > 0 and alone > 0
        procs = two.runner.followers.procs
    finally:
        t0 = time.monotonic()
        two.close()
        closed_in = time.monotonic() - t0
    assert not any(p.is_alive() for p in procs) and closed_in < 10.0


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_the_flag_reduction_decodes_the_greedy_tokens_of_nccl(tmp_path):
    """TP=2 fast ranks, bf16, 4 layers of the 1.5B shape: with two ranks every rank's sum is a + b whoever
    adds, so the flag reduction (our kernel, in the graph) and NCCL give the same bits, hence the same 64
    greedy tokens; each engine's close() returns within seconds."""
    from inference.engine import Engine
    from inference.prompts import Prompt
    from inference.synth import write_checkpoint

    path = write_checkpoint("qwen2.5-coder-1.5b", tmp_path / "m", layers=4, device="cuda")
    prompt = torch.randint(0, 30000, (32,), generator=torch.Generator().manual_seed(2)).tolist()
    tokens = {}
    for reduce in ("flag", "nccl"):
        engine = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=512, tp=2, tp_reduce=reduce)
        try:
            assert engine.info["tp_reduce"] == reduce
            tokens[reduce] = tokens_and_stats(engine, Prompt.from_ids(prompt), n=64)[0]
        finally:
            t0 = time.monotonic()
            engine.close()
            closed_in = time.monotonic() - t0
        print(f"tp=2 {reduce}: close() in {closed_in:.1f} s")
        assert closed_in < 10.0
    assert len(tokens["flag"]) == 64 and tokens["flag"] == tokens["nccl"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_one_rank_nccl_group_on_one_gpu_generates_the_reference_tokens(tmp_path):
    """The TP path on CUDA over NCCL with one GPU (a group of one: every collective runs, with no
    peers): the tokens of the one-GPU reference runner in every sampling mode, each collective timed."""
    import functools

    from inference.parallel.launch import LaunchSpec, launch
    from inference.synth import write_checkpoint

    path = write_checkpoint("qwen2.5-coder-1.5b", tmp_path / "m", layers=4, device="cuda")
    cfg = ModelConfig.from_file(path / "config.json")
    load = functools.partial(load_weights, path, cfg, dtype=torch.float32)
    runner = launch(LaunchSpec(cfg, load, 1, "cuda", 512, timed=True))
    try:
        ref = ReferenceRunner(cfg, load(device="cuda"), 512)
        for mode, kw in MODES.items():
            params = SamplingParams(max_tokens=32, **{"seed": 0, **kw})
            assert generate(runner, PROMPT, 16, params) == generate(ref, PROMPT, 16, params), mode
        spans = runner.comm.spans_ms()
        assert len(spans) == len(MODES) * 16 * (2 * cfg.num_layers + 1) and min(spans) >= 0
    finally:
        runner.close()
