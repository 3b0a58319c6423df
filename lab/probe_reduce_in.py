"""What the fused tensor-parallel reduction adds to a TP rank's streamed GEMV launches, on one GPU (GPU only):

    python -m lab.probe_reduce_in [--shapes qwen2.5-coder-1.5b,qwen2.5-coder-3b] [--tp 2,4] [--launches 24]

With `--tp-reduce fused` (inference.parallel.reduce.FusedReduce) a rank's normalizing GEMVs (QKV, gate/up;
kernels.stream_gemv) take their input as world slots of 8-byte words (value + epoch, `ReduceIn`): every CTA
reads world x K words and sums them, where the unfused launch reads K floats. Here the slots are filled
beforehand (every word already carries its epoch), so no launch waits for a peer: the difference against the same
launch with a float32 activation is the consumer side's floor. Likewise the residual GEMVs (o_proj, down_proj):
`Push` stores each row to world slots (all on this GPU here; over NVLink the stores cost more) against the plain
read-add-store of the residual.

Each variant: `launches` launches chained with PDL in one CUDA graph over rotating weight copies (L2 never holds
the weights), the rank's shapes of TP=N (inference.parallel.plan.TPPlan: QKV by heads, gate/up by columns, o_proj
and down_proj by rows), the tuning row's ring budgets; us per launch, median of do_bench over replays.
"""

import argparse

import torch

from inference.parallel.plan import TPPlan
from inference.synth import SHAPES
from kernels import stream_gemv as sg
from kernels.tuning import for_device
from lab.bench_kernels import copies, in_graph_us

BF = torch.bfloat16


def words(world: int, k: int, epoch: int, device) -> torch.Tensor:
    """world x k LL words that already carry `epoch`, small random values."""
    vals = (torch.randn(world * k, device=device) * 0.1).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    return vals | (epoch << 32)


def rank_rows(cfg, tp: int) -> dict:
    """(mode, rows, K, budget field) of a rank's four streamed GEMVs at TP=tp."""
    local = TPPlan(cfg, tp).local_cfg()
    qkv = local.q_size + 2 * local.kv_size
    return {"qkv": ("rmsnorm_gemv", qkv, cfg.hidden_size, "qkv_budget"),
            "o_proj": ("residual", cfg.hidden_size, local.q_size, "o_budget"),
            "gate_up": ("gate_up", 2 * local.intermediate_size, cfg.hidden_size, "gate_up_budget"),
            "down": ("residual", cfg.hidden_size, local.intermediate_size, "fused_down_budget")}


def probe(shape: str, tp: int, launches: int, tuning, dev) -> list[tuple]:
    cfg = SHAPES[shape].config()
    step = torch.ones(1, dtype=torch.int64, device=dev)  # epoch 1 = (1 - 1) * 1 + 0 + 1
    rows = []
    for name, (mode, n, k, budget_field) in rank_rows(cfg, tp).items():
        budget = getattr(tuning, budget_field)
        ws = copies(lambda: torch.randn(n, k, device=dev, dtype=BF) * 0.02, n * k * 2)
        norm = torch.randn(k, device=dev, dtype=BF) if mode != "residual" else None
        kw = dict(pdl=True, budget=budget, carveout=tuning.stream_carveout if mode == "gate_up" else None)

        def launch(act, out, fuse=None):
            return lambda w: sg.stream_op(sg.Op(mode, w, act, out, norm_w=norm), 1e-6, fuse=fuse, **kw)

        x = torch.randn(k, device=dev)
        if mode == "residual":  # out: the residual stream (rank 0 adds it to what it pushes)
            out = torch.randn(n, device=dev)
            recv = [torch.zeros(tp * n, dtype=torch.int64, device=dev) for _ in range(tp)]
            fused = launch(x, out, sg.Push(tuple(r.data_ptr() for r in recv), 0, step, 1, 0))
            what = f"push to {tp} slots"
        else:
            out = torch.zeros(n // (2 if mode == "gate_up" else 1), device=dev)
            fused = launch(words(tp, k, 1, dev), out, sg.ReduceIn(step, tp, 1, 0, x))
            what = f"sum of {tp} slots in"
        plain_us = in_graph_us(launch(x, out), ws, launches)
        fused_us = in_graph_us(fused, ws, launches)
        rows.append((shape, tp, name, f"{n} x {k}", what, plain_us, fused_us))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="qwen2.5-coder-1.5b,qwen2.5-coder-3b")
    p.add_argument("--tp", default="2,4")
    p.add_argument("--launches", type=int, default=24)
    args = p.parse_args()
    unknown = sorted(set(args.shapes.split(",")) - set(SHAPES))
    if unknown:
        p.error(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    if not all(t.isdigit() and int(t) >= 1 for t in args.tp.split(",")):
        p.error(f"--tp takes positive integers separated by commas, not {args.tp!r}")
    dev = torch.device("cuda")
    tuning = for_device(dev)
    print(f"{torch.cuda.get_device_name(dev)}, tuning {tuning.name}; us per launch, {args.launches} launches "
          f"chained with PDL in one graph, rotating weight copies")
    print("| shape | TP | GEMV | rank's rows x K | fused side | plain us | fused us | added us |")
    print("|---|---:|---|---|---|---:|---:|---:|")
    for shape in args.shapes.split(","):
        for tp in (int(t) for t in args.tp.split(",")):
            for s, t, name, dims, what, plain, fused in probe(shape, tp, args.launches, tuning, dev):
                print(f"| {s} | {t} | {name} | {dims} | {what} | {plain:.2f} | {fused:.2f} | {fused - plain:+.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
