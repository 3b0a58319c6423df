"""Batch-1 GEMVs in CUDA C whose weights stream through a shared-memory ring (TMA bulk copies),
several GEMVs per launch. Hopper (sm_90+) with NVRTC only; weights bf16/fp16 with K a multiple of 16.
The runner's "overlap" GEMVs (FastRunner.use_gemv; the default at short context) run o_proj, and
for hidden sizes <= 1536 also QKV and gate/up, with it, in rings small enough (`budget`) to share an
SM with the kernel before them, which releases them early, so their weights arrive while that
kernel runs (kernels/PERF.md, eighth to tenth sessions); chains and stream_mlp are correct but not
faster in the step (opt-in / probes only).

The ops are those of the Triton kernels, with the same contracts and references:
    "rmsnorm_gemv"  out = W @ (rmsnorm(x) * norm_w) + bias    (kernels.rmsnorm_gemv; QKV)
    "residual"      x += W @ a                                (kernels.gemv_residual; o_proj, down)
    "gate_up"       out = silu(Wg @ n) * (Wu @ n)             (kernels.gate_up_silu)
stream_chain([Op, ...]) runs up to MAX_PHASES of them in ONE launch (the runner: o_proj + gate/up +
down + the next layer's QKV), with a grid barrier between two ops; stream_rmsnorm_gemv,
stream_gemv_residual and stream_gate_up_silu are one-op launches. stream_mlp is the whole MLP in one
launch (gate/up, SiLU*up, then down_proj as a split-K over the CTA's own intermediate units with
W_down stored transposed, partials added into x with atomics).

The idea: weights do not depend on the previous op, so a producer warp per CTA copies them into a
ring of shared-memory slots without a break, across the ops of the launch and from before the PDL
wait, while 8 consumer warps wait for the activation (previous kernel, or grid barrier) and stage it
once per op in shared memory. gate/up runs its dots on tensor cores: the activation staged as MMA
fragments (each fp32 value split into three 16-bit parts: ~fp32 precision), per slot (MT = 16 rows x
KC columns, rows padded so that ldmatrix is conflict-free) each warp takes KC / 128 steps of 16
columns (ldmatrix + mma.sync m16n8k16), keeps the row tile's partial sums in registers over its K
chunks and writes them once per tile; the epilogue adds the 8 warps' partials and applies the norm
scale and SiLU*up. QKV and residual ops (a few rows per CTA, on the step's critical path) run on CUDA
cores instead (consume_cc: fp32 activation, each warp two whole rows, shuffle reductions; twelfth
session: 1.5B step -13 us, Qwen3 / 3B -4 to -5 us). One CTA per SM (grid = min(#SMs, units)); CTA b owns
a balanced contiguous range of units (rows; gate/up row pairs).

Measured (H200, 1.5B shapes, kernels/PERF.md): one bulk copy per row and slot, so slots are as
wide as the budget allows (copies of 0.75 / 1.5 / 3 KB stream gate/up at 1.8 / 2.8 / 4.0 TB/s);
gate/up alone 15.4 us vs 16.7 for Triton, a chained layer 35.6 us vs 31.5 (down, the activation
round trips and the grid barriers lose it). In the decode step (eighth session): QKV (64 KB ring) +
gate/up (120 KB) launched early 1099 -> 1068-1072 us on 1.5B; slower for hidden 2048 and beside the
Triton attention; stream_mlp level (1073.5 with the same QKV). Ninth session: o_proj (80 KB ring,
its whole slice) launched at the attention's start (early=True there) and releasing gate/up at its
own start (early=True): 1.5B 1068 -> ~1056 us; o_proj alone for hidden 2048: Qwen3 1178 -> 1127, 3B
1933 -> 1891 (streamed gate/up at K = 2048 is still much slower there). Tenth session (1.5B): gate/up
with three slots (164 KB) under the all-shared carveout (`carveout=100`, so that it fits beside
o_proj's CTAs) and a split skewed towards the CTAs that start first (`skew`): 1042 -> ~1018 us.
Eleventh session (opt-in, not faster in the step): `tickets` (one gate/up op takes 8-unit tiles from a
ticket counter as its CTAs go) and `tensor_map` (those tiles' slots copied as 3-D tensor-map boxes with
the 128-byte swizzle); a CTA fits beside another kernel's only if the registers of its 3 warps in one SM
quarter fit there too (kernels/PERF.md). Thirteenth session: `l2_prefetch` (the producers prefetch spans
of the next kernel's weights into L2 once their own have landed): the runner's hidden-2048 o_proj fetches
the Triton gate/up's first 6 MB during attention, 3B step -18 us, Qwen3 -16.
PROBE_DEFINES (NO_COMPUTE, NO_BARRIER, TRACE) are for the probes only (scripts/probe_stream_gemv.py;
TRACE 2: every CTA's timeline, scripts/trace_step_ctas.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels._util import check_vec

NWARP = 8  # consumer warps
THREADS = 32 * (NWARP + 1)  # + one producer warp
MT = 16  # rows per ring slot (one MMA tile)
MAX_KC = 2048  # columns per ring slot at most (one bulk copy per row and slot: the bigger, the faster)
ROW_PAD = 16  # bytes after each row of a slot: rows 16 bytes apart mod 128 make ldmatrix conflict-free
MAX_PHASES = 4
SMEM_BUDGET = 200 * 1024  # ring + row sums + activation (at 150 KB the chains' slots get narrow: slower)
# for scripts/probe_stream_gemv.py only (NO_COMPUTE / NO_BARRIER = 1 give wrong results, for timing)
# MMA_SMALL = 1: modes 0 and 1 on tensor cores as gate/up (the tenth session's path, for A/B probes)
PROBE_DEFINES = {"NO_COMPUTE": 0, "NO_BARRIER": 0, "TRACE": 0, "MMA_SMALL": 0}
# mode -> (MODE, kernel name of a one-op launch: what profilers show), rows per unit
MODES = {"rmsnorm_gemv": (0, "stream_rmsnorm_gemv", 1), "residual": (1, "stream_gemv_residual", 1),
         "gate_up": (2, "stream_gate_up_silu", 2), "down_t": (3, "stream_mlp", 1)}
MLP_CLUSTER = 1  # CTAs per cluster of stream_mlp (> 1: they add their down_proj partials in shared memory first)
_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}

# mbarrier and bulk-copy helpers (CUDA C), shared with scripts/probe_tma_stream.py
MBARRIER_CUDA = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ void bulk_copy(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
"""

