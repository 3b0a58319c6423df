"""Inside one decode_attention launch: when each step of each program happens (GPU only).

    PYTHONPATH=. python scripts/trace_attention.py [shape] [context]

Builds a traced copy of kernels/decode_attention.py's kernel at run time (the same source with
`%globaltimer` reads added, each made to wait for the value it follows), swaps it into the engine's
FastRunner, replays the greedy step's CUDA graph and prints, median over layers 1..L-1, in ns: how
long the launch's first program waited for the PDL release, then per active program the pos load,
q load + norm + RoPE, the tile loop, the partial stores + ticket, and the last program's merge.
Figures are in kernels/PERF.md ("Fourth session"). The copy follows the kernel's source: if a
patch below no longer matches, the kernel changed and this script needs the new anchor.
"""
import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path

import torch

import inference.fast.runner as R
from _probe_engine import greedy_graph, random_engine

TIMER = '''
@triton.jit
def _now(dep):
    """%globaltimer (ns), read once `dep` (an int32 scalar) is available."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, is_pure=False,
                                     pack=1)


'''
PATCHES = [  # (anchor in the kernel's source, replacement): trace slots 0..6 per program
    ("m2_ws_ptr, l2_ws_ptr, acc2_ws_ptr, cnt_ptr, out_ptr,\n    T_MAX,",
     "m2_ws_ptr, l2_ws_ptr, acc2_ws_ptr, cnt_ptr, out_ptr, tr_ptr,\n    T_MAX,"),
    ("    split = tl.program_id(1)\n    if USE_PDL:",
     "    split = tl.program_id(1)\n    tr = tr_ptr + (kvh * S + split) * 8\n    tl.store(tr, _now(split))\n    if USE_PDL:"),
    ("    pos = tl.load(pos_ptr)\n",
     "    tl.store(tr + 1, _now(split))\n    pos = tl.load(pos_ptr)\n    tl.store(tr + 2, _now(pos))\n"),
    ("    q = q * qk_scale  # [G_PAD, D]\n",
     "    q = q * qk_scale  # [G_PAD, D]\n"
     "    tl.store(tr + 3, _now(tl.sum(tl.sum(q, axis=1), axis=0).to(tl.int32, bitcast=True)))\n"),
    ("    if USE_PDL:\n        tl.extra.cuda.gdc_launch_dependents()  # only the epilogue",
     "    tl.store(tr + 4, _now(tl.sum(tl.sum(acc, axis=1), axis=0).to(tl.int32, bitcast=True)))\n"
     "    if USE_PDL:\n        tl.extra.cuda.gdc_launch_dependents()  # only the epilogue"),
    ("        n1 = tl.minimum(n_active - grp * GS, GS)\n",
     "        n1 = tl.minimum(n_active - grp * GS, GS)\n        tl.store(tr + 5, _now(ticket))\n"),
    ("            if n_groups == 1:\n",
     "            tl.store(tr + 6, _now(tl.sum(l1, axis=0).to(tl.int32, bitcast=True)))\n            if n_groups == 1:\n"),
    ("        ws.m, ws.l, ws.acc, ws.m2, ws.l2, ws.acc2, ws.tickets, out,\n",
     "        ws.m, ws.l, ws.acc, ws.m2, ws.l2, ws.acc2, ws.tickets, out, TRACE[0],\n"),  # the launch
]


def traced_module(tmp: Path):
    src = Path("kernels/decode_attention.py").read_text()
    src = src.replace("@triton.jit\ndef _norm_rope", TIMER + "@triton.jit\ndef _norm_rope", 1)
    for anchor, new in PATCHES:
        assert src.count(anchor) == 1, f"anchor not found once in decode_attention.py: {anchor!r}"
        src = src.replace(anchor, new)
    path = tmp / "decode_attention_traced.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("decode_attention_traced", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    shape = sys.argv[1] if len(sys.argv) > 1 else "qwen2.5-coder-1.5b"
    ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    tmp = tempfile.TemporaryDirectory()
    mod = traced_module(Path(tmp.name))
    engine = random_engine(shape, ctx + 256, tmp.name)
    L, S, hkv = engine.cfg.num_layers, engine.runner.splits, engine.cfg.num_kv_heads
    tr = torch.zeros(L, hkv * S * 8, dtype=torch.int64, device="cuda")
    calls = [0]

    def traced(*a, **k):  # the runner calls decode_attention once per layer, in order
        mod.TRACE = [tr[calls[0] % L]]
        calls[0] += 1
        return mod.decode_attention(*a, **k)

    R.decode_attention = traced
    g = greedy_graph(engine, ctx, warmup=10)
    tr.zero_()
    g.replay()
    torch.cuda.synchronize()
    t = tr.view(L, hkv * S, 8).cpu().numpy().astype("int64")
    names = ["first start -> PDL release", "pos load", "q load + norm + RoPE", "tile loop", "partials + ticket",
             "merge (last program)", "release -> merged"]
    rows = {k: [] for k in names}
    n_active = 0
    for layer in range(1, L):
        x = t[layer]
        act = x[x[:, 5] > 0]  # programs that drew a ticket
        last = x[x[:, 6] > 0]
        n_active = len(act)
        rows[names[0]].append(x[:, 1].min() - x[:, 0].min())
        for i, k in enumerate(names[1:5], start=1):
            rows[k].append(statistics.median(act[:, i + 1] - act[:, i]))
        rows[names[5]].append(statistics.median(last[:, 6] - last[:, 5]))
        rows[names[6]].append(last[:, 6].max() - x[:, 1].min())
    print(f"[{shape} ctx {ctx}] decode_attention, ns, median over layers 1..{L - 1} "
          f"({n_active} active programs of {hkv * S})")
    for k, v in rows.items():
        print(f"  {k:28s} {statistics.median(v):7.0f}   (layers: min {int(min(v))}, max {int(max(v))})")


if __name__ == "__main__":
    main()
