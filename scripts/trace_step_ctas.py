"""Every CTA's timeline of the streamed GEMVs inside the decode step (GPU only; a timing probe):

    PYTHONPATH=.:scripts python scripts/trace_step_ctas.py [shape] [--context 512] [--budget gate_up=120]
        [--variant aE+o80+gu144+C]

Compiles kernels.stream_gemv with TRACE=2 (each CTA stamps %globaltimer at its start, PDL wait passed,
activation staged, first and last ring slot landed, loop done, outputs written, and the producer's
last copy issued, plus its SM id) and kernels.cluster_attention with TRACE=1 (CTA 0's phases), replays
the engine's greedy step graph (the runner's GEMVs, ring budgets optionally changed, or the kernels of
a scripts/probe_overlap.py variant, e.g. a streamed down_proj "dn100") once and prints:
how many SMs each streamed op's CTAs landed on; median over the middle layers, us from the attention's
start, min / median / max over CTAs of each stamp; the latest-finishing gate/up CTAs of one layer
(with their SM), and the spread of gate/up CTAs that started before vs after the attention ended.
What it found (kernels/PERF.md, tenth session): o_proj's small CTAs pair up on some SMs, gate/up's
main loop streams at ~3.3-3.6 TB/s with a two-slot ring.
"""
import argparse
import statistics
import tempfile

import torch

from _probe_engine import greedy_graph, random_engine
from kernels import cluster_attention as cluster
from kernels import stream_gemv as stream

SLOTS = ["start", "wait passed", "staged", "first slot", "loop done", "end", "producer done", "", "last slot"]
SHOW = [0, 1, 2, 3, 8, 4, 5, 6]
KINDS = ("qkv", "o", "gate_up", "down")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="?", default="qwen2.5-coder-1.5b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--budget", default="", help="ring budgets in KB instead of the runner's, e.g. gate_up=120")
    ap.add_argument("--variant", default="", help="a scripts/probe_overlap.py variant instead of the runner's GEMVs")
    args = ap.parse_args()
    if args.variant:
        import probe_overlap  # replaces FastRunner._layers by its variant-driven one
        probe_overlap.CUR.update(probe_overlap.parse(args.variant))
    budgets = {k: int(v) * 1024 for k, v in (b.split("=") for b in args.budget.split(",") if b)}
    stream.PROBE_DEFINES["TRACE"] = 2
    cluster.PROBE_DEFINES["TRACE"] = 1
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    with tempfile.TemporaryDirectory() as tmp:
        engine = random_engine(args.shape, args.context + 64, tmp)
        runner = engine.runner
        nl = runner.cfg.num_layers
        which = {}
        for i, layer in enumerate(runner.w.layers):
            for kind in KINDS:
                which[getattr(layer, kind).data_ptr()] = (kind, i)
        bufs = {k: torch.zeros(nl, sms * 16, dtype=torch.int64, device="cuda") for k in KINDS}
        chain = stream.stream_chain

        def traced(ops, *a, **kw):
            kind, i = which[ops[0].w.data_ptr()]
            kw = {**kw, "trace": bufs[kind][i]}
            return chain(ops, *a, **({**kw, "budget": budgets[kind]} if kind in budgets else kw))
        stream.stream_chain = traced
        graph = greedy_graph(engine, args.context, warmup=2)
        ws = runner.ws
        ws.tickets.zero_()
        ws.acc.zero_()
        for b in bufs.values():
            b.zero_()
        graph.replay()
        torch.cuda.synchronize()
        attn = ws.acc.view(torch.int64).flatten()[:nl * 20].view(-1, 2, 10).cpu()
        ws.tickets.zero_()
        stream.stream_chain = chain
    t = {k: b.view(nl, sms, 16).cpu() for k, b in bufs.items()}
    used = {k: [c for c in range(sms) if v[nl // 2, c, 0] != 0] for k, v in t.items()}
    print(f"[{args.shape}, ctx {args.context}, gemv {runner.gemv_kind}, attention {runner.attention_kind}, "
          f"budgets {args.budget or 'runner'}{', variant ' + args.variant if args.variant else ''}] "
          f"CTAs: " + ", ".join(f"{k} {len(c)}" for k, c in used.items()))
    mids = range(2, nl - 2)
    for k, v in t.items():
        if used[k]:
            per_sm = {}
            for c in used[k]:
                sm = int(v[nl // 2, c, 7])
                per_sm[sm] = per_sm.get(sm, 0) + 1
            print(f"  {k}: {len(used[k])} CTAs on {len(per_sm)} SMs, at most {max(per_sm.values())} per SM")

    def rel(kind, layer, slot, fn):
        t0 = attn[layer, 0, 0].item()
        vals = [(t[kind][layer, c, slot].item() - t0) / 1e3 for c in used[kind] if t[kind][layer, c, slot] != 0]
        return fn(vals) if vals else float("nan")

    print("us from layer i's attention start (CTA 0), median over layers; min / median / max over CTAs")
    def attn_us(k):
        return statistics.median((attn[i, 0, k] - attn[i, 0, 0]).item() / 1e3 for i in mids)
    print(f"  attention CTA 0: wait returned {attn_us(1):.2f}, merged + stored {attn_us(8):.2f}")
    for kind, off in (("o", 0), ("gate_up", 0), ("down", 0), ("qkv", 1)):
        if not used[kind]:
            continue
        label = kind if not off else "next qkv"
        for slot in SHOW:
            name = SLOTS[slot]
            cells = []
            for fn in (min, statistics.median, max):
                cells.append(statistics.median(rel(kind, i + off, slot, fn) - 0 for i in mids if i + off < nl))
            print(f"  {label:9s} {name:14s} " + " ".join(f"{c:7.2f}" for c in cells))
    # one layer's gate/up CTAs, by end time
    i = nl // 2
    t0 = attn[i, 0, 0].item()
    attn_end = (attn[i, 0, 8].item() - t0) / 1e3
    rows = []
    for c in used["gate_up"]:
        v = [(t["gate_up"][i, c, s].item() - t0) / 1e3 for s in SHOW]
        rows.append((v[6], c, int(t["gate_up"][i, c, 7]), v))
    rows.sort(reverse=True)
    print(f"\nlayer {i}: gate/up CTAs finishing last (attention CTA 0 done at {attn_end:.2f} us)")
    print("  cta  sm   " + " ".join(f"{SLOTS[s][:10]:>10s}" for s in SHOW))
    for end, c, sm, v in rows[:8] + rows[-3:]:
        print(f"  {c:3d} {sm:3d}   " + " ".join(f"{x:10.2f}" for x in v))
    early = [r for r in rows if r[3][0] < attn_end]
    late = [r for r in rows if r[3][0] >= attn_end]
    for name, grp in (("started before attention ended", early), ("started after", late)):
        if grp:
            print(f"  {name}: {len(grp)} CTAs, first slot median {statistics.median(r[3][3] for r in grp):.2f}, "
                  f"end median {statistics.median(r[0] for r in grp):.2f} max {max(r[0] for r in grp):.2f}")


if __name__ == "__main__":
    main()
