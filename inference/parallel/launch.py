"""Start a tensor-parallel group: rank 0 in this process, ranks 1..tp-1 spawned beside it.

    runner = launch(LaunchSpec(cfg, load, tp=2, device="cpu", max_context=256))  # fast=True: GPU fast ranks
    runner.start(ids, params); runner.step(); ...; runner.close()

`load(device=...)` returns the full `ModelWeights` on a device (a picklable callable, e.g.
`functools.partial(checkpoint.load_weights, path, cfg, dtype=...)`): every rank loads, keeps its
shard and frees the rest, so no weights cross process boundaries. Ranks use cuda:rank (NCCL) on
a GPU, the CPU (gloo) otherwise. Followers are `torch.multiprocessing` spawn processes that
wait for commands on a queue (RANK_CALLS, or "stop") and run them on their rank;
they report "ready" (or the error that stopped them) once loaded.

Shutdown: NCCL's communicator teardown is collective (a rank's destroy waits for its peers'), so
`RankGroup.close` sends "stop" and then leaves the group on rank 0 *while* the followers leave it
on theirs, each teardown bounded in time (a dead peer cannot hang it); followers then exit with
os._exit, and any that linger are terminated, then killed. A follower also exits at once when
rank 0's process dies (a watchdog thread waits on the parent's sentinel), whatever it was doing.
The environment keeps NVLink multicast off for every rank (NO_MULTICAST), set here before any
rank starts: the only place this package touches environment variables.
One group per process (torch.distributed's default group).
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import queue
import socket
import sys
import threading
import time
from multiprocessing.connection import wait as wait_any
from dataclasses import dataclass, replace
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..config import ModelConfig
from ..errors import EngineError
from ..runner import Runner
from ..weights import ModelWeights
from .comm import DistComm, init_group
from .plan import TPPlan
from .reduce import REDUCERS
from .runner import RankRunner, TPRunner
from .shard import shard_weights

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
READY_TIMEOUT_S = 600.0  # loading a checkpoint on every rank
TEARDOWN_S = 20.0  # leaving the group: long enough for a follower to catch up on queued steps
EXIT_S = 5.0  # a follower past its teardown: then terminate, then kill
RANK_CALLS = ("start", "step", "forced_logits", "time_steps", "use_pdl", "use_graphs")  # what rank 0 asks a follower to run (runner.TPRunner)


@dataclass(frozen=True)
class LaunchSpec:
    cfg: ModelConfig
    load: Callable[..., ModelWeights]  # load(device=...) -> full weights; picklable
    tp: int
    device: str = "cpu"  # "cpu" (gloo) or "cuda" (rank r on cuda:r, NCCL)
    max_context: int = 2048
    timed: bool = False  # DistComm records time inside collectives (bench; reference ranks)
    timeout_s: float = 300.0  # rendezvous and collectives
    fast: bool = False  # GPU: each rank runs the fast path (fast.FastRankRunner), else the reference
    attention: str = "auto"  # the fast ranks' kernel choices (FastRunner's attention, gemv, tuning row)
    gemv: str = "auto"
    tuning: str = "auto"
    reduce: str = "auto"  # the fast ranks' all-reduce (reduce.py: nccl | symm | flag | fused; auto: resolve_reduce)

    @property
    def backend(self) -> str:
        return "nccl" if self.device == "cuda" else "gloo"

    def rank_device(self, rank: int) -> torch.device:
        return torch.device("cuda", rank) if self.device == "cuda" else torch.device("cpu")


def check_devices(tp: int, device: str) -> None:
    """One clear message for a TP request this machine cannot run."""
    if device == "cpu":
        return
    if device != "cuda":
        raise EngineError(f"--tp {tp} spans cuda:0..cuda:{tp - 1}: pass device 'cuda', not {device!r} "
                          "(choose GPUs with CUDA_VISIBLE_DEVICES)")
    n = torch.cuda.device_count()
    if n < tp:
        raise EngineError(f"--tp {tp} needs {tp} GPUs, {n} visible")


def build_rank(spec: LaunchSpec, rank: int) -> Runner:
    """Load, shard and wrap one rank (the process group must exist)."""
    plan = TPPlan(spec.cfg, spec.tp)
    device = spec.rank_device(rank)
    full = spec.load(device=str(device))
    shard = shard_weights(full, plan, rank, device)
    del full
    if device.type == "cuda":
        torch.cuda.empty_cache()
    comm = DistComm(timed=spec.timed)
    if not spec.fast:
        return RankRunner(plan, rank, shard, comm, spec.max_context)
    from kernels import tuning as tuning_table  # imports Triton: GPU ranks only

    from .fast import FastRankRunner
    return FastRankRunner(plan, rank, shard, comm, spec.max_context, attention=spec.attention, gemv=spec.gemv,
                          tuning=tuning_table.by_name(spec.tuning, device), reduce=spec.reduce)


class RankGroup:
    """Rank 0's handles on the followers: send them commands, stop them."""

    def __init__(self, procs: list, commands: list):
        self.procs, self.commands = procs, commands
        self.closed = False

    def send(self, msg: tuple) -> None:
        for q in self.commands:
            q.put(msg)

    def check(self) -> None:
        """EngineError if the group was closed or a follower has exited (its collectives would never come)."""
        if self.closed:
            raise EngineError("the tensor-parallel group is closed")
        for p in self.procs:
            if not p.is_alive():
                raise EngineError(f"tensor-parallel {p.name} exited (code {p.exitcode}); close the engine")

    def close(self) -> None:
        """Stop every follower and leave the group; returns within about TEARDOWN_S + 3 * EXIT_S
        seconds whatever state the followers are in (idempotent)."""
        if self.closed:
            return
        self.closed = True
        alive = [p for p in self.procs if p.is_alive()]
        self.send(("stop",))
        # Leave together: the followers run the same bounded teardown on "stop". If one is already
        # gone, a collective teardown cannot complete: wait only briefly for it then.
        leave_group(TEARDOWN_S if len(alive) == len(self.procs) else EXIT_S)
        deadline = time.monotonic() + TEARDOWN_S + EXIT_S
        for p in self.procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for stop in ("terminate", "kill"):
            lingering = [p for p in self.procs if p.is_alive()]
            for p in lingering:
                getattr(p, stop)()
            for p in lingering:
                p.join(timeout=EXIT_S)
        for q in self.commands:  # never block this process's exit on an unread queue
            q.cancel_join_thread()
            q.close()


