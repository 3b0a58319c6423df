"""The greedy step with each op's kernel chosen per variant (GPU only): what the "overlap" GEMVs and
stream_mlp were picked from (kernels/PERF.md, eighth and ninth sessions).

    PYTHONPATH=.:scripts python scripts/probe_overlap.py SHAPES VARIANTS
    e.g. ... qwen2.5-coder-1.5b base,qkv64+gu120+oE,qkv64+oE+mlp170c1

A variant joins tokens with "+": qkvN / oN / guN / dnN stream that GEMV (kernels.stream_gemv) with
an N KB ring (qkvNS / oNS / guNS: and release the next kernel at its start); oE / dE make the Triton
o_proj / down release the next kernel right after their PDL wait; aE makes the CUDA attention release
it at its start; C: the CUDA kernels (streamed GEMVs, attention) prefer the all-shared carveout (100%);
kL_D: the streamed gate/up's last L CTAs take D fewer units each (stream_chain skew); T: the Triton
kernels prefer the all-shared carveout too; D: the streamed gate/up's CTAs take tiles from a ticket counter
(stream_chain tickets) instead of a fixed share; TM (with D): its slots arrive as tensor-map copies;
pfN: the streamed o_proj prefetches N MB of gate/up's first rows into L2 (runner.gate_up_head) once its own
weights have landed; lhN_K_W[_S]: the LM head's Triton config (BLOCK_N, BLOCK_K, warps, stages: default 1);
oGN: the streamed o_proj on N CTAs (instead of one per SM); MMA: the streamed QKV and o_proj on tensor
cores (stream_gemv MMA_SMALL, the tenth session's path);
oNC / qNC: the streamed o_proj / QKV without their dot products (stream_gemv NO_COMPUTE: wrong
results, a bound); oX: no o_proj at all (a bound, not the op); aP: the CUDA attention's CTAs take the shared memory an
attention + o_proj fusion would (its 1/16 of the kv head's W_o columns, and their inputs; 1.5B: 231,008 bytes);
dcN_K_W[_S] / gcN_K_W[_S] / qcN_K_W[_S]: the Triton down_proj / gate/up / QKV with BLOCK_N N, BLOCK_K K, W warps,
S pipeline stages (default 3, Triton's, as the rule's) instead of kernels._util's rule; dA0 / gA0: the Triton
down_proj / gate/up without their lookahead (kernels._util.residual_lookahead / gate_up_lookahead); dA1 / gA1rR:
with it (gate/up summing R neighbouring columns in-thread, 1: a full accumulator); dF[N]: the Triton down_proj's
programs prefetch the next layer's QKV weights (their first N MB) into L2 after their main loop, 32 KB each;
mlpNcC runs the whole MLP as stream_mlp (N KB, clusters of C); "base" is all Triton. Per
variant: the relative difference of one layer stack's output from the first variant's, and us per
step (median of 3 rounds of 100 replays, variants alternating). Prints a table last.
"""
import statistics
import sys
import tempfile

import torch

from _probe_engine import greedy_graph, random_engine, replay_us
from inference.fast.runner import FastRunner, gate_up_head
from kernels import _util, cluster_attention, stream_gemv as stream
from kernels.gemv_residual import gemv_residual, _gemv_residual_kernel
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.rmsnorm_gemv import rmsnorm_gemv

