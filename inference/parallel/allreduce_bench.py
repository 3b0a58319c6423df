"""All-reduce latency at decode sizes: what one tensor-parallel reduction costs.

    python -m inference.parallel.allreduce_bench [--tp 2] [--device cuda|cpu]
        [--sizes 1536,2048,3584] [--iters 200] [--symm-mem] [--flag] [--json FILE]

Spawns `tp` ranks (NCCL on cuda:0..tp-1, gloo on CPU) and times a sum all-reduce of one
hidden-state vector per size (elements; bf16 on CUDA, float32 on CPU): eager (`iters`
back-to-back calls timed with device events), inside one CUDA graph (`iters` calls captured,
the replay timed: what a graph-captured decode step would pay), and with --symm-mem PyTorch's
symmetric-memory one-shot all-reduce in a graph (peer reads over NVLink; no multicast), with --flag
our flag reduction in a graph (kernels/flag_reduce.py, float32 as in the decode step, PDL on: what
the step's --tp-reduce flag pays per reduction, its step-counter increment amortised over
64 calls; with 1, the rule's and 4 CTAs;
then every rank's sum is checked bit for bit against the rank-order sum, and its next partial buffer
against the sum on rank 0 and zeros elsewhere; a mismatch is that cell's error), and a last row: the
greedy step's distributed argmax over 151,936 / tp logits per rank, Comm.argmax (torch ops + an NCCL
all-gather) vs the flag reducer's one kernel (with its step-counter increment), the token checked). Each
number is the slowest rank's mean per call. Prints a table last. Multicast stays off
(the launcher's NO_MULTICAST environment); a mode that fails prints its error instead.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .comm import init_group
from .launch import NO_MULTICAST, _free_port


def _eager_us(x: torch.Tensor, iters: int) -> float:
    for _ in range(5):
        dist.all_reduce(x)
    dist.barrier()
    if x.is_cuda:
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            dist.all_reduce(x)
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1000 / iters
    t = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    return (time.perf_counter() - t) * 1e6 / iters


def _graph_us(op, iters: int) -> float:
    """Mean us per call of `op()` captured `iters` times in one CUDA graph, replayed 5 times."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            op()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            op()
    g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(5):
        g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000 / (5 * iters)


def _symm_mem_op(n: int, dtype: torch.dtype, device: torch.device):
    import torch.distributed._symmetric_memory as symm_mem

    group = dist.group.WORLD.group_name
    buf = symm_mem.empty(n, dtype=dtype, device=device).fill_(1)
    symm_mem.rendezvous(buf, group)
    return lambda: torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group)


def _flag_us(n: int, device: torch.device, iters: int, blocks: int | None = None) -> float:
    """us per flag reduction of n float32 in a graph (the step counter advances every 64 calls, as a decode
    step's does every 2 x layers reductions); then checks the sum: rank q's partial is a seeded random
    vector, every rank must hold the partials summed in rank order, bit for bit."""
    from types import SimpleNamespace

    from kernels.flag_reduce import reference

    from .reduce import FlagReduce

    rank, world = dist.get_rank(), dist.get_world_size()
    red = FlagReduce(SimpleNamespace(rank=rank, world=world), n, device, per_step=64, blocks=blocks)
    src, nxt = red.partials
    dst = torch.full((n,), float("nan"), device=device)
    partials = [torch.randn(n, generator=torch.Generator().manual_seed(q)) for q in range(world)]
    src.copy_(partials[rank])
    torch.cuda.synchronize(device)
    dist.barrier()

    def op():
        if red.r == red.per_step:
            red.begin_step(pdl=True)
        red.pdl = True
        red(src, dst)

    us = _graph_us(op, iters)
    torch.cuda.synchronize(device)
    want = reference(partials)
    if not torch.equal(dst.cpu(), want):
        raise AssertionError(f"flag reduce: rank {rank} holds a wrong sum "
                             f"(max err {(dst.cpu() - want).abs().max().item():.3g})")
    if not torch.equal(nxt.cpu(), want if rank == 0 else torch.zeros(n)):
        raise AssertionError(f"flag reduce: rank {rank}'s next partial buffer is not {'the sum' if rank == 0 else 'zero'}")
    return us


def _argmax_us(n: int, device: torch.device, iters: int, flag: bool) -> float:
    """us per distributed greedy argmax over every rank's n float32 logits in a graph: Comm.argmax (torch ops and
    an NCCL all-gather) or FlagReduce.argmax (one kernel); then checks the token against torch.argmax over
    all ranks' logits (seeded per rank; a tie planted across ranks must go to the lowest id)."""
    from types import SimpleNamespace

    from .comm import DistComm
    from .reduce import FlagReduce

    rank, world = dist.get_rank(), dist.get_world_size()
    slices = [torch.randn(n, generator=torch.Generator().manual_seed(100 + q)) for q in range(world)]
    for q in range(world):
        slices[q][q + 7] = 10.0  # the same best value on every rank: the lowest id (rank 0's) wins
    logits = slices[rank].to(device)
    if flag:
        red = FlagReduce(SimpleNamespace(rank=rank, world=world), 1024, device, per_step=2)
        red.pdl = True

        def op():
            red.step.add_(1)
            return red.argmax(logits, rank * n)
    else:
        comm = DistComm()

        def op():
            return comm.argmax(logits, rank * n)
    us = _graph_us(op, iters)
    got, want = int(op().item()), int(torch.cat(slices).argmax())
    if got != want:
        raise AssertionError(f"argmax: rank {rank} got token {got}, not {want}")
    return us