_SOURCE = MBARRIER_CUDA + r"""
#define NWARP 8
#define NCONSUMER (NWARP * 32)
#define MT 16                       // rows per ring slot: one MMA M tile
#define ROWB (SLOT_KC * 2 + ROW_PAD) // bytes per row in a slot
#define STAGE (MT * ROWB)           // bytes of one ring slot

struct Phase {  // one GEMV of the chain (mirrored by _Phase in Python)
  const unsigned char* w; const float* act; const void* norm_w; const void* bias; float* out;
  const void* tmap;  // TMAP: w as a 3-D tensor map (64 columns, rows, K / 64 column chunks), 128-byte swizzle
  int units, K, late, deficit;  // the last `late` CTAs take `deficit` fewer units each (they start later)
};
// pf / pf_bytes: up to two spans of global memory that the CTAs' producers prefetch into L2 after their own
// copies (an even share each), for the kernel after this one (stream_chain's l2_prefetch)
struct Params { Phase p[MAXP]; u32* sync; unsigned long long* trace; float eps; int pad;
                const unsigned char* pf[2]; unsigned long long pf_bytes[2]; };

// TRACE (probes only): 1: CTA 0's consumer thread 0 writes (%globaltimer, code) pairs to prm.trace, each
// read once the value it follows is available. code = 100 * phase + event. 2 (one-op launches): every CTA
// writes 16 u64 at trace[16 * blockIdx.x]: times of its start, PDL wait passed, activation staged, first
// slot landed, last slot consumed, outputs written, producer's last copy issued; its SM id; last slot landed.
#if TRACE == 1
#define STAMP(code, dep) do { unsigned long long t_; \
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_) : "f"((float)(dep)) : "memory"); \
  if (blockIdx.x == 0 && threadIdx.x == 0 && tn < 120) { trace[2 * tn] = t_; trace[2 * tn + 1] = (code); } \
  ++tn; } while (0)
#elif TRACE == 2
#define STAMP(code, dep) do { unsigned long long t_; \
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_) : "f"((float)(dep)) : "memory"); \
  const int e_ = (code) % 100, sl_ = (code) == 900 ? 0 : (code) == 901 ? 6 : e_ == 0 ? 1 : e_ == 1 ? 2 : e_ == 3 ? 3 \
                 : e_ == 4 ? 4 : 5; \
  if (threadIdx.x == 0 || (code) == 901) { \
    if (sl_ != 3 || tn == 0) trace[16 * blockIdx.x + sl_] = t_; \
    if (sl_ == 3) { trace[16 * blockIdx.x + 8] = t_; tn = 1; } } } while (0)
#else
#define STAMP(code, dep) do {} while (0)
#endif

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" :: "n"(NCONSUMER) : "memory"); }
__device__ __forceinline__ void cluster_sync() {  // every thread of the cluster, the producer warp included
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ u32 cluster_rank() { u32 r; asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ float ld_peer(u32 local, u32 rank) {  // a float of CTA `rank`'s shared memory
  u32 a; float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(local), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ float h2f(u32 bits16) {
  float f; unsigned short h = (unsigned short)bits16; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
template <int KIND> __device__ __forceinline__ float any_f32(const void* p, int i) {  // 0 bf16, 1 fp16, 2 fp32
  if (KIND == 2) return ((const float*)p)[i];
  const u32 b = ((const unsigned short*)p)[i];
  return KIND == 1 ? h2f(b) : __uint_as_float(b << 16);
}
#if W_HALF
#define MMA_T "f16"
#else
#define MMA_T "bf16"
#endif
__device__ __forceinline__ u32 pack2(float lo, float hi) {  // two 16-bit values (the weights' type), `lo` in bits 0-15
  u32 r;
#if W_HALF
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}
__device__ __forceinline__ float lo16(u32 w) { return W_HALF ? h2f(w & 0xffffu) : __uint_as_float(w << 16); }
__device__ __forceinline__ float hi16(u32 w) { return W_HALF ? h2f(w >> 16) : __uint_as_float(w & 0xffff0000u); }
// x = hi + mid + lo, each 16-bit: three MMA columns carry ~fp32 precision of each activation.
__device__ __forceinline__ void split3(float x0, float x1, u32& hi, u32& mid, u32& lo) {
  hi = pack2(x0, x1);
  x0 -= lo16(hi); x1 -= hi16(hi);
  mid = pack2(x0, x1);
  lo = pack2(x0 - lo16(mid), x1 - hi16(mid));
}
__device__ __forceinline__ void ldsm4(u32 addr, u32* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// d[16x8] += a[16x16] (row) * b[16x8] (col), fp32 accumulate
__device__ __forceinline__ void mma(float* d, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA_T "." MMA_T ".f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ int unit_start(const Phase& ph, int b) {
  const long long u = ph.units + (long long)ph.late * ph.deficit;  // as if every CTA took a full share
  return (int)((long long)b * u / gridDim.x) - ph.deficit * max(0, b - ((int)gridDim.x - ph.late));
}
__device__ __forceinline__ void unit_range(const Phase& ph, int& u0, int& nu) {
  u0 = unit_start(ph, blockIdx.x);
  nu = unit_start(ph, blockIdx.x + 1) - u0;
}

// All CTAs done with the previous phase (and its outputs visible) before any goes on.
__device__ __forceinline__ void grid_barrier(u32* count, u32 target) {
  if (NO_BARRIER) return;
  consumers_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    u32 v;
    do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory"); } while (v < target);
  }
  consumers_sync();
}

// A consumer phase's start: the previous kernel done (PDL; then release the next one unless EARLY did at
// the CTA's start), or for a later phase of a chain every CTA done with the previous phase.
__device__ __forceinline__ void phase_wait(u32* sync, u32 target) {
  if (target == 0) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
#if !EARLY
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  } else {
    grid_barrier(sync, target);
  }
}
// The RMSNorm scale from each consumer thread's partial sum of squares (1 without a norm); every consumer
// thread is past its staging afterwards (consumers_sync).
template <int NORM_KIND> __device__ __forceinline__ float block_rstd(float ssq, float* red, int K, float eps) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (NORM_KIND >= 0) {
    for (int o = 16; o > 0; o >>= 1) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
    if (lane == 0) red[warp] = ssq;
  }
  consumers_sync();
  if (NORM_KIND < 0) return 1.f;
  ssq = 0.f;
  for (int i = 0; i < NWARP; ++i) ssq += red[i];
  return rsqrtf(ssq / K + eps);
}

// Producer (one thread): copy this CTA's rows of phase `ph` into the ring, slot by slot: MT rows x KC
// columns per slot, row tiles in order, the K chunks of a tile one after the other.
template <int MODE, int KC>
__device__ __forceinline__ void produce(const Phase& ph, int& s, unsigned char* ring, u64* full, u64* empty) {
  int u0, nu;
  unit_range(ph, u0, nu);
  const int nr = MODE == 2 ? 2 * nu : nu, K = ph.K;
  for (int g = 0; g < nr; g += MT) {
    const int rows = min(MT, nr - g);
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS;
      if (s >= NS) mbar_wait(smem_u32(&empty[buf]), ((s / NS) - 1) & 1);
      const u32 bytes = (u32)min(KC, K - k0) * 2u, fb = smem_u32(&full[buf]);
      mbar_expect_tx(fb, rows * bytes);
      for (int r = 0; r < rows; ++r) {
        const int lr = g + r;
        const long long row = MODE == 2 ? (lr < nu ? u0 + lr : ph.units + u0 + lr - nu) : u0 + lr;
        bulk_copy(smem_u32(ring + (size_t)buf * STAGE + (size_t)r * ROWB), ph.w + (row * K + k0) * 2, bytes, fb);
      }
    }
  }
}

// Producer, after its copies: this CTA's share of the l2_prefetch spans, in bulk prefetches of at most 32 KB
// (no completion to wait for; the lines just arrive in L2). `last`: the full barrier of its last slot when the
// ring held the CTA's whole share (no slot reused), so the prefetches never queue before its own weights
// (3B step at ctx 512: 1837.7 -> 1832.0 us, kernels/PERF.md thirteenth session).
__device__ __forceinline__ void l2_prefetch(const Params& prm, u64* last) {
  if (prm.pf_bytes[0] == 0 && prm.pf_bytes[1] == 0) return;
  if (last != nullptr) mbar_wait(smem_u32(last), 0);
  for (int j = 0; j < 2; ++j) {
    const unsigned long long n = prm.pf_bytes[j], share = ((n + gridDim.x - 1) / gridDim.x + 15) & ~15ull;
    const unsigned long long end = min(n, share * (blockIdx.x + 1));
    for (unsigned long long a = share * blockIdx.x; a < end; a += 32768) {
      const u32 bytes = (u32)min(32768ull, end - a);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(prm.pf[j] + a), "r"(bytes) : "memory");
    }
  }
}

// DYN (one-op gate/up launches, `tickets`): CTAs take tiles of 8 gate rows + the 8 matching up rows from a
// global ticket counter instead of a fixed range, so CTAs that stream faster (or start earlier) take more.
// slot_tile[buf]: the tile in ring slot buf (-1: no more); tiles_s: the tiles this CTA took, in order.
__shared__ int slot_tile[DYN ? NS : 1], tiles_s[DYN ? DYN_CAP : 1];

// Producer of a DYN launch: the first tickets in one batch (the ring's prefill), then one at a time, each
// drawn a tile ahead (its latency hides behind the copies); at most DYN_CAP tiles. Then a slot marked -1;
// the last CTA done drawing resets the counters (tickets[0]: next tile, tickets[1]: CTAs done).
template <int KC>
__device__ __forceinline__ void produce_dyn(const Phase& ph, int& s, unsigned char* ring, u64* full, u64* empty,
                                            u32* tickets) {
  const int K = ph.K, ntiles = ph.units / 8, nk = (K + KC - 1) / KC;
  const int batch = max(1, min(NS / nk, DYN_CAP));
  int t = (int)atomicAdd(tickets, (u32)batch), left = batch - 1, next = 0;
  for (int lt = 0; t < ntiles; ++lt) {
    const bool more = lt + 1 < DYN_CAP;
    if (left == 0 && more) next = (int)atomicAdd(tickets, 1u);
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS;
      if (s >= NS) mbar_wait(smem_u32(&empty[buf]), ((s / NS) - 1) & 1);
      slot_tile[buf] = t;  // published by the arrive below (release), read after the consumers' wait
      const u32 fb = smem_u32(&full[buf]);
#if TMAP  // two tensor copies: the 8 gate rows, then the 8 up rows, each [KC / 64 chunks][8 rows][128 B]
      mbar_expect_tx(fb, MT * KC * 2);  // whole boxes (columns past K are zero-filled)
      for (int h = 0; h < 2; ++h)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3, %4}], [%5];"
                     :: "r"(smem_u32(ring + (size_t)buf * STAGE + h * (KC / 64) * 1024)), "l"(ph.tmap), "r"(0),
                        "r"(h * ph.units + 8 * t), "r"(k0 / 64), "r"(fb) : "memory");
#else
      const u32 bytes = (u32)min(KC, K - k0) * 2u;
      mbar_expect_tx(fb, MT * bytes);
      for (int r = 0; r < MT; ++r) {
        const long long row = (r < 8 ? 0 : ph.units) + 8LL * t + (r & 7);
        bulk_copy(smem_u32(ring + (size_t)buf * STAGE + (size_t)r * ROWB), ph.w + (row * K + k0) * 2, bytes, fb);
      }
#endif
    }
    if (!more) break;
    if (left > 0) { ++t; --left; } else { t = next; }
  }
  const int buf = s % NS;
  if (s >= NS) mbar_wait(smem_u32(&empty[buf]), ((s / NS) - 1) & 1);
  slot_tile[buf] = -1;
  mbar_arrive(smem_u32(&full[buf]));
  ++s;
  if (atomicAdd(tickets + 1, 1u) == gridDim.x - 1) { tickets[0] = 0; tickets[1] = 0; }
}

// Activation elements k..k+3 (k % 4 == 0), times the norm weights n, into the MMA B-fragment layout
// (XB u32 per 16-column step): lanes 0-3 hold the 16-bit high parts (MMA column 0), lanes 4-7 the
// middle parts (column 1), lanes 8-11 the rest (column 2), lane l as {x[2q], x[2q+1]},
// {x[2q+8], x[2q+9]} with q = l % 4. Returns the elements' sum of squares (for the RMSNorm).
#define XB 24
__device__ __forceinline__ float stage4(u32* xb, int k, float4 v, float4 n) {
  const float ssq = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  v.x *= n.x; v.y *= n.y; v.z *= n.z; v.w *= n.w;
  const int kk = k & 15, q = (kk & 7) >> 1, reg = kk >> 3;
  u32 h01, m01, l01, h23, m23, l23;
  split3(v.x, v.y, h01, m01, l01);
  split3(v.z, v.w, h23, m23, l23);
  u32* p = xb + (k >> 4) * XB + reg;
  p[q * 2] = h01; p[(q + 1) * 2] = h23; p[(4 + q) * 2] = m01; p[(5 + q) * 2] = m23;
  p[(8 + q) * 2] = l01; p[(9 + q) * 2] = l23;
  return ssq;
}
template <int NORM_KIND> __device__ __forceinline__ float4 norm4(const void* nw, int k, int K) {
  float4 n = make_float4(1.f, 1.f, 1.f, 1.f);
  if (NORM_KIND >= 0 && k < K) {
    n.x = any_f32<NORM_KIND>(nw, k); n.y = any_f32<NORM_KIND>(nw, k + 1);
    n.z = any_f32<NORM_KIND>(nw, k + 2); n.w = any_f32<NORM_KIND>(nw, k + 3);
  }
  return n;
}

// Consumers (8 warps) on tensor cores: per slot, warp w takes KS = KC / 128 steps of 16 columns
// (ldmatrix of the weights, mma.sync m16n8k16 against the activation's hi / mid / lo fragments), keeps
// the tile's partial sums in registers over its K chunks, then writes them to acc[row * NWARP + w];
// the epilogue adds the 8 partials of each row.
//   MODE 0: out[u] = rstd * (W[u] . x*norm_w) + bias[u]        (rstd = 1 without a norm)
//   MODE 1: out[u] += W[u] . act                                (out: the residual stream)
//   MODE 2: out[u] = silu(rstd * W[u] . n) * (rstd * W[units + u] . n), n = x*norm_w
template <int MODE, int KC, int NORM_KIND, int BIAS_KIND>
__device__ __forceinline__ void consume(const Phase& ph, int& s, const unsigned char* ring, u64* full, u64* empty,
                                        float* acc, u32* xb, float* red, float eps, int phase, u32* sync, u32 target,
                                        unsigned long long* trace, int& tn, float* hs = nullptr) {
  constexpr int KS = KC / (16 * NWARP), NPRE = 2;
  constexpr bool DM = DYN && MODE == 2;  // tiles from the ticket counter (produce_dyn)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int u0, nu;
  unit_range(ph, u0, nu);
  const int nr = DM ? DYN_CAP * MT : MODE == 2 ? 2 * nu : nu, K = ph.K;
  // What does not depend on the previous phase is loaded before waiting for it: norm weights, bias.
  float4 nwp[NPRE];
#pragma unroll
  for (int i = 0; i < NPRE; ++i) nwp[i] = norm4<NORM_KIND>(ph.norm_w, (tid + i * NCONSUMER) * 4, K);
  const float bias0 = BIAS_KIND >= 0 && tid < nu ? any_f32<BIAS_KIND>(ph.bias, u0 + tid) : 0.f;
  phase_wait(sync, target);
  STAMP(100 * phase + 0, 0.f);
  // The residual rows (read now, beside the activation) and the activation, once per CTA, into shared
  // memory as MMA fragments.
  const float res0 = MODE == 1 && tid < nu ? __ldcg(ph.out + u0 + tid) : 0.f;
  float ssq = 0.f;
#pragma unroll
  for (int i = 0; i < NPRE; ++i) {
    const int k = (tid + i * NCONSUMER) * 4;
    if (k < K) ssq += stage4(xb, k, __ldcg((const float4*)(ph.act + k)), nwp[i]);
  }
  for (int k = (tid + NPRE * NCONSUMER) * 4; k < K; k += NCONSUMER * 4)
    ssq += stage4(xb, k, __ldcg((const float4*)(ph.act + k)), norm4<NORM_KIND>(ph.norm_w, k, K));
  const float rstd = block_rstd<NORM_KIND>(ssq, red, K, eps);
  if (hs != nullptr && tid == 0) {  // MLP: this CTA has read x; it may be updated once every CTA has
    __threadfence();
    atomicAdd(sync, 1u);
  }
  STAMP(100 * phase + 1, rstd);
  // ldmatrix.x4 addresses: lane l gives row l % 16, columns + 8 * (l / 16), of this warp's 16-column steps
  const u32 aoff = (lane & 15) * ROWB + (lane >> 4) * 16 + warp * KS * 32;
  int nl = 0;  // DM: tiles taken
  for (int g = 0; DM || g < nr; g += MT) {
    if (DM) {  // the next slot's tile, or the end
      mbar_wait(smem_u32(&full[s % NS]), (s / NS) & 1);
      const int t = slot_tile[s % NS];
      if (t < 0) { ++s; break; }
      if (tid == 0) tiles_s[nl] = t;
      g = nl++ * MT;
    }
    float d[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};  // two accumulators: shorter MMA chains
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS;
      mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
      STAMP(100 * phase + 3, 0.f);
      const u32 sbase = smem_u32(ring + (size_t)buf * STAGE), abase = sbase + aoff;
      u32 a[KS][4];
      uint2 b[KS];
#pragma unroll
      for (int j = 0; j < KS; ++j) {  // all loads first, then the MMAs
        const int col = k0 + (warp * KS + j) * 16;
        b[j] = make_uint2(0u, 0u);
        if (!NO_COMPUTE && col < K) {  // warp-uniform
#if TMAP  // row r of the tile: 8-row box r / 8, row r % 8 of each 1 KB chunk, 16-byte units swizzled by it
          const int c16 = warp * KS + j, u = ((c16 & 3) << 1) | (lane >> 4), rr = lane & 7;
          ldsm4(sbase + ((lane >> 3) & 1) * (KC / 64) * 1024 + (c16 >> 2) * 1024 + rr * 128 + ((u ^ rr) << 4), a[j]);
#else
          ldsm4(abase + j * 32, a[j]);
#endif
          if (lane < 12) b[j] = *(const uint2*)(xb + (col >> 4) * XB + lane * 2);
        }
      }
#pragma unroll
      for (int j = 0; j < KS; ++j)
        if (!NO_COMPUTE && k0 + (warp * KS + j) * 16 < K) mma(d + (j & 1) * 4, a[j], b[j].x, b[j].y);
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
      STAMP(100 * phase + 4, d[0]);
    }
    // lane 4i holds MMA columns 0-1 (hi, mid) of rows g + i and g + i + 8, lane 4i + 1 column 2 (lo)
    const float c0 = d[0] + d[4], c2 = d[2] + d[6];
    const float t0 = __shfl_down_sync(0xffffffffu, c0, 1), t2 = __shfl_down_sync(0xffffffffu, c2, 1);
    if ((lane & 3) == 0) {
      const int r = g + (lane >> 2);
      if (r < nr) acc[r * NWARP + warp] = (d[0] + d[1]) + (d[4] + d[5]) + t0;
      if (r + 8 < nr) acc[(r + 8) * NWARP + warp] = (d[2] + d[3]) + (d[6] + d[7]) + t2;
    }
  }
  consumers_sync();
  if (DM) {  // tile lt's rows: 8 gate rows (acc rows 16 lt + i), then the 8 matching up rows
    for (int i = tid; i < nl * 8; i += NCONSUMER) {
      const int r = (i >> 3) * MT + (i & 7);
      const float4 p = *(const float4*)(acc + r * NWARP), q = *(const float4*)(acc + r * NWARP + 4);
      const float4 e = *(const float4*)(acc + (r + 8) * NWARP), f = *(const float4*)(acc + (r + 8) * NWARP + 4);
      const float gt = (((p.x + p.y) + (p.z + p.w)) + ((q.x + q.y) + (q.z + q.w))) * rstd;
      const float u = ((e.x + e.y) + (e.z + e.w)) + ((f.x + f.y) + (f.z + f.w));
      ph.out[tiles_s[i >> 3] * 8 + (i & 7)] = gt / (1.f + __expf(-gt)) * (u * rstd);
    }
    STAMP(100 * phase + 5, 0.f);
    return;
  }
  for (int r = tid; r < nu; r += NCONSUMER) {
    const float4 p = *(const float4*)(acc + r * NWARP), q = *(const float4*)(acc + r * NWARP + 4);
    const float y = ((p.x + p.y) + (p.z + p.w)) + ((q.x + q.y) + (q.z + q.w));
    if (MODE == 0) {
      float o = y * rstd;
      if (BIAS_KIND >= 0) o += r == tid ? bias0 : any_f32<BIAS_KIND>(ph.bias, u0 + r);
      ph.out[u0 + r] = o;
    } else if (MODE == 1) {
      ph.out[u0 + r] = (r == tid ? res0 : __ldcg(ph.out + u0 + r)) + y;
    } else {
      const float4 e = *(const float4*)(acc + (nu + r) * NWARP), f = *(const float4*)(acc + (nu + r) * NWARP + 4);
      const float u = ((e.x + e.y) + (e.z + e.w)) + ((f.x + f.y) + (f.z + f.w));
      const float gt = y * rstd;
      const float hv = gt / (1.f + __expf(-gt)) * (u * rstd);
      if (hs != nullptr) hs[r] = hv; else ph.out[u0 + r] = hv;
    }
  }
  STAMP(100 * phase + 5, 0.f);
}

// Modes 0 and 1 (QKV, o_proj, a chain's down: latency-bound, a few rows per CTA) on CUDA cores: the
// activation is staged once as fp32 (times the norm weights) in xs; warp w owns rows 2w and 2w + 1 of each
// 16-row tile, lane l the 8-column chunks l, l + 32, ... of each slot (16-byte shared loads, conflict-free),
// fp32 FMAs in two chains per row, the warp's sums reduced by shuffles, lanes 0 and 1 write the two rows.
// (consume()'s tensor-core path, with the activation split into MMA fragments, chained MMAs and a
// cross-warp reduction, made the 1.5B step 13 us and the Qwen3 / 3B steps 5 us slower; kernels/PERF.md.)
__device__ __forceinline__ float dot4(u32 wa, u32 wb, float4 x) {
  return fmaf(hi16(wb), x.w, fmaf(lo16(wb), x.z, fmaf(hi16(wa), x.y, lo16(wa) * x.x)));
}
__device__ __forceinline__ float stage_f32(float* xs, int k, float4 v, float4 n) {
  const float ssq = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  *(float4*)(xs + k) = make_float4(v.x * n.x, v.y * n.y, v.z * n.z, v.w * n.w);
  return ssq;
}
template <int MODE, int KC, int NORM_KIND, int BIAS_KIND>
__device__ __forceinline__ void consume_cc(const Phase& ph, int& s, const unsigned char* ring, u64* full, u64* empty,
                                           float* xs, float* red, float eps, int phase, u32* sync, u32 target,
                                           unsigned long long* trace, int& tn) {
  constexpr int NPRE = 2;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, K = ph.K;
  int u0, nu;
  unit_range(ph, u0, nu);
  float4 nwp[NPRE];  // what does not depend on the previous phase first: norm weights, bias
#pragma unroll
  for (int i = 0; i < NPRE; ++i) nwp[i] = norm4<NORM_KIND>(ph.norm_w, (tid + i * NCONSUMER) * 4, K);
  const int my = 2 * warp + (lane & 1);  // the tile row lanes 0 and 1 write
  const float bias0 = BIAS_KIND >= 0 && lane < 2 && my < nu ? any_f32<BIAS_KIND>(ph.bias, u0 + my) : 0.f;
  phase_wait(sync, target);
  STAMP(100 * phase + 0, 0.f);
  const float res0 = MODE == 1 && lane < 2 && my < nu ? __ldcg(ph.out + u0 + my) : 0.f;  // beside the activation
  float ssq = 0.f;
#pragma unroll
  for (int i = 0; i < NPRE; ++i) {
    const int k = (tid + i * NCONSUMER) * 4;
    if (k < K) ssq += stage_f32(xs, k, __ldcg((const float4*)(ph.act + k)), nwp[i]);
  }
#pragma unroll 1  // (K > 2048 only; unrolled it takes registers the rest does not need)
  for (int k = (tid + NPRE * NCONSUMER) * 4; k < K; k += NCONSUMER * 4)
    ssq += stage_f32(xs, k, __ldcg((const float4*)(ph.act + k)), norm4<NORM_KIND>(ph.norm_w, k, K));
  const float rstd = block_rstd<NORM_KIND>(ssq, red, K, eps);
  STAMP(100 * phase + 1, rstd);
  for (int g = 0; g < nu; g += MT) {
    float a0 = 0.f, b0 = 0.f, a1 = 0.f, b1 = 0.f;  // rows 2w and 2w + 1, two chains each
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS, nc = min(KC, K - k0);
      mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
      STAMP(100 * phase + 3, 0.f);
      const unsigned char* row = ring + (size_t)buf * STAGE + (size_t)(2 * warp) * ROWB;
#pragma unroll
      for (int j = 0; j < (KC + 255) / 256; ++j) {
        const int c = lane * 8 + j * 256;
        if (!NO_COMPUTE && c < nc) {
          const float4 x0 = *(const float4*)(xs + k0 + c), x1 = *(const float4*)(xs + k0 + c + 4);
          const uint4 w0 = *(const uint4*)(row + c * 2), w1 = *(const uint4*)(row + ROWB + c * 2);
          a0 += dot4(w0.x, w0.y, x0); b0 += dot4(w0.z, w0.w, x1);
          a1 += dot4(w1.x, w1.y, x0); b1 += dot4(w1.z, w1.w, x1);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
      STAMP(100 * phase + 4, a0);
    }
    float y0 = a0 + b0, y1 = a1 + b1;
    for (int o = 16; o > 0; o >>= 1) {
      y0 += __shfl_xor_sync(0xffffffffu, y0, o);
      y1 += __shfl_xor_sync(0xffffffffu, y1, o);
    }
    const int lr = g + my;
    if (lane < 2 && lr < nu) {
      const float y = lane ? y1 : y0;
      if (MODE == 0) {
        float o = y * rstd;
        if (BIAS_KIND >= 0) o += g == 0 ? bias0 : any_f32<BIAS_KIND>(ph.bias, u0 + lr);
        ph.out[u0 + lr] = o;
      } else {
        ph.out[u0 + lr] = (g == 0 ? res0 : __ldcg(ph.out + u0 + lr)) + y;
      }
    }
  }
  STAMP(100 * phase + 5, 0.f);
}

// MLP, second phase (MODE 3): the CTA's slice of down_proj as an axpy over its own intermediate units
// h[u] (shared memory, from the gate/up phase): part[n] = sum_u h[u] * Wt[u0 + u][n], Wt = W_down^T
// ([I, H] rows in the ring, K = H <= SLOT_KC: one slot per 16-row tile). Thread t owns the column pairs
// t, t + 256, ... (conflict-free shared loads); part (H floats) is left in shared memory for mlp_tail.
template <int KC>
__device__ __forceinline__ void consume_down_t(const Phase& ph, int& s, const unsigned char* ring, u64* full,
                                               u64* empty, const float* hs, float* part) {
  constexpr int NW = (KC / 2 + NCONSUMER - 1) / NCONSUMER;
  const int tid = threadIdx.x, lane = tid & 31, KW = ph.K / 2;
  int u0, nu;
  unit_range(ph, u0, nu);
  float a0[NW], a1[NW];
#pragma unroll
  for (int i = 0; i < NW; ++i) { a0[i] = 0.f; a1[i] = 0.f; }
  for (int g = 0; g < nu; g += MT, ++s) {
    const int buf = s % NS, rows = min(MT, nu - g);
    mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
    const unsigned char* slot = ring + (size_t)buf * STAGE;
    for (int r = 0; r < rows; ++r) {
      const float hv = hs[g + r];
      const u32* row = (const u32*)(slot + (size_t)r * ROWB);
#pragma unroll
      for (int i = 0; i < NW; ++i) {
        const int w = tid + i * NCONSUMER;
        if (!NO_COMPUTE && w < KW) { const u32 v = row[w]; a0[i] += hv * lo16(v); a1[i] += hv * hi16(v); }
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
  }
#pragma unroll
  for (int i = 0; i < NW; ++i) {
    const int w = tid + i * NCONSUMER;
    if (w < KW) { part[2 * w] = a0[i]; part[2 * w + 1] = a1[i]; }
  }
}

// MLP, last step (all threads of the CTA): the cluster adds its CTAs' partials through distributed shared
// memory, each CTA a 1/CLUSTER slice of the columns, and adds that slice to the residual x with atomics
// (once every CTA of the grid has read x: sync[0] counts them); the last CTA out resets the counters.
// Every CTA of the grid must be resident (the Python side sizes the grid so).
__device__ __forceinline__ void mlp_tail(const Params& prm, const float* part, bool consumer) {
  if (CLUSTER > 1) cluster_sync();
  if (consumer) {
    const Phase& ph = prm.p[1];
    const int tid = threadIdx.x;
    if (tid == 0) {
      u32 v;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(prm.sync) : "memory");
      } while (v < gridDim.x);
    }
    consumers_sync();
    if (CLUSTER == 1) {  // the whole partial, 4 columns per atomic (K % 16 == 0)
      for (int c = tid * 4; c < ph.K; c += NCONSUMER * 4) {
        const float4 v = *(const float4*)(part + c);
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};"
                     :: "l"(ph.out + c), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
      }
    } else {
      const int per = (ph.K + CLUSTER - 1) / CLUSTER, c0 = (int)cluster_rank() * per, c1 = min(ph.K, c0 + per);
      for (int c = c0 + tid; c < c1; c += NCONSUMER) {
        float v = 0.f;
#pragma unroll
        for (int p = 0; p < CLUSTER; ++p) v += ld_peer(smem_u32(part + c), p);
        asm volatile("red.global.add.f32 [%0], %1;" :: "l"(ph.out + c), "f"(v) : "memory");
      }
    }
  }
  if (CLUSTER > 1) cluster_sync();  // the peers have read this CTA's partial
  if (consumer && threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(prm.sync + 1, 1u) == gridDim.x - 1) { prm.sync[0] = 0; prm.sync[1] = 0; }
  }
}

extern "C" __global__ void __launch_bounds__(NCONSUMER + 32, 1) KERNEL_NAME(const Params prm) {
  __shared__ __align__(8) u64 full[NS], empty[NS];
  __shared__ float red[NWARP];
  extern __shared__ __align__(128) unsigned char ring_raw[];
  unsigned char* ring = ring_raw + (TMAP ? (1024u - (smem_u32(ring_raw) & 1023u)) & 1023u : 0u);  // swizzle: 1 KB
  float* acc = (float*)(ring + (size_t)NS * STAGE);  // [SUMS] partial row sums, NWARP per row
  u32* xb = (u32*)(acc + SUMS);                      // [max K * XB / 16] the current activation, as MMA fragments
  float* hs = (float*)(xb + XWORDS);                 // MLP: [units per CTA] h = silu(gate) * up
  float* part = hs + HS;                             // MLP: [H] this CTA's down_proj partial
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int i = 0; i < NS; ++i) { mbar_init(smem_u32(&full[i]), 1); mbar_init(smem_u32(&empty[i]), NWARP); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
#if EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");  // the next kernel may launch at once
#endif
  int s = 0, tn = 0;
  unsigned long long* trace = prm.trace;
  if (tid == 0) STAMP(900, 0.f);
#if TRACE == 2
  if (tid == 0) { u32 sm_; asm("mov.u32 %0, %%smid;" : "=r"(sm_)); trace[16 * blockIdx.x + 7] = sm_; }
#endif
  if (tid >= NCONSUMER) {  // producer warp: weights do not depend on the previous kernel, so no PDL wait
    if (tid == NCONSUMER) {
      PRODUCE STAMP(901, 0.f);
      l2_prefetch(prm, s > 0 && s <= NS ? &full[(s - 1) % NS] : nullptr);
    }
#if MLP
    __syncwarp();
    mlp_tail(prm, part, false);
#endif
    return;
  }
  CONSUME
#if MLP
  mlp_tail(prm, part, true);
#elif NPH > 1
  consumers_sync();
  if (tid == 0) {  // the last CTA out resets the barrier counters for the next launch
    __threadfence();
    if (atomicAdd(prm.sync + 1, 1u) == gridDim.x - 1) { prm.sync[0] = 0; prm.sync[1] = 0; }
  }
#endif
}
"""


