"""Weights kept in L2 across decode steps: the greedy step's graph with CUDA access-policy windows on its
kernel nodes (persisting lines in the L2 set-aside), against the plain graph (GPU only):

    PYTHONPATH=.:scripts python scripts/probe_l2_persist.py [--shapes a,b] [--context 512] \
        [--variants "none,lm,down,gate_up,qkv,o,qkv+o,lm@16"]

A variant names what may persist (lm = the LM head's first rows; kv = each layer's K and V cache, made
adjacent for this probe and allocated for only context + 2 x replays + 64 positions; the others every
layer's matrix of that kind; a share of each), optionally "@MB" for the set-aside (default: the
device's maximum); "none" = the set-aside reserved, no window; "off" = no set-aside. The windows split
the set-aside over the selected bytes (hit ratio = set-aside / bytes, at most 1). Each variant: the step
captured, windows set on the kernel nodes, re-instantiated, replayed back to back (us per step, median
of 3 rounds, variants alternating). Also says whether a window set on the capture stream reaches the
captured nodes. Prints a table last.
"""
import argparse
import ctypes
import statistics
import tempfile

import torch

from _probe_engine import greedy_graph, random_engine, replay_us
from kernels._cuda_rtc import _check, _driver

LIMIT_PERSISTING_L2 = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
DEV_MAX_PERSISTING_L2, DEV_MAX_WINDOW = 108, 109  # CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, ..._WINDOW_SIZE
ATTR_WINDOW = 1  # CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
NORMAL, STREAMING, PERSISTING = 0, 1, 2  # CUaccessProperty
KERNEL_NODE = 0  # CU_GRAPH_NODE_TYPE_KERNEL
PER_LAYER = ("qkv", "attention", "o", "gate_up", "down")


class Window(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("nbytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int)]


class Value(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("window", Window)]


def device_attr(attr: int) -> int:
    v = ctypes.c_int()
    _check(_driver().cuDeviceGetAttribute(ctypes.byref(v), attr, torch.cuda.current_device()), "cuDeviceGetAttribute")
    return v.value


def set_aside(nbytes: int) -> int:
    d = _driver()
    d.cuCtxSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    _check(d.cuCtxSetLimit(LIMIT_PERSISTING_L2, nbytes), "cuCtxSetLimit")
    got = ctypes.c_size_t()
    _check(d.cuCtxGetLimit(ctypes.byref(got), LIMIT_PERSISTING_L2), "cuCtxGetLimit")
    return got.value


def kernel_nodes(graph_handle: int) -> list[ctypes.c_void_p]:
    d = _driver()
    n = ctypes.c_size_t()
    _check(d.cuGraphGetNodes(ctypes.c_void_p(graph_handle), None, ctypes.byref(n)), "cuGraphGetNodes")
    nodes = (ctypes.c_void_p * n.value)()
    _check(d.cuGraphGetNodes(ctypes.c_void_p(graph_handle), nodes, ctypes.byref(n)), "cuGraphGetNodes")
    out = []
    for node in nodes:
        t = ctypes.c_int()
        _check(d.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t)), "cuGraphNodeGetType")
        if t.value == KERNEL_NODE:
            out.append(ctypes.c_void_p(node))
    return out


def node_func(node) -> int:
    params = (ctypes.c_char * 256)()
    d = _driver()
    get = getattr(d, "cuGraphKernelNodeGetParams_v2", None) or d.cuGraphKernelNodeGetParams
    _check(get(node, params), "cuGraphKernelNodeGetParams")
    return ctypes.c_uint64.from_buffer(params).value


def get_window(node) -> Window:
    v = Value()
    _check(_driver().cuGraphKernelNodeGetAttribute(node, ATTR_WINDOW, ctypes.byref(v)), "cuGraphKernelNodeGetAttribute")
    return v.window


def set_window(node, base: int, nbytes: int, ratio: float) -> None:
    v = Value()
    v.window = Window(base, nbytes, ratio, PERSISTING if ratio > 0 else NORMAL, NORMAL)
    _check(_driver().cuGraphKernelNodeSetAttribute(node, ATTR_WINDOW, ctypes.byref(v)), "cuGraphKernelNodeSetAttribute")


def step_nodes(graph: torch.cuda.CUDAGraph, num_layers: int) -> list:
    """The step's kernel nodes in launch order: 5 per layer, then the LM head (checked by function)."""
    nodes = kernel_nodes(graph.raw_cuda_graph())
    funcs = [node_func(n) for n in nodes]
    assert len(nodes) == 5 * num_layers + 1, f"{len(nodes)} kernel nodes"
    for j in range(5):
        assert len({funcs[5 * i + j] for i in range(num_layers)}) == 1, f"node order: position {j} mixes kernels"
    return nodes