def parse(v):  # e.g. "qkv64+oE+gu120+dE", "qkv64+o64S+gu120+aE"
    d = {"qkv": 0, "gu": 0, "oE": False, "dE": False, "o": 0, "dn": 0, "mlp": 0, "cl": 8, "aE": False, "C": False,
         "k": (0, 0), "S": set(), "T": False, "D": False, "TM": False, "dc": None, "gc": None, "qc": None,
         "oX": False, "aP": False,
         "oNC": False, "qNC": False, "MMA": False, "oG": 0, "pf": 0, "lh": None,
         "dA": None, "gA": None, "gR": None, "dF": 0}
    for t in v.split("+"):
        if t.endswith("S") and t[-2:-1].isdigit():  # a streamed op that releases the next kernel at its start
            t = t[:-1]; d["S"].add(t.rstrip("0123456789"))
        if t.startswith("qkv"): d["qkv"] = int(t[3:]) * 1024
        elif t.startswith("gu"): d["gu"] = int(t[2:]) * 1024
        elif t.startswith("mlp"):
            b, _, c = t[3:].partition("c"); d["mlp"] = int(b) * 1024; d["cl"] = int(c or 8)
        elif t.startswith("dn"): d["dn"] = int(t[2:]) * 1024
        elif t.startswith("oG"): d["oG"] = int(t[2:])
        elif t.startswith("pf"): d["pf"] = int(t[2:]) << 20
        elif t.startswith("lh"): d["lh"] = (tuple(int(n) for n in t[2:].split("_")) + (1,))[:4]
        elif t[:2] in ("dc", "gc", "qc"): d[t[:2]] = (tuple(int(n) for n in t[2:].split("_")) + (3,))[:4]
        elif t.startswith("o") and t[1:].isdigit(): d["o"] = int(t[1:]) * 1024
        elif t in ("oE", "dE", "aE", "C", "T", "D", "TM", "oX", "aP", "oNC", "qNC", "MMA"): d[t] = True
        elif t.startswith("dF"): d["dF"] = int(t[2:] or 10**6) << 20
        elif t[:2] == "dA": d["dA"] = bool(int(t[2:] or 1))  # dA0: off
        elif t[:2] == "gA":  # e.g. gA0 (off), gA1r4
            a, _, r = t[2:].partition("r"); d["gA"] = bool(int(a or 1)); d["gR"] = int(r) if r else None
        elif t.startswith("k"): d["k"] = tuple(int(n) for n in t[1:].split("_"))
    return d

def triton_carveout(pct):
    """Set the preferred shared-memory carveout of every compiled Triton kernel of kernels/ (-1: default)."""
    import ctypes
    from kernels import _cuda_rtc, gate_up_silu, gemv_residual as gr, lm_head_argmax, rmsnorm_gemv as rg
    for fn in (gr._gemv_residual_kernel, gate_up_silu._gate_up_silu_kernel, rg._rmsnorm_gemv_kernel,
               lm_head_argmax._lm_head_argmax_kernel):
        for cache in fn.device_caches.values():
            for k in cache[0].values():
                if getattr(k, "function", None):
                    _cuda_rtc._driver().cuFuncSetAttribute(ctypes.c_void_p(k.function), 9, pct)