class _Phase(ctypes.Structure):
    _fields_ = [("w", ctypes.c_void_p), ("act", ctypes.c_void_p), ("norm_w", ctypes.c_void_p),
                ("bias", ctypes.c_void_p), ("out", ctypes.c_void_p), ("tmap", ctypes.c_void_p),
                ("units", ctypes.c_int), ("K", ctypes.c_int), ("late", ctypes.c_int), ("deficit", ctypes.c_int)]


class _Params(ctypes.Structure):
    _fields_ = [("p", _Phase * MAX_PHASES), ("sync", ctypes.c_void_p), ("trace", ctypes.c_void_p),
                ("eps", ctypes.c_float), ("pad", ctypes.c_int), ("pf", ctypes.c_void_p * 2),
                ("pf_bytes", ctypes.c_uint64 * 2)]


@dataclass(frozen=True)
class Op:
    """One GEMV of a chain. mode "rmsnorm_gemv": out = W @ (rmsnorm(act) * norm_w) + bias (no norm
    without norm_w); "residual": out += W @ act; "gate_up": out = silu(Wg @ n) * (Wu @ n)."""
    mode: str
    w: torch.Tensor
    act: torch.Tensor
    out: torch.Tensor
    norm_w: torch.Tensor | None = None
    bias: torch.Tensor | None = None

    @property
    def units(self) -> int:
        return self.w.shape[0] // MODES[self.mode][2]