def leave_group(timeout_s: float) -> bool:
    """Destroy this process's default group, waiting at most timeout_s (NCCL's teardown waits for
    every peer's); False if it did not finish (it is then left to finish, or not, in the background)."""
    if not dist.is_initialized():
        return True
    done = threading.Event()

    def destroy():
        try:
            dist.destroy_process_group()
        finally:
            done.set()

    threading.Thread(target=destroy, name="tp-leave-group", daemon=True).start()
    return done.wait(timeout_s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_reduce(spec: LaunchSpec) -> str:
    """The all-reduce `reduce="auto"` means: our fused reduction (reduce.py's "fused": o_proj and down_proj push
    their rows to every rank inside the streamed GEMVs, the next norm's GEMV sums them; the flag reduction,
    kernels/flag_reduce, where a step's GEMVs are not all streamed; both CUDA C via NVRTC over NVLink: 4 H100s,
    1.5B shape at TP=4, 1,308 tok/s fused vs 1,087 flag) where the fast ranks run on GPUs that can all read each
    other's memory, else NCCL."""
    if spec.reduce != "auto":
        return spec.reduce
    if not (spec.fast and spec.device == "cuda"):
        return "nccl"
    from kernels import _cuda_rtc

    if not all(_cuda_rtc.available(i) for i in range(spec.tp)):
        return "nccl"
    pairs = [(i, j) for i in range(spec.tp) for j in range(spec.tp) if i != j]
    return "fused" if all(torch.cuda.can_device_access_peer(i, j) for i, j in pairs) else "nccl"


def launch(spec: LaunchSpec) -> TPRunner:
    """Spawn ranks 1..tp-1, join as rank 0, load every shard; EngineError if any rank fails. The runner's
    `reduce` is the all-reduce its fast ranks use (spec.reduce, "auto" resolved)."""
    TPPlan(spec.cfg, spec.tp)  # refuse an uneven split before starting anything
    if spec.reduce not in REDUCERS + ("auto",):
        raise EngineError(f"tensor-parallel reduction must be auto or one of {', '.join(REDUCERS)}, "
                          f"not {spec.reduce!r}")
    if spec.fast and spec.device != "cuda":
        raise EngineError("the tensor-parallel fast path runs on GPUs (device 'cuda')")
    check_devices(spec.tp, spec.device)
    spec = replace(spec, reduce=resolve_reduce(spec))
    if dist.is_initialized():
        raise EngineError("a tensor-parallel group is already running in this process (one per process)")
    os.environ.update(NO_MULTICAST)
    ctx = mp.get_context("spawn")
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    replies = ctx.Queue()
    commands = [ctx.Queue() for _ in range(spec.tp - 1)]
    procs = [ctx.Process(target=_follower_main, args=(rank, spec, init_method, commands[rank - 1], replies),
                         daemon=True, name=f"tp-rank-{rank}") for rank in range(1, spec.tp)]
    for p in procs:
        p.start()
    group = RankGroup(procs, commands)
    try:
        init_group(0, spec.tp, init_method, spec.backend, spec.timeout_s)
        local = build_rank(spec, 0)
        _wait_ready(procs, replies)
    except BaseException as e:
        group.close()
        if isinstance(e, EngineError):
            raise
        raise EngineError(f"tensor-parallel start failed on rank 0: {type(e).__name__}: {e}") from e
    atexit.register(group.close)
    runner = TPRunner(local, group)
    runner.reduce = spec.reduce
    return runner


def _wait_ready(procs: list, replies) -> None:
    waiting = {p.name: p for p in procs}
    deadline = READY_TIMEOUT_S
    while waiting and deadline > 0:
        try:
            rank, error = replies.get(timeout=1.0)
        except queue.Empty:
            deadline -= 1.0
            dead = [name for name, p in waiting.items() if not p.is_alive()]
            if dead:
                raise EngineError(f"tensor-parallel {dead[0]} exited while loading")
            continue
        if error:
            raise EngineError(f"tensor-parallel rank {rank} failed to start: {error}")
        waiting.pop(f"tp-rank-{rank}")
    if waiting:
        raise EngineError(f"tensor-parallel ranks not ready after {READY_TIMEOUT_S:.0f} s: {', '.join(waiting)}")


def _exit_with_parent(parent, rank: int) -> None:
    """Watchdog thread of a follower: exit the moment rank 0's process is gone, saying where this rank was
    (a hung collective shows up here when the test or bench around rank 0 is killed)."""
    wait_any([parent.sentinel])
    print(f"tensor-parallel rank {rank}: rank 0's process is gone; exiting. Where this rank was:", file=sys.stderr)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    os._exit(1)


def _follower_main(rank: int, spec: LaunchSpec, init_method: str, commands, replies) -> None:
    """A follower process: join the group, load the shard, then run rank 0's commands until "stop"."""
    parent = mp.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with_parent, args=(parent, rank), name="tp-parent-watch", daemon=True).start()
    try:
        if spec.device == "cpu":
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // spec.tp))
        init_group(rank, spec.tp, init_method, spec.backend, spec.timeout_s)
        runner = build_rank(spec, rank)
    except BaseException as e:  # report it: rank 0 turns it into one EngineError
        replies.put((rank, f"{type(e).__name__}: {e}"))
        replies.close()
        replies.join_thread()
        os._exit(1)
    replies.put((rank, None))
    replies.close()
    replies.join_thread()
    code = 0
    try:
        while True:
            method, *args = commands.get()
            if method == "stop":
                break
            if method not in RANK_CALLS:
                raise ValueError(f"unknown command {method!r}")
            getattr(runner, method)(*args)
        getattr(runner, "release", lambda: None)()
    except BaseException as e:  # rank 0 sees its own collective fail or time out
        print(f"tensor-parallel rank {rank}: {type(e).__name__}: {e}", file=sys.stderr)
        code = 1
    if not leave_group(TEARDOWN_S):
        code = code or 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # not through multiprocessing's exit (it joins queue threads)