def apply(graph, engine, variant: str, max_setaside: int, max_window: int) -> str:
    """Set the windows of `variant` on the graph's nodes; returns a description."""
    kinds, _, mb = variant.partition("@")
    size = set_aside(0 if kinds == "off" else int(float(mb) * 2**20) if mb else max_setaside)
    nodes = step_nodes(graph, engine.cfg.num_layers)
    w = engine.runner.w
    for n in nodes:  # a window of normal lines only: what the nodes had before
        set_window(n, w.norm.data_ptr(), 256, 0.0)
    sel = kinds.split("+")
    targets = []  # (node, tensor)
    cache = engine.runner.cache
    for i, layer in enumerate(w.layers):
        for j, kind in enumerate(PER_LAYER):
            if kind == "attention" and "kv" in sel:
                targets.append((nodes[5 * i + j], cache.kv[i]))
            elif kind in sel and kind != "attention":
                targets.append((nodes[5 * i + j], getattr(layer, kind)))
    total = sum(min(t.numel() * t.element_size(), max_window) for _, t in targets)
    if "lm" in sel:  # the LM head's first rows, as many as the set-aside holds beside the rest
        lm_bytes = min(max(size - total, size // 2 if targets else size), max_window)
        total += lm_bytes
    ratio = min(1.0, size / total) if total else 0.0
    for node, t in targets:
        set_window(node, t.data_ptr(), min(t.numel() * t.element_size(), max_window), ratio)
    if "lm" in sel:
        set_window(nodes[-1], w.lm_head.data_ptr(), lm_bytes, ratio)
    graph.instantiate()
    if kinds in ("off", "none"):
        return f"set-aside {size / 2**20:.1f} MB, no window"
    return f"set-aside {size / 2**20:.1f} MB over {total / 2**20:.0f} MB, hit ratio {ratio:.3f}"


def stream_window_reaches_nodes(engine, context: int) -> bool:
    """Capture with a window set on the capture stream: do the kernel nodes carry it?"""
    runner = engine.runner
    runner.graphs.clear()
    w = runner.w.lm_head
    orig = torch.cuda.Stream

    def stream_with_window(*a, **k):
        s = orig(*a, **k)
        v = Value()
        v.window = Window(w.data_ptr(), 2**20, 1.0, PERSISTING, NORMAL)
        _check(_driver().cuStreamSetAttribute(ctypes.c_void_p(s.cuda_stream), ATTR_WINDOW, ctypes.byref(v)),
               "cuStreamSetAttribute")
        return s
    torch.cuda.Stream = stream_with_window
    try:
        graph = greedy_graph(engine, context, warmup=1)
    finally:
        torch.cuda.Stream = orig
    nodes = step_nodes(graph, engine.cfg.num_layers)
    return all(get_window(n).nbytes == 2**20 for n in nodes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="qwen2.5-coder-1.5b,qwen3-1.7b,qwen2.5-coder-3b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--variants", default="off,none,kv,lm,down,gate_up,qkv,o,kv+qkv")
    args = ap.parse_args()
    variants = args.variants.split(",")
    torch.cuda.init()
    max_setaside, max_window = device_attr(DEV_MAX_PERSISTING_L2), device_attr(DEV_MAX_WINDOW)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"L2 {l2 / 2**20:.1f} MB, max set-aside {max_setaside / 2**20:.1f} MB, "
          f"max window {max_window / 2**20:.1f} MB", flush=True)
    orig_graph = torch.cuda.CUDAGraph
    rows = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            engine = random_engine(shape, args.context + 2 * args.replays + 64, tmp)
            c = engine.runner.cache  # K and V of a layer side by side: one window covers both
            c.kv = torch.zeros((c.k.shape[0], 2, *c.k.shape[1:]), dtype=c.k.dtype, device=c.k.device)
            c.k, c.v = c.kv[:, 0], c.kv[:, 1]
            torch.cuda.CUDAGraph = lambda: orig_graph(keep_graph=True)
            try:
                print(f"{shape}: a window on the capture stream reaches the nodes: "
                      f"{stream_window_reaches_nodes(engine, args.context)}", flush=True)
                engine.runner.graphs.clear()
                engine.runner.model.graphs.clear()
                times = {v: [] for v in variants}
                desc = {}
                for _ in range(3):
                    for v in variants:
                        graph = greedy_graph(engine, args.context)  # pos back to the context
                        desc[v] = apply(graph, engine, v, max_setaside, max_window)
                        for _ in range(5):
                            graph.replay()
                        times[v].append(replay_us(graph, args.replays))
            finally:
                torch.cuda.CUDAGraph = orig_graph
            for v in variants:
                med = statistics.median(times[v])
                rows.append((shape, v, desc[v], med))
                print(f"{shape} [{v}] {desc[v]}: {med:.1f} us/step {[round(t, 1) for t in times[v]]}", flush=True)
            set_aside(0)
            del engine, graph, c
            torch.cuda.empty_cache()
    print("\n| shape | persisting | windows | us/step | tok/s |")
    print("|---|---|---|---:|---:|")
    for shape, v, d, med in rows:
        print(f"| {shape} | {v} | {d} | {med:.1f} | {1e6 / med:.0f} |")


if __name__ == "__main__":
    main()