def chunk(k: int, cap: int = MAX_KC) -> int:
    """Columns per ring slot for rows of k weights: a multiple of 128 (16 per consumer warp), at most
    `cap`; rows longer than that take several slots of about equal width (no narrow tail: a bulk
    copy's cost grows with their number more than with their size)."""
    n = -(-k // cap)
    return -(-(-(-k // n)) // 128) * 128


def plan(ops: list[Op] | tuple, sms: int, budget: int | None = None, cluster: int = 1, skew: tuple = (0, 0),
         dynamic: bool = False, tmap: bool = False) -> dict:
    """Grid, ring stages and dynamic shared memory (bytes, at most `budget`, default SMEM_BUDGET) of
    a launch running `ops` in order. ops: Op or (mode, units, K) tuples. The grid is a multiple of
    `cluster`. skew: (late, deficit), see stream_chain. dynamic: one gate/up op whose CTAs take 8-unit
    tiles from a ticket counter, at most "tiles" each (twice the mean); tmap: and copied as tensor maps
    (slots without row padding, 1 KB aligned: "pad" 0, 1 KB more shared memory)."""
    budget = budget or SMEM_BUDGET
    shapes = [(o.mode, o.units, o.w.shape[1]) if isinstance(o, Op) else o for o in ops]
    grid = max(1, min(sms, min(u for _, u, _ in shapes)))  # one CTA per SM
    tiles = 0  # dynamic: tiles per CTA at most
    if dynamic:
        assert len(shapes) == 1 and shapes[0][0] == "gate_up" and shapes[0][1] % 8 == 0 and skew == (0, 0), \
            "dynamic tiles: one gate_up op, units a multiple of 8, no skew"
        grid = min(grid, shapes[0][1] // 8)
        tiles = min(64, 2 * -(-shapes[0][1] // 8 // grid))
    grid = max(cluster, grid // cluster * cluster)
    late, deficit = skew
    assert 0 <= late <= grid and deficit >= 0 and all(u + late * deficit >= grid * deficit for _, u, _ in shapes), \
        "skew leaves a late CTA without units"
    sums = max(-(-MODES[m][2] * -(-(u + late * deficit) // grid) // MT) * MT * NWARP
               for m, u, _ in shapes) if not tiles else tiles * MT * NWARP  # partial sums, floats
    # the activation as MMA fragments (consume_cc needs only k words, but the smaller footprint changes which
    # CTAs share an SM: the 1.5B step 1002 -> 1050 us, kernels/PERF.md twelfth session)
    xwords = max(k for _, _, k in shapes) * 3 // 2
    hs = 0
    if any(m == "down_t" for m, _, _ in shapes):  # stream_mlp: h and the down_proj partial
        per_cta = -(-shapes[0][1] // grid)
        hs = -(-per_cta // 4) * 4  # units per CTA, rounded up to 4
    assert not tmap or (dynamic and shapes[0][2] % 64 == 0), "tensor-map copies: dynamic tiles, K % 64 == 0"
    pad = 0 if tmap else ROW_PAD
    fixed = 4 * (sums + xwords + (hs + shapes[-1][2] if hs else 0)) + (1024 if tmap else 0)
    cap = MAX_KC  # the widest slots (fewest, biggest bulk copies) of which two fit the budget
    while cap > 128 and fixed + 2 * MT * (max(chunk(k, cap) for _, _, k in shapes) * 2 + pad) > budget:
        cap -= 128
    kc = max(chunk(k, cap) for _, _, k in shapes)
    stage = MT * (kc * 2 + pad)  # bytes of a ring slot (48.25 KB for K = 1536)
    stages = max(2, min(8, (budget - fixed) // stage))
    return {"grid": grid, "stages": stages, "smem": stages * stage + fixed, "sums": sums, "kc": kc, "xwords": xwords,
            "hs": hs, "tiles": tiles, "pad": pad}


def supported(w: torch.Tensor) -> bool:
    """Whether these kernels take weight `w` ([rows, K]) on its device."""
    return (w.dim() == 2 and w.dtype in (torch.bfloat16, torch.float16) and w.is_contiguous()
            and w.shape[1] % 16 == 0 and w.data_ptr() % 16 == 0 and w.device.type == "cuda"
            and _cuda_rtc.available(w.device))


@lru_cache(maxsize=None)
def source(phases: tuple, w_half: bool, stages: int, sums: int, layout: tuple, cluster: int = 1,
           xwords: int = 0, hs: int = 0, early: bool = False, probe: tuple | None = None,
           cap: int = 0) -> tuple[str, str]:
    """(CUDA source, kernel name) for phases ((mode, norm_kind, bias_kind, K), ...), kinds -1 for none;
    probe: the values of PROBE_DEFINES (default: as they are now); cap > 0: dynamic tiles (plan)."""
    produce, consume = [], []
    mlp = any(mode == "down_t" for mode, *_ in phases)
    probe = dict(zip(PROBE_DEFINES, probe)) if probe is not None else PROBE_DEFINES
    for i, (mode, norm_kind, bias_kind, k) in enumerate(phases):
        m, kc = MODES[mode][0], chunk(k, layout[0])
        produce.append(f"produce_dyn<{kc}>(prm.p[{i}], s, ring, full, empty, prm.sync);" if cap else
                       f"produce<{m}, {kc}>(prm.p[{i}], s, ring, full, empty);")
        if mode == "down_t":
            consume.append(f"consumers_sync(); consume_down_t<{kc}>(prm.p[{i}], s, ring, full, empty, hs, part);")
        elif m < 2 and not probe["MMA_SMALL"]:
            consume.append(f"consume_cc<{m}, {kc}, {norm_kind}, {bias_kind}>(prm.p[{i}], s, ring, full, empty, "
                           f"(float*)xb, red, prm.eps, {i}, prm.sync, {i}u * gridDim.x, trace, tn);")
        else:
            consume.append(f"consume<{m}, {kc}, {norm_kind}, {bias_kind}>(prm.p[{i}], s, ring, full, empty, "
                           f"acc, xb, red, prm.eps, {i}, prm.sync, {i}u * gridDim.x, trace, tn"
                           f"{', hs' if mlp else ''});")
    name = MODES["down_t"][1] if mlp else MODES[phases[0][0]][1] if len(phases) == 1 else "stream_gemv_chain"
    defines = {**probe, "KERNEL_NAME": name, "W_HALF": int(w_half), "SLOT_KC": layout[0],
               "ROW_PAD": layout[1], "NS": stages, "SUMS": sums, "MAXP": MAX_PHASES, "NPH": len(phases),
               "MLP": int(mlp), "CLUSTER": cluster, "XWORDS": xwords, "HS": hs, "EARLY": int(early),
               "DYN": int(cap > 0), "DYN_CAP": cap, "TMAP": int(cap > 0 and layout[1] == 0),
               "PRODUCE": " ".join(produce), "CONSUME": " ".join(consume)}
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE, name


@lru_cache(maxsize=None)
def _kernel(device_index: int, phases: tuple, w_half: bool, stages: int, sums: int, smem: int,
            carveout: int | None, layout: tuple, probe: tuple = (), cluster: int = 1, xwords: int = 0, hs: int = 0,
            early: bool = False, cap: int = 0):
    src, name = source(phases, w_half, stages, sums, layout, cluster, xwords, hs, early, probe, cap)
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", ("--use_fast_math",))
    return _cuda_rtc.CudaKernel(cubin, name, torch.device("cuda", device_index), smem, cluster, carveout)


@lru_cache(maxsize=None)
def _sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _check(op: Op) -> None:
    n, k = op.w.shape
    assert op.mode in MODES, f"unknown mode {op.mode!r}"
    assert supported(op.w), "stream_gemv needs contiguous bf16/fp16 weights, K % 16 == 0, a Hopper GPU with NVRTC"
    assert n % MODES[op.mode][2] == 0, "gate_up must have an even number of rows"
    check_vec(op.act, k, "act")
    check_vec(op.out, op.units, "out")
    assert op.act.data_ptr() % 16 == 0, "the activation must be 16-byte aligned"
    assert op.act.device == op.out.device == op.w.device
    if op.mode == "residual":
        assert op.act.data_ptr() != op.out.data_ptr(), "a and x must be different buffers"
    for t, name, size in ((op.norm_w, "norm_w", k), (op.bias, "bias", op.units)):
        if t is not None:
            check_vec(t, size, name, tuple(_KIND))


def stream_chain(ops: list[Op], sync: torch.Tensor | None = None, eps: float = 1e-6, *, pdl: bool = False,
                 trace: torch.Tensor | None = None, budget: int | None = None, early: bool = False,
                 carveout: int | None = None, skew: tuple[int, int] = (0, 0), tickets: torch.Tensor | None = None,
                 tensor_map: bool = False, l2_prefetch: tuple[torch.Tensor, ...] = ()) -> None:
    """Run `ops` (1 to MAX_PHASES GEMVs, same weight dtype) in order in ONE launch: the weights of
    all of them stream through the shared-memory ring without a break; between two ops every CTA
    waits at a grid barrier (counters in `sync`, int32 [2] zeros, needed for more than one op; they
    are back at zero after the launch). budget: shared memory per CTA in bytes (default SMEM_BUDGET;
    less lets the CTAs share an SM with the neighbouring kernels'). early: release the next kernel (PDL) as
    soon as this one starts instead of after its wait. carveout: the kernel's preferred shared-memory
    carveout in percent (None: the driver's choice; 100 keeps SMs configured for the most shared memory,
    so that a large ring still fits beside the kernel before it: the runner's 1.5B gate/up). skew: (late,
    deficit): the last `late` CTAs (the scheduler starts CTAs in index order, so those that wait for a
    free SM are the last ones) take `deficit` fewer units each, the others more. tickets (one gate_up op
    with units % 8 == 0): int32 [2] zeros (back at zero after the launch); CTAs then take tiles of 8 units
    from this counter as they go instead of a fixed share (those that stream faster take more); launches
    sharing `tickets` must not overlap (between two of them, a kernel that waits for the first before it
    releases the next: the runner's down_proj). tensor_map (with tickets, K % 64 == 0): each slot's 8 gate
    and 8 up rows arrive as two tensor-map copies (kernels/PERF.md: faster than row copies at small slots).
    l2_prefetch: up to two contiguous tensors (16-byte aligned, sizes multiples of 16 bytes) whose bytes the
    CTAs prefetch into L2 after issuing their own copies, each CTA an even share: weights of the kernel after
    this one, fetched while HBM would idle (the runner's hidden-2048 o_proj: gate/up's first rows)."""
    assert 1 <= len(ops) <= MAX_PHASES, f"1 to {MAX_PHASES} ops per launch"
    for op in ops:
        _check(op)
    w_dtype = ops[0].w.dtype
    assert all(op.w.dtype == w_dtype for op in ops), "all weights of a chain must have one dtype"
    if len(ops) > 1:
        assert sync is not None and sync.dtype == torch.int32 and sync.numel() >= 2, "a chain needs sync counters"
    dev = ops[0].w.device.index if ops[0].w.device.index is not None else torch.cuda.current_device()
    if tickets is not None:
        assert tickets.dtype == torch.int32 and tickets.numel() >= 2 and tickets.device == ops[0].w.device, \
            "tickets must be int32 [2] zeros on the weights' device"
        assert sync is None, "a chain has no dynamic tiles"
        sync = tickets
    p = plan(ops, _sms(dev), budget, skew=skew, dynamic=tickets is not None, tmap=tensor_map)
    sig = tuple((op.mode, -1 if op.norm_w is None else _KIND[op.norm_w.dtype],
                 -1 if op.bias is None else _KIND[op.bias.dtype], op.w.shape[1]) for op in ops)
    kern = _kernel(dev, sig, w_dtype == torch.float16, p["stages"], p["sums"], p["smem"], carveout,
                   (p["kc"], p["pad"]), tuple(PROBE_DEFINES.values()), 1, p["xwords"], 0, early, p["tiles"])
    prm = _Params()
    for i, op in enumerate(ops):
        tmap = _tensor_map(op.w, p["kc"]).data_ptr() if tensor_map else 0
        prm.p[i] = _Phase(op.w.data_ptr(), op.act.data_ptr(), op.norm_w.data_ptr() if op.norm_w is not None else 0,
                          op.bias.data_ptr() if op.bias is not None else 0, op.out.data_ptr(), tmap, op.units,
                          op.w.shape[1], *skew)
    prm.sync = sync.data_ptr() if sync is not None else 0
    prm.trace = trace.data_ptr() if trace is not None else 0  # int64 [240] (TRACE 1), [16 * grid] (TRACE 2)
    prm.eps = eps
    assert len(l2_prefetch) <= 2, "at most two l2_prefetch spans"
    for j, t in enumerate(l2_prefetch):
        n = t.numel() * t.element_size()
        assert t.is_contiguous() and t.data_ptr() % 16 == 0 and n % 16 == 0 and t.device == ops[0].w.device, \
            "l2_prefetch spans: contiguous, on the weights' device, 16-byte aligned, sizes multiples of 16 bytes"
        prm.pf[j], prm.pf_bytes[j] = t.data_ptr(), n
    kern.launch((p["grid"], 1, 1), THREADS, [prm], pdl=pdl)


_TMAPS: dict = {}


def _tensor_map(w: torch.Tensor, kc: int, rows: int = 8) -> torch.Tensor:
    """w [R, K] (16-bit) as a CUtensorMap in device memory (kept per weight): the 3-D view (64 columns, R
    rows, K / 64 chunks) in boxes of (64, rows, kc / 64) with the 128-byte swizzle, so a copy lands as
    [chunk][rows][128 B], each row's 16-byte units XOR-ed by its row index % 8 (conflict-free ldmatrix)."""
    key = (w.data_ptr(), tuple(w.shape), w.dtype, kc, rows)
    if key not in _TMAPS:
        r, k = w.shape
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        raw = (ctypes.c_ubyte * 128)()
        dtype = 9 if w.dtype == torch.bfloat16 else 6  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 / FLOAT16
        # dims, byte strides of dims 1-2, box, element strides; no interleave, 128-byte swizzle, L2 promotion
        # of 128 B, out-of-bounds columns zero-filled
        res = _cuda_rtc._driver().cuTensorMapEncodeTiled(
            raw, dtype, 3, ctypes.c_void_p(w.data_ptr()), (u64 * 3)(64, r, k // 64), (u64 * 2)(k * 2, 128),
            (u32 * 3)(64, rows, kc // 64), (u32 * 3)(1, 1, 1), 0, 3, 2, 0)
        _cuda_rtc._check(res, "cuTensorMapEncodeTiled")
        _TMAPS[key] = torch.tensor(bytearray(raw), dtype=torch.uint8).to(w.device)
    return _TMAPS[key]


# The one-op launches; `launch`: stream_chain's keyword options (pdl, budget, early, carveout, trace).
def stream_rmsnorm_gemv(x, w, out, norm_w=None, eps: float = 1e-6, bias=None, **launch):
    """Same contract as kernels.rmsnorm_gemv.rmsnorm_gemv (reference: rmsnorm_gemv_ref)."""
    stream_chain([Op("rmsnorm_gemv", w, x, out, norm_w, bias)], eps=eps, **launch)
    return out


def stream_gemv_residual(a, w, x, **launch):
    """Same contract as kernels.gemv_residual.gemv_residual (reference: gemv_residual_ref)."""
    stream_chain([Op("residual", w, a, x)], **launch)
    return x


def stream_gate_up_silu(x, norm_w, eps: float, w_gate_up, out, **launch):
    """Same contract as kernels.gate_up_silu.rmsnorm_gate_up_silu (reference: rmsnorm_gate_up_silu_ref)."""
    stream_chain([Op("gate_up", w_gate_up, x, out, norm_w)], eps=eps, **launch)
    return out


def stream_mlp(x, norm_w, eps: float, w_gate_up, w_down_t, sync, *, pdl: bool = False, budget: int | None = None,
               cluster: int = MLP_CLUSTER):
    """The whole MLP in ONE launch: x += W_down @ (silu(Wg @ n) * (Wu @ n)), n = rmsnorm(x) * norm_w.
    w_gate_up: [2I, H] (gate rows, then up rows); w_down_t: W_down transposed, contiguous [I, H] (H <=
    MAX_KC). Each CTA streams the gate, up and down rows of its own intermediate units, keeps h in shared
    memory and adds its down_proj partial into x with its cluster (no grid barrier, no h round trip).
    sync: int32 [2] zeros (back at zero after the launch). The atomic adds make x's last bits depend on
    their order (~1e-7 relative). References: rmsnorm_gate_up_silu_ref + gemv_residual_ref."""
    i2, h = w_gate_up.shape
    assert i2 % 2 == 0 and tuple(w_down_t.shape) == (i2 // 2, h), "w_down_t must be [I, H] for w_gate_up [2I, H]"
    assert supported(w_gate_up) and supported(w_down_t) and w_down_t.dtype == w_gate_up.dtype, \
        "stream_mlp needs contiguous bf16/fp16 weights of one dtype, H % 16 == 0, a Hopper GPU with NVRTC"
    assert h <= MAX_KC, f"stream_mlp needs H <= {MAX_KC}"
    check_vec(x, h, "x")
    check_vec(norm_w, h, "norm_w", tuple(_KIND))
    assert x.data_ptr() % 16 == 0, "x must be 16-byte aligned"
    assert sync is not None and sync.dtype == torch.int32 and sync.numel() >= 2, "stream_mlp needs sync counters"
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
    ops, sig = [("gate_up", i2 // 2, h), ("down_t", i2 // 2, h)], (("gate_up", _KIND[norm_w.dtype], -1, h),
                                                                  ("down_t", -1, -1, h))
    sms = _sms(dev)
    while True:  # all CTAs must be resident at once: at most as many clusters as the GPU holds
        p = plan(ops, sms, budget, cluster)
        kern = _kernel(dev, sig, w_gate_up.dtype == torch.float16, p["stages"], p["sums"], p["smem"], None,
                       (p["kc"], ROW_PAD), tuple(PROBE_DEFINES.values()), cluster, p["xwords"], p["hs"])
        fit = kern.max_active_clusters(THREADS) * cluster if cluster > 1 else sms
        if p["grid"] <= fit:
            break
        sms = fit
    prm = _Params()
    prm.p[0] = _Phase(w_gate_up.data_ptr(), x.data_ptr(), norm_w.data_ptr(), 0, 0, 0, i2 // 2, h, 0, 0)
    prm.p[1] = _Phase(w_down_t.data_ptr(), 0, 0, 0, x.data_ptr(), 0, i2 // 2, h, 0, 0)
    prm.sync, prm.trace, prm.eps = sync.data_ptr(), 0, eps
    kern.launch((p["grid"], 1, 1), THREADS, [prm], pdl=pdl)
    return x