CUR = {}
TUNED0 = dict(_util.TUNED)
SMEM_BYTES0 = cluster_attention.smem_bytes
AP, HID = [False], [0]
def layers(self):
    d, w, eps, pdl = CUR, self.w, self.cfg.rms_norm_eps, self.pdl
    c = 100 if d["C"] else None
    triton_carveout(100 if d["T"] else -1)
    stream.PROBE_DEFINES["MMA_SMALL"] = int(d["MMA"])
    _util.TUNED.clear(); _util.TUNED.update(TUNED0)
    if AP[0] != d["aP"]:  # the kernel is cached with its shared memory size
        AP[0] = d["aP"]
        cluster_attention.smem_bytes = (lambda g, c=16: SMEM_BYTES0(g, c) + HID[0] // c * g * 128 * 2 + g * 512 + 16) \
            if d["aP"] else SMEM_BYTES0
        cluster_attention._kernel.cache_clear()
    gu = w.layers[0].gate_up.shape
    for key, shape in (("dc", w.layers[0].down.shape), ("gc", (gu[0] // 2, gu[1])), ("qc", w.layers[0].qkv.shape),
                       ("lh", w.lm_head.shape)):
        if d[key]:
            _util.TUNED[tuple(shape)] = [d[key]]
    for i, layer in enumerate(w.layers):
        if d["qkv"]:
            stream.PROBE_DEFINES["NO_COMPUTE"] = int(d["qNC"])
            stream.stream_rmsnorm_gemv(self.x, layer.qkv, self.qkv, layer.attn_norm, eps, layer.qkv_bias, pdl=pdl,
                                       budget=d["qkv"], early="qkv" in d["S"], carveout=c)
        else:
            rmsnorm_gemv(self.x, layer.qkv, self.qkv, norm_w=layer.attn_norm, eps=eps, bias=layer.qkv_bias, pdl=pdl)
        self._attention(i, early=d["aE"], carveout=c)
        if d["oX"]:
            pass
        elif d["o"]:
            stream.PROBE_DEFINES["NO_COMPUTE"] = int(d["oNC"])
            sms = stream._sms
            if d["oG"]:
                stream._sms = lambda dev: d["oG"]
            stream.stream_gemv_residual(self.attn, layer.o, self.x, pdl=pdl, budget=d["o"], early="o" in d["S"],
                                        carveout=c, l2_prefetch=gate_up_head(layer.gate_up, d["pf"]))
            stream._sms = sms
        else:
            gemv_residual(self.attn, layer.o, self.x, pdl=pdl, early=d["oE"])
        stream.PROBE_DEFINES["NO_COMPUTE"] = 0
        if d["mlp"]:
            if not hasattr(self, "wdt"):
                self.wdt = [l.down.t().contiguous() for l in w.layers]
                self.sync2 = torch.zeros(2, dtype=torch.int32, device=self.device)
            stream.stream_mlp(self.x, layer.mlp_norm, eps, layer.gate_up, self.wdt[i], self.sync2, pdl=pdl,
                              budget=d["mlp"], cluster=d["cl"])
            continue
        if d["gu"]:
            if d["D"] and not hasattr(self, "gu_tickets"):
                self.gu_tickets = torch.zeros(2, dtype=torch.int32, device=self.device)
            stream.stream_gate_up_silu(self.x, layer.mlp_norm, eps, layer.gate_up, self.h, pdl=pdl, budget=d["gu"],
                                       early="gu" in d["S"], carveout=c, skew=d["k"],
                                       tickets=self.gu_tickets if d["D"] else None, tensor_map=d["TM"])
        else:
            rmsnorm_gate_up_silu(self.x, layer.mlp_norm, eps, layer.gate_up, self.h, pdl=pdl, ahead=d["gA"],
                                 red=d["gR"])
        if d["dn"]:
            stream.stream_gemv_residual(self.h, layer.down, self.x, pdl=pdl, budget=d["dn"], early="dn" in d["S"],
                                        carveout=c)
        else:
            nxt = w.layers[i + 1].qkv.view(-1)[:d["dF"] // 2] if d["dF"] and i + 1 < len(w.layers) else None
            gemv_residual(self.h, layer.down, self.x, pdl=pdl, early=d["dE"], ahead=d["dA"], l2_prefetch=nxt)
FastRunner._layers = layers

def main():
    shapes = sys.argv[1].split(",")
    variants = sys.argv[2].split(",")
    rows = []
    for shape in shapes:
        with tempfile.TemporaryDirectory() as tmp:
            eng = random_engine(shape, 512 + 400, tmp)
            r = eng.runner
            HID[0] = eng.cfg.hidden_size
            # registers of the Triton GEMVs around the streamed ones
            L = r.w.layers[0]
            for nm, wt, a in (("o", L.o, r.attn), ("down", L.down, r.h)):
                cfg = _util.gemv_config(*wt.shape)
                cfg.update(_util.residual_lookahead(wt.shape[1], cfg))
                ck = _gemv_residual_kernel[(1,)](a, wt, r.x.clone(), wt.shape[0], wt.shape[1], r.x, 0, USE_PDL=True,
                                                 EARLY=False, **cfg)
                print(shape, nm, cfg, "regs", ck.n_regs, "spills", ck.n_spills, "shared", ck.metadata.shared,
                      flush=True)
            # reference logits of the plain step vs each variant: one teacher-forced token
            ref = None
            times = {v: [] for v in variants}
            for rnd in range(3):
                for v in variants:
                    CUR.clear(); CUR.update(parse(v)); r.graphs = {}
                    g = greedy_graph(eng, 512)
                    times[v].append(replay_us(g, 100))
                    if rnd == 0:
                        r.pos.fill_(600); torch.manual_seed(0); r.x.normal_(); x0 = r.x.clone()
                        for _ in range(1): r._layers()
                        out = r.x.clone(); r.x.copy_(x0)
                        if ref is None: ref = out
                        err = ((out - ref).norm() / ref.norm()).item()
                        print(f"{shape} [{v}] rel err vs first {err:.2e}", flush=True)
                    del g
            for v in variants:
                med = statistics.median(times[v]); rows.append((shape, v, med))
                print(f"{shape} [{v}]: {med:.1f} us/step {[round(t, 1) for t in times[v]]}", flush=True)
            del eng, r; torch.cuda.empty_cache()
    print("\n| shape | variant | us/step | tok/s |\n|---|---|---:|---:|")
    for s, v, m in rows: print(f"| {s} | {v} | {m:.1f} | {1e6/m:.0f} |")

if __name__ == '__main__':
    main()