def _slowest(value: float, failed: bool, device: torch.device) -> float | None:
    """The largest of every rank's value, or None if any rank failed (all ranks call this)."""
    t = torch.tensor([value, float(failed)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return None if t[1].item() else float(t[0].item())


def _timed_mode(measure, device: torch.device):
    """measure() -> us on this rank; -> the slowest rank's us, or the error (this rank's or another's)."""
    try:
        value, error = measure(), None
    except Exception as e:  # report the mode's failure, keep the others
        value, error = 0.0, f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}"
    slowest = _slowest(value, error is not None, device)
    return slowest if slowest is not None else (error or "failed on another rank")


def _rank_main(rank: int, args, init_method: str, out) -> None:
    cuda = args.device == "cuda"
    init_group(rank, args.tp, init_method, "nccl" if cuda else "gloo")
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    rows = []
    for n in args.sizes:
        x = torch.ones(n, dtype=dtype, device=device)
        row = {"elements": n, "bytes": n * dtype.itemsize,
               "eager_us": _timed_mode(lambda: _eager_us(x, args.iters), device)}
        if cuda:
            row["graph_us"] = _timed_mode(lambda: _graph_us(lambda: dist.all_reduce(x), args.iters), device)
            if args.symm_mem:
                row["symm_mem_one_shot_graph_us"] = _timed_mode(
                    lambda: _graph_us(_symm_mem_op(n, dtype, device), args.iters), device)
            if args.flag:
                row["flag_fp32_graph_us"] = _timed_mode(lambda: _flag_us(n, device, args.iters), device)
                for b in (1, 4):
                    row[f"flag_{b}cta_graph_us"] = _timed_mode(lambda: _flag_us(n, device, args.iters, blocks=b), device)
        rows.append(row)
    if cuda and args.flag:  # the greedy step's distributed argmax over 151,936 / tp logits per rank
        n = 151936 // args.tp
        rows.append({"elements": n, "bytes": n * 4, "argmax": True,
                     "argmax_comm_graph_us": _timed_mode(lambda: _argmax_us(n, device, args.iters, False), device),
                     "argmax_flag_graph_us": _timed_mode(lambda: _argmax_us(n, device, args.iters, True), device)})
    if rank == 0:
        out.put(rows)
    dist.barrier()
    dist.destroy_process_group()


def run(tp: int, device: str, sizes: list[int], iters: int, symm_mem: bool = False, flag: bool = False) -> list[dict]:
    """Spawn the ranks, return rank 0's rows (one per size); a rank's crash is raised here."""
    os.environ.update(NO_MULTICAST)
    args = argparse.Namespace(tp=tp, device=device, sizes=sizes, iters=iters, symm_mem=symm_mem, flag=flag)
    out = mp.get_context("spawn").Queue()
    procs = mp.start_processes(_rank_main, args=(args, f"tcp://127.0.0.1:{_free_port()}", out), nprocs=tp,
                               join=False, start_method="spawn")
    while True:
        try:
            rows = out.get(timeout=1.0)
            break
        except queue.Empty:
            procs.join(timeout=0)  # raises if a rank failed
    while not procs.join():
        pass
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m inference.parallel.allreduce_bench", description=__doc__.split("\n")[0])
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda if available")
    p.add_argument("--sizes", default="1536,2048,3584", help="elements per all-reduce (hidden sizes)")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--symm-mem", action="store_true", help="also time the symmetric-memory one-shot all-reduce")
    p.add_argument("--flag", action="store_true", help="also time the flag reduction (kernels/flag_reduce.py)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.tp < 2:
        p.error("--tp must be at least 2")
    if device == "cuda" and torch.cuda.device_count() < args.tp:
        print(f"error: --tp {args.tp} needs {args.tp} GPUs, {torch.cuda.device_count()} visible", file=sys.stderr)
        return 2
    rows = run(args.tp, device, [int(s) for s in args.sizes.split(",") if s], args.iters, args.symm_mem, args.flag)
    if args.json:
        Path(args.json).write_text(json.dumps({"tp": args.tp, "device": device, "rows": rows}, indent=2))
    cols = list(dict.fromkeys(k for r in rows for k in r if k.endswith("_us")))
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU (gloo)"
    print(f"\nall-reduce (sum), {args.tp} ranks, {name}, mean of {args.iters} calls, slowest rank")
    print("| elements | bytes | " + " | ".join(cols) + " |")
    print("|---:|---:|" + "---:|" * len(cols))
    for r in rows:
        print(f"| {r['elements']} | {r['bytes']} | "
              + " | ".join(f"{r[c]:.1f}" if isinstance(r.get(c), float) else str(r.get(c, "-")) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
