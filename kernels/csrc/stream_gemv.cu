// Batch-1 GEMVs whose weights stream through a shared-memory ring (TMA bulk copies); launcher, contract and
// reference: kernels/stream_gemv.py, which prepends the #defines of a variant (W_HALF, SLOT_KC, NS, ...).
#include "common.cuh"
#define NWARP 8
#define NCONSUMER (NWARP * 32)
#define MT 16                       // rows per ring slot: one MMA M tile
#define ROWB (SLOT_KC * 2 + ROW_PAD) // bytes per row in a slot
#ifndef NTOK
#define NTOK 1
#endif
// ACT_RING (a residual GEMV, "residual_ring"): each slot holds, after its rows, the tokens' activation chunk for
// its columns (NTOK x SLOT_KC fp32), copied by the producer beside the weights, so the activation is never staged
// whole (any K, any tokens) and the consumers start on the first slot.
#ifndef ACT_RING
#define ACT_RING 0
#endif
#define ACTB (ACT_RING ? NTOK * SLOT_KC * 4 : 0)  // bytes of a slot's activation chunk
#ifndef RING_RW
#define RING_RW 4  // ACT_RING: rows a consumer warp takes of a tile (4 x RING_RW >= a CTA's rows a tile)
#endif
#define STAGE (MT * ROWB + ACTB)    // bytes of one ring slot

struct Phase {  // the launch's GEMV (mirrored by _Phase in Python)
  const unsigned char* w; const float* act; const void* norm_w; const void* bias; float* out;
  int units, K, late, deficit;  // the last `late` CTAs take `deficit` fewer units each (they start later)
};
// pf / pf_bytes: up to two spans of global memory that the CTAs' producers prefetch into L2 after their own
// copies (an even share each), for the kernel after this one (stream_op's l2_prefetch)
// f: a tensor-parallel reduction fused into the launch (FUSE 1: push, FUSE 2: reduce-in; see below).
#ifndef FUSE
#define FUSE 0
#endif
#ifndef WORLD
#define WORLD 1  // FUSE 2: the ranks whose slots are summed (compiled in: their loads unrolled)
#endif
// NTOK tokens a launch (a speculative verify step's columns): act [NTOK, K], out [NTOK, units], every token's
// arithmetic that of a one-token launch with the same slot width (SLOT_KC), so each token gets its bits.
#if NTOK > 1 && FUSE != 0
#error "a fused tensor-parallel reduction takes one token a launch"
#endif
#if ACT_RING && FUSE != 0
#error "a ring-fed residual GEMV fuses no reduction"
#endif
struct Fuse {
  u64* slot[MAX_RANKS];    // push: rank q's receive slots (world x units words) as mapped here
  float* x;                // reduce-in: where CTA 0 writes the sum (the residual stream)
  const u64* step;         // the fused steps so far, this one included (a device counter)
  int rank, world, per_step, use;  // per_step uses of this kind of slot a step, this is use `use`
};
struct Params { Phase p; float eps; int pad; const unsigned char* pf[2]; unsigned long long pf_bytes[2]; Fuse f; };

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" :: "n"(NCONSUMER) : "memory"); }
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

// A consumer's start: the previous kernel done (PDL); then release the next one unless EARLY did at the
// CTA's start.
__device__ __forceinline__ void phase_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
#if !EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The fused tensor-parallel reduction (inference.parallel.reduce.FusedReduce owns the memory), in the low-latency
// form of NCCL's LL protocol: every value travels with its epoch in one 8-byte store (value bits low, epoch
// high), so a reader that sees the epoch sees the value, with no fence and no counter. A residual GEMV (MODE 1)
// with FUSE 1 pushes: its output rows (rank 0: x + W a, the residual stream; others: W a) go to slot `rank` of
// every rank's receive buffer (stores over NVLink). A GEMV that normalizes its input (MODE 0 or 2) with FUSE 2
// reduces in: its activation is the sum IN RANK ORDER of this rank's world slots (`act`), each element read until
// it carries this use's epoch; CTA 0 also writes the sum to f.x. Every rank sums the same bits in the same order,
// so every rank gets the same x. epoch = (fused steps before this one) * per_step + use + 1: it grows with
// every use of a buffer, and a zeroed buffer holds none. A slot is rewritten only after every rank has read it:
// a rank pushes the next use of a buffer after it has read every peer's push to the other buffer, which each
// peer makes only after the kernel reading this one has completed (griddepcontrol.wait, transitively).
__device__ __forceinline__ u32 fuse_epoch(const Fuse& f) {
  return (u32)((f.step[0] - 1) * (u64)f.per_step + (u64)f.use + 1);
}
// FUSE 2: slot words k, k+1 (k even) of one rank, as loaded (ll_issue), then re-read until both carry `epoch`.
__device__ __forceinline__ ulonglong2 ll_issue(const u64* p) {
  ulonglong2 w;
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(w.x), "=l"(w.y) : "l"(p) : "memory");
  return w;
}
__device__ __forceinline__ void ll_settle(const u64* p, u32 epoch, ulonglong2& w) {
  if ((u32)(w.x >> 32) != epoch || (u32)(w.y >> 32) != epoch) {
    const u64 t0 = global_ns();
    do {
      w = ll_issue(p);
      if (global_ns() - t0 > TIMEOUT_NS) __trap();  // a dead peer: an error, not a hang
    } while ((u32)(w.x >> 32) != epoch || (u32)(w.y >> 32) != epoch);
  }
}
// A consumer thread's activation chunks k = k0 + i * NCONSUMER * 4 (i < N, those below K): the input, or (FUSE 2)
// the ranks' slots summed in rank order, CTA 0 also writing the sum to f.x. FUSE 2 issues the slot loads of
// every rank (and of up to G chunks) before it checks any epoch: one L2 round trip for them all, not one per rank
// and chunk (a load checked before the next is issued made a 4-rank reduce-in add ~4 us to a launch;
// lab/probe_reduce_in.py).
template <int N>
__device__ __forceinline__ void act_chunks(const float* act, const Fuse& f, int k0, int K, float4* x) {
#if FUSE == 2
  constexpr int G = WORLD <= 4 ? N : 1;  // chunks in flight together: G x WORLD x 4 words in registers
  const u64* slots = (const u64*)act;
  const u32 epoch = fuse_epoch(f);
#pragma unroll
  for (int i0 = 0; i0 < N; i0 += G) {
    ulonglong2 w[G][WORLD][2];
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const int k = k0 + (i0 + i) * NCONSUMER * 4;
      if (k < K) {
#pragma unroll
        for (int q = 0; q < WORLD; ++q) {
          w[i][q][0] = ll_issue(slots + (size_t)q * K + k);
          w[i][q][1] = ll_issue(slots + (size_t)q * K + k + 2);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const int k = k0 + (i0 + i) * NCONSUMER * 4;
      if (k >= K) continue;
      float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int q = 0; q < WORLD; ++q) {
        ll_settle(slots + (size_t)q * K + k, epoch, w[i][q][0]);
        ll_settle(slots + (size_t)q * K + k + 2, epoch, w[i][q][1]);
        const float4 v = make_float4(__uint_as_float((u32)w[i][q][0].x), __uint_as_float((u32)w[i][q][0].y),
                                     __uint_as_float((u32)w[i][q][1].x), __uint_as_float((u32)w[i][q][1].y));
        if (q == 0) {
          a = v;
        } else {
          a.x += v.x; a.y += v.y; a.z += v.z; a.w += v.w;
        }
      }
      if (blockIdx.x == 0) *(float4*)(f.x + k) = a;
      x[i0 + i] = a;
    }
  }
#else
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int k = k0 + i * NCONSUMER * 4;
    x[i] = k < K ? __ldcg((const float4*)(act + k)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#endif
}
// FUSE 1: one output row to every rank's slot `rank`, with the epoch.
__device__ __forceinline__ void ll_push(const Fuse& f, int units, int row, float o) {
  const u64 word = ((u64)fuse_epoch(f) << 32) | (u64)__float_as_uint(o);
  for (int q = 0; q < f.world; ++q)
    asm volatile("st.volatile.global.u64 [%0], %1;" :: "l"(f.slot[q] + (size_t)f.rank * units + row), "l"(word) : "memory");
}

// The RMSNorm scale from each consumer thread's partial sum of squares (1 without a norm); every consumer
// thread is past its staging afterwards (consumers_sync). `red`: NWARP floats of its own (one set per token).
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
// ACT_RING: the tokens' activation chunk of slot j (its columns from ((j % nk) * KC), nk chunks a row tile).
template <int KC>
__device__ __forceinline__ void act_copy(const Phase& ph, int j, int nk, unsigned char* ring, u64* full) {
  const int buf = j % NS, k0 = (j % nk) * KC;
  const u32 bytes = (u32)min(KC, ph.K - k0) * 4u;
  for (int t = 0; t < NTOK; ++t)
    bulk_copy(smem_u32(ring + (size_t)buf * STAGE + MT * ROWB + t * KC * 4), ph.act + (size_t)t * ph.K + k0, bytes,
              smem_u32(&full[buf]));
}
// ACT_RING: the first fill's activation chunks (slots 0..n-1), once the previous kernel is done (the activation
// is its output); their weights were copied before this wait.
template <int KC>
__device__ __forceinline__ void act_first(const Phase& ph, int n, int nk, unsigned char* ring, u64* full) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int j = 0; j < n; ++j) act_copy<KC>(ph, j, nk, ring, full);
}
template <int MODE, int KC>
__device__ __forceinline__ void produce(const Phase& ph, int& s, unsigned char* ring, u64* full, u64* empty) {
  int u0, nu;
  unit_range(ph, u0, nu);
  const int nr = MODE == 2 ? 2 * nu : nu, K = ph.K, nk = (K + KC - 1) / KC;
  for (int g = 0; g < nr; g += MT) {
    const int rows = min(MT, nr - g);
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS;
      if (s >= NS) mbar_wait(smem_u32(&empty[buf]), ((s / NS) - 1) & 1);
      const u32 bytes = (u32)min(KC, K - k0) * 2u, fb = smem_u32(&full[buf]);
      mbar_expect_tx(fb, rows * bytes + (ACT_RING ? NTOK * bytes * 2u : 0u));
      for (int r = 0; r < rows; ++r) {
        const int lr = g + r;
        const long long row = MODE == 2 ? (lr < nu ? u0 + lr : ph.units + u0 + lr - nu) : u0 + lr;
        bulk_copy(smem_u32(ring + (size_t)buf * STAGE + (size_t)r * ROWB), ph.w + (row * K + k0) * 2, bytes, fb);
      }
      if (ACT_RING) {
        if (s == NS - 1) act_first<KC>(ph, NS, nk, ring, full);
        else if (s >= NS) act_copy<KC>(ph, s, nk, ring, full);
      }
    }
  }
  if (ACT_RING && s < NS) act_first<KC>(ph, s, nk, ring, full);  // fewer slots than the ring holds
}

// Producer, after its copies: this CTA's share of the l2_prefetch spans, in bulk prefetches of at most 32 KB
// (no completion to wait for; the lines just arrive in L2). `last`: the full barrier of its last slot when the
// ring held the CTA's whole share (no slot reused), so the prefetches never queue before its own weights
// (3B step at ctx 512: 1837.7 -> 1832.0 us; lab/HISTORY.md).
__device__ __forceinline__ void l2_prefetch(const Params& prm, u64* last) {
  if (prm.pf_bytes[0] == 0 && prm.pf_bytes[1] == 0) return;
  if (last != nullptr) mbar_wait(smem_u32(last), 0);
  for (int j = 0; j < 2; ++j) l2_prefetch_share(prm.pf[j], prm.pf_bytes[j]);
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
// Activation elements k..k+3 times the norm weights n, as fp32 (consume_cc's layout). Returns their sum of squares.
__device__ __forceinline__ float stage_f32(float* xs, int k, float4 v, float4 n) {
  const float ssq = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  *(float4*)(xs + k) = make_float4(v.x * n.x, v.y * n.y, v.z * n.z, v.w * n.w);
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

// Every token's activation (the input, or FUSE 2 the ranks' slots summed) times the norm weights, staged into dst
// (token t at dst + t * stride) as MMA fragments (FRAG: stage4, gate/up) or fp32 (stage_f32, consume_cc), the
// first NPRE chunks of every token loaded before any is staged; then each token's RMSNorm scale into rstd (red:
// NWARP floats a token). consume_cc's loop past those chunks stays rolled (K > 2048 only; unrolled it takes
// registers the rest does not need), gate/up's is the compiler's: two loops, so that each consumer compiles as
// it did before the helper.
template <int NORM_KIND, int NPRE, bool FRAG>
__device__ __forceinline__ void stage_tokens(const Phase& ph, int K, const Fuse& f, const float4 (&nwp)[NPRE],
                                             float* red, float eps, float (&rstd)[NTOK], void* dst, int stride) {
  auto stage = [&](int t, int k, float4 x, float4 n) {
    return FRAG ? stage4((u32*)dst + t * stride, k, x, n) : stage_f32((float*)dst + (size_t)t * stride, k, x, n);
  };
  const int tid = threadIdx.x;
  float ssq[NTOK];
  float4 xa[NTOK][NPRE];
#pragma unroll
  for (int t = 0; t < NTOK; ++t) act_chunks<NPRE>(ph.act + (size_t)t * K, f, tid * 4, K, xa[t]);
#pragma unroll
  for (int t = 0; t < NTOK; ++t) {
    ssq[t] = 0.f;
#pragma unroll
    for (int i = 0; i < NPRE; ++i) {
      const int k = (tid + i * NCONSUMER) * 4;
      if (k < K) ssq[t] += stage(t, k, xa[t][i], nwp[i]);
    }
  }
  if (FRAG) {
    for (int k = (tid + NPRE * NCONSUMER) * 4; k < K; k += NCONSUMER * 4) {
      const float4 n = norm4<NORM_KIND>(ph.norm_w, k, K);
#pragma unroll
      for (int t = 0; t < NTOK; ++t) {
        act_chunks<1>(ph.act + (size_t)t * K, f, k, K, xa[t]);
        ssq[t] += stage(t, k, xa[t][0], n);
      }
    }
  } else {
#pragma unroll 1
    for (int k = (tid + NPRE * NCONSUMER) * 4; k < K; k += NCONSUMER * 4) {
      const float4 n = norm4<NORM_KIND>(ph.norm_w, k, K);
#pragma unroll
      for (int t = 0; t < NTOK; ++t) {
        act_chunks<1>(ph.act + (size_t)t * K, f, k, K, xa[t]);
        ssq[t] += stage(t, k, xa[t][0], n);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NTOK; ++t) rstd[t] = block_rstd<NORM_KIND>(ssq[t], red + t * NWARP, K, eps);
}

// Consumers of gate/up (8 warps) on tensor cores: per slot, warp w takes KS = KC / 128 steps of 16 columns
// (ldmatrix of the weights, mma.sync m16n8k16 against the activation's hi / mid / lo fragments), keeps
// the tile's partial sums in registers over its K chunks, then writes them to acc[row * NWARP + w];
// the epilogue adds the 8 partials of each row:
//   out[u] = silu(rstd * W[u] . n) * (rstd * W[units + u] . n), n = x*norm_w
// NTOK tokens: MMA n-block b takes tokens 2b (columns 0-2) and 2b + 1 (columns 4-6), so each token's parts sit
// in the lanes and accumulator slots of a one-token launch's token (the MMA computes a column from its own B
// column only); token t's fragments are staged at xb + t * XTOK, its partial sums at acc + t * SUMS.
#define NBLK ((NTOK + 1) / 2)
// Up to 2 n-blocks every B fragment of a slot is loaded before the MMAs; more would spill registers (8 tokens:
// gate/up 44.6 us a launch against 21.9 at 4), so each is loaded beside its MMA.
#define PRE_B (NBLK <= 2)
// B fragment of n-block b for the 16 columns from `col`: lane l holds token 2b + l / 16's words (l % 16) * 2
// (zeros for lanes l % 16 >= 12 and tokens past NTOK).
__device__ __forceinline__ uint2 b_frag(const u32* xb, int b, int col, int lane, int xtok) {
  const int t = 2 * b + (lane >> 4), lt = lane & 15;
  return lt < 12 && t < NTOK ? *(const uint2*)(xb + t * xtok + (col >> 4) * XB + lt * 2) : make_uint2(0u, 0u);
}
// A warp's MMA accumulators of a 16-row tile (NBLK n-blocks, two chains each) -> its partial sums: token t's row
// r0 + i at acc[t * tok_stride + (r0 + i) * NWARP + warp], rows from nr on skipped. Lane 4i (4i + 2) holds MMA
// columns 0-1 (4-5): token 2b's (2b + 1's) hi and mid parts of rows i and i + 8; lane 4i + 1 (4i + 3) column 2
// (6): its lo part.
__device__ __forceinline__ void store_partials(const float (&d)[NBLK][8], float* acc, int tok_stride, int r0, int nr,
                                               int warp, int lane) {
#pragma unroll
  for (int b = 0; b < NBLK; ++b) {
    const float c0 = d[b][0] + d[b][4], c2 = d[b][2] + d[b][6];
    const float t0 = __shfl_down_sync(0xffffffffu, c0, 1), t2 = __shfl_down_sync(0xffffffffu, c2, 1);
    const int t = 2 * b + ((lane >> 1) & 1);
    if ((lane & 1) == 0 && t < NTOK) {
      float* at = acc + t * tok_stride;
      const int r = r0 + (lane >> 2);
      if (r < nr) at[r * NWARP + warp] = (d[b][0] + d[b][1]) + (d[b][4] + d[b][5]) + t0;
      if (r + 8 < nr) at[(r + 8) * NWARP + warp] = (d[b][2] + d[b][3]) + (d[b][6] + d[b][7]) + t2;
    }
  }
}
// The sum of a row's NWARP = 8 partial sums at `at`, in a fixed tree.
__device__ __forceinline__ float sum8(const float* at) {
  const float4 p = *(const float4*)at, q = *(const float4*)(at + 4);
  return ((p.x + p.y) + (p.z + p.w)) + ((q.x + q.y) + (q.z + q.w));
}
template <int KC, int NORM_KIND>
__device__ __forceinline__ void consume_gate_up(const Phase& ph, int& s, const unsigned char* ring, u64* full,
                                                u64* empty, float* acc, u32* xb, float* red, float eps,
                                                const Fuse& f) {
  constexpr int KS = KC / (16 * NWARP), NPRE = 2;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int u0, nu;
  unit_range(ph, u0, nu);
  const int nr = 2 * nu, K = ph.K, XTOK = K / 16 * XB;
  // What does not depend on the previous kernel is loaded before waiting for it: the norm weights.
  float4 nwp[NPRE];
#pragma unroll
  for (int i = 0; i < NPRE; ++i) nwp[i] = norm4<NORM_KIND>(ph.norm_w, (tid + i * NCONSUMER) * 4, K);
  phase_wait();
  // The activation, once per CTA, into shared memory as MMA fragments.
  float rstd[NTOK];
  stage_tokens<NORM_KIND, NPRE, true>(ph, K, f, nwp, red, eps, rstd, xb, XTOK);
  // ldmatrix.x4 addresses: lane l gives row l % 16, columns + 8 * (l / 16), of this warp's 16-column steps
  const u32 aoff = (lane & 15) * ROWB + (lane >> 4) * 16 + warp * KS * 32;
  for (int g = 0; g < nr; g += MT) {
    float d[NBLK][8];  // per n-block two accumulators: shorter MMA chains
#pragma unroll
    for (int b = 0; b < NBLK; ++b)
#pragma unroll
      for (int i = 0; i < 8; ++i) d[b][i] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS;
      mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
      const u32 sbase = smem_u32(ring + (size_t)buf * STAGE), abase = sbase + aoff;
      u32 a[KS][4];
      uint2 bf[KS][PRE_B ? NBLK : 1];
#pragma unroll
      for (int j = 0; j < KS; ++j) {  // all loads first, then the MMAs
        const int col = k0 + (warp * KS + j) * 16;
        if (col < K) {  // warp-uniform
          ldsm4(abase + j * 32, a[j]);
          if (PRE_B)
#pragma unroll
            for (int b = 0; b < NBLK; ++b) bf[j][b] = b_frag(xb, b, col, lane, XTOK);
        }
      }
#pragma unroll
      for (int j = 0; j < KS; ++j) {
        const int col = k0 + (warp * KS + j) * 16;
        if (col < K)
#pragma unroll
          for (int b = 0; b < NBLK; ++b) {
            const uint2 v = PRE_B ? bf[j][b] : b_frag(xb, b, col, lane, XTOK);
            mma(d[b] + (j & 1) * 4, a[j], v.x, v.y);
          }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
    }
    store_partials(d, acc, SUMS, g, nr, warp, lane);
  }
  consumers_sync();
#pragma unroll
  for (int t = 0; t < NTOK; ++t) {
    const float* at = acc + t * SUMS;
    for (int r = tid; r < nu; r += NCONSUMER) {
      const float y = sum8(at + r * NWARP), u = sum8(at + (nu + r) * NWARP);
      const float gt = y * rstd[t];
      ph.out[(size_t)t * ph.units + u0 + r] = gt / (1.f + __expf(-gt)) * (u * rstd[t]);
    }
  }
}

// Modes 0 and 1 (QKV, o_proj: latency-bound, a few rows per CTA) on CUDA cores: the
// activation is staged once as fp32 (times the norm weights) in xs; warp w owns rows 2w and 2w + 1 of each
// 16-row tile, lane l the 8-column chunks l, l + 32, ... of each slot (16-byte shared loads, conflict-free),
// fp32 FMAs in two chains per row, the warp's sums reduced by shuffles (warp_sums), each written by a lane that
// holds it.
// (A tensor-core path like gate/up's, with the activation split into MMA fragments, chained MMAs and a
// cross-warp reduction, made the 1.5B step 13 us and the Qwen3 / 3B steps 5 us slower; kernels/PERF.md.)
__device__ __forceinline__ float dot4(u32 wa, u32 wb, float4 x) {
  return fmaf(hi16(wb), x.w, fmaf(lo16(wb), x.z, fmaf(hi16(wa), x.y, lo16(wa) * x.x)));
}
// The four products straight into a chain (consume_ring: four instructions for four products, not dot4's five).
__device__ __forceinline__ float fma4(u32 wa, u32 wb, float4 x, float acc) {
  return fmaf(hi16(wb), x.w, fmaf(lo16(wb), x.z, fmaf(hi16(wa), x.y, fmaf(lo16(wa), x.x, acc))));
}
// NTOK tokens: token t's activation staged at xs + t * K, its sums in chains of its own, in a one-token launch's
// order.
template <int MODE, int KC, int NORM_KIND, int BIAS_KIND>
__device__ __forceinline__ void consume_cc(const Phase& ph, int& s, const unsigned char* ring, u64* full, u64* empty,
                                           float* xs, float* red, float eps, const Fuse& f) {
  constexpr int NPRE = 2;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, K = ph.K;
  int u0, nu;
  unit_range(ph, u0, nu);
  float4 nwp[NPRE];  // what does not depend on the previous phase first: norm weights, bias
#pragma unroll
  for (int i = 0; i < NPRE; ++i) nwp[i] = norm4<NORM_KIND>(ph.norm_w, (tid + i * NCONSUMER) * 4, K);
  // The warp's 2 x NTOK sums (token t, row 2w + r at flat index 2t + r) end scattered over its lanes (warp_sums):
  // a lane holds KEPT of them from index `base`, known now; one lane of the NDUP holding a sum writes it.
  constexpr int NSUM = 2 * NTOK, S = splits<NSUM, 1>(), KEPT = NSUM >> S, NDUP = 32 >> S;
  const int base = scatter_base<NSUM, 1>(lane);
  bool writes[KEPT];
  int tok[KEPT], my[KEPT];  // sum j: token, tile row
  float bias0[KEPT];
#pragma unroll
  for (int j = 0; j < KEPT; ++j) {
    writes[j] = (lane & (NDUP - 1)) == j % NDUP;
    tok[j] = (base + j) >> 1, my[j] = 2 * warp + ((base + j) & 1);
    bias0[j] = BIAS_KIND >= 0 && writes[j] && my[j] < nu ? any_f32<BIAS_KIND>(ph.bias, u0 + my[j]) : 0.f;
  }
  phase_wait();
  // the residual beside the activation (FUSE 1: rank 0's rows of x only; the other ranks start from zero)
  const bool has_res = MODE == 1 && (FUSE != 1 || f.rank == 0);
  float res0[KEPT];
#pragma unroll
  for (int j = 0; j < KEPT; ++j)
    res0[j] = has_res && writes[j] && my[j] < nu ? __ldcg(ph.out + (size_t)tok[j] * ph.units + u0 + my[j]) : 0.f;
  float rstd[NTOK], rs[KEPT];
  stage_tokens<NORM_KIND, NPRE, false>(ph, K, f, nwp, red, eps, rstd, xs, K);
#pragma unroll
  for (int j = 0; j < KEPT; ++j) {  // token tok[j]'s (selects: no register array indexed at run time)
    rs[j] = rstd[0];
#pragma unroll
    for (int t = 1; t < NTOK; ++t) rs[j] = t == tok[j] ? rstd[t] : rs[j];
  }
  for (int g = 0; g < nu; g += MT) {
    float a0[NTOK], b0[NTOK], a1[NTOK], b1[NTOK];  // rows 2w and 2w + 1, two chains each, per token
#pragma unroll
    for (int t = 0; t < NTOK; ++t) a0[t] = b0[t] = a1[t] = b1[t] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS, nc = min(KC, K - k0);
      mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
      const unsigned char* row = ring + (size_t)buf * STAGE + (size_t)(2 * warp) * ROWB;
#pragma unroll
      for (int j = 0; j < (KC + 255) / 256; ++j) {
        const int c = lane * 8 + j * 256;
        if (c < nc) {
          const uint4 w0 = *(const uint4*)(row + c * 2), w1 = *(const uint4*)(row + ROWB + c * 2);
#pragma unroll
          for (int t = 0; t < NTOK; ++t) {
            const float* xt = xs + (size_t)t * K + k0 + c;
            const float4 x0 = *(const float4*)xt, x1 = *(const float4*)(xt + 4);
            a0[t] += dot4(w0.x, w0.y, x0); b0[t] += dot4(w0.z, w0.w, x1);
            a1[t] += dot4(w1.x, w1.y, x0); b1[t] += dot4(w1.z, w1.w, x1);
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
    }
    float v[NSUM];
#pragma unroll
    for (int t = 0; t < NTOK; ++t) v[2 * t] = a0[t] + b0[t], v[2 * t + 1] = a1[t] + b1[t];
    warp_sums<NSUM, 1>(v, lane);  // v[j]: sum base + j, the xor tree's bits
#pragma unroll
    for (int j = 0; j < KEPT; ++j) {
      const int lr = g + my[j];
      if (!writes[j] || lr >= nu) continue;
      float* out = ph.out + (size_t)tok[j] * ph.units;
      if (MODE == 0) {
        float o = v[j] * rs[j];
        if (BIAS_KIND >= 0) o += g == 0 ? bias0[j] : any_f32<BIAS_KIND>(ph.bias, u0 + lr);
        out[u0 + lr] = o;
      } else {
        const float o = (g == 0 ? res0[j] : has_res ? __ldcg(out + u0 + lr) : 0.f) + v[j];
#if FUSE == 1
        ll_push(f, ph.units, u0 + lr, o);
#else
        out[u0 + lr] = o;
#endif
      }
    }
  }
}

// ACT_RING (residual_ring: a speculating run's down_proj over k tokens) on CUDA cores: the activation arrives with
// each slot (no staging), and a warp reads a token's activation chunk for RING_RW rows, not consume_cc's two (at 8
// tokens those reads bound consume_cc): warp w takes rows RING_RW (w % 4) .. of a tile (RING_RW 4, or fewer where
// every CTA holds one tile of at most 4 x RING_RW rows, so no warp sums the slot's unfilled rows: the 1.5B's 11-12
// take 3) and the 256-column blocks m with m % 2 == w / 4; lane l the 8 columns 8 l .. of each of its blocks, in two
// chains per row and token, each product straight into its chain (fma4). A slot is whole 512-column pairs, so which
// blocks a lane sums, and in which order, depends neither on the slot width nor on the warp or CTA taking the row.
// The two halves' sums meet in shared memory (acc: [NTOK][2][MT]) and are added to the residual.
template <int KC>
__device__ __forceinline__ void consume_ring(const Phase& ph, int& s, const unsigned char* ring, u64* full,
                                             u64* empty, float* acc) {
  static_assert(KC % 512 == 0, "whole 512-column pairs a slot");
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, K = ph.K, half = warp >> 2, r0 = RING_RW * (warp & 3);
  int u0, nu;
  unit_range(ph, u0, nu);
  phase_wait();
  for (int g = 0; g < nu; g += MT) {
    float a[RING_RW][NTOK], b[RING_RW][NTOK];  // rows r0.., two chains each, per token
#pragma unroll
    for (int i = 0; i < RING_RW; ++i)
#pragma unroll
      for (int t = 0; t < NTOK; ++t) a[i][t] = b[i][t] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS, nc = min(KC, K - k0);
      mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
      const unsigned char* rows = ring + (size_t)buf * STAGE + (size_t)r0 * ROWB;
      const float* xa = (const float*)(ring + (size_t)buf * STAGE + MT * ROWB);
#pragma unroll
      for (int j = 0; j < KC / 512; ++j) {
        const int c = (2 * j + half) * 256 + lane * 8;
        if (c < nc) {
          uint4 w[RING_RW];
#pragma unroll
          for (int i = 0; i < RING_RW; ++i) w[i] = *(const uint4*)(rows + i * ROWB + c * 2);
#pragma unroll
          for (int t = 0; t < NTOK; ++t) {
            const float4 x0 = *(const float4*)(xa + t * KC + c), x1 = *(const float4*)(xa + t * KC + c + 4);
#pragma unroll
            for (int i = 0; i < RING_RW; ++i) {
              a[i][t] = fma4(w[i].x, w[i].y, x0, a[i][t]);
              b[i][t] = fma4(w[i].z, w[i].w, x1, b[i][t]);
            }
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
    }
    constexpr int NSUM = RING_RW * NTOK, S = splits<NSUM, 1>(), KEPT = NSUM >> S, NDUP = 32 >> S;
    float v[NSUM];  // token t, row r0 + i at flat index RING_RW t + i; scattered over the lanes (warp_sums)
#pragma unroll
    for (int i = 0; i < RING_RW; ++i)
#pragma unroll
      for (int t = 0; t < NTOK; ++t) v[RING_RW * t + i] = a[i][t] + b[i][t];
    const int base = warp_sums<NSUM, 1>(v, lane);
#pragma unroll
    for (int j = 0; j < KEPT; ++j)
      if ((lane & (NDUP - 1)) == j % NDUP) {
        const int t = (int)((u32)(base + j) / RING_RW), i = (int)((u32)(base + j) % RING_RW);
        acc[(t * 2 + half) * MT + r0 + i] = v[j];
      }
    consumers_sync();
    for (int i = tid; i < NTOK * MT; i += NCONSUMER) {
      const int t = i / MT, r = i % MT;
      if (g + r < nu) {
        float* out = ph.out + (size_t)t * ph.units + u0 + g + r;
        *out = __ldcg(out) + (acc[t * 2 * MT + r] + acc[(t * 2 + 1) * MT + r]);
      }
    }
    consumers_sync();  // the sums are read before the next tile writes them
  }
}

// Mode 0 on tensor cores (a speculating run's LM head, whose k tokens would make consume_cc read every token's
// activation once per warp): gate/up's MMA (the activation staged as hi / mid / lo 16-bit parts with the RMSNorm,
// tokens 2b and 2b + 1 in columns 0-2 and 4-6 of n-block b, rstd applied at the end), but warp w takes the 16-column steps
// m = w, w + 8, ... of the row (interleaved: step k0 / 16 + j * NWARP + w of a slot) into chain (m / NWARP) & 1 =
// j & 1 (the slot width a multiple of 256), so its sums do not depend on the slot width; each 16-row tile's NWARP
// partial sums per row are
// added and written before the next tile (any rows a CTA: the LM head's 1,151). Token t's partial sums at
// acc + t * MT * NWARP. (Mode 1 on tensor cores, its activation split from the ring per step, was slower than
// consume_cc at any token count: kernels/PERF.md.)
template <int KC, int NORM_KIND, int BIAS_KIND>
__device__ __forceinline__ void consume_mma(const Phase& ph, int& s, const unsigned char* ring, u64* full, u64* empty,
                                            float* acc, u32* xb, float* red, float eps, const Fuse& f) {
  constexpr int KS = KC / (16 * NWARP), NPRE = 2;
  static_assert(KC % (32 * NWARP) == 0, "a slot of whole 256-column steps: (step / NWARP) & 1 = j & 1");
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, K = ph.K, XTOK = K / 16 * XB;
  int u0, nu;
  unit_range(ph, u0, nu);
  float4 nwp[NPRE];
#pragma unroll
  for (int i = 0; i < NPRE; ++i) nwp[i] = norm4<NORM_KIND>(ph.norm_w, (tid + i * NCONSUMER) * 4, K);
  phase_wait();
  float rstd[NTOK];
  stage_tokens<NORM_KIND, NPRE, true>(ph, K, f, nwp, red, eps, rstd, xb, XTOK);
  const u32 aoff = (lane & 15) * ROWB + (lane >> 4) * 16 + warp * 32;  // ldmatrix.x4: this warp's 16 columns
  for (int g = 0; g < nu; g += MT) {
    float d[NBLK][8];
#pragma unroll
    for (int b = 0; b < NBLK; ++b)
#pragma unroll
      for (int i = 0; i < 8; ++i) d[b][i] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KC, ++s) {
      const int buf = s % NS;
      mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
      const u32 abase = smem_u32(ring + (size_t)buf * STAGE) + aoff;
      u32 a[KS][4];
#pragma unroll
      for (int j = 0; j < KS; ++j)
        if (k0 + (j * NWARP + warp) * 16 < K) ldsm4(abase + j * NWARP * 32, a[j]);  // warp-uniform
#pragma unroll
      for (int j = 0; j < KS; ++j) {
        const int c = (j * NWARP + warp) * 16;  // the step's first column in the slot
        if (k0 + c < K) {
#pragma unroll
          for (int b = 0; b < NBLK; ++b) {
            const uint2 v = b_frag(xb, b, k0 + c, lane, XTOK);
            mma(d[b] + (j & 1) * 4, a[j], v.x, v.y);  // chain (step / NWARP) & 1: KC / 128 is even
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
    }
    store_partials(d, acc, MT * NWARP, 0, MT, warp, lane);  // the tile's partial sums, then their sums
    consumers_sync();
    for (int i = tid; i < NTOK * MT; i += NCONSUMER) {
      const int t = i / MT, r = i % MT, row = u0 + g + r;
      if (g + r >= nu) continue;
      const float y = sum8(acc + t * MT * NWARP + r * NWARP);
      float rs = 1.f;
#pragma unroll
      for (int tt = 0; tt < NTOK; ++tt)
        if (tt == t) rs = rstd[tt];
      float o = y * rs;
      if (BIAS_KIND >= 0) o += any_f32<BIAS_KIND>(ph.bias, row);
      ph.out[(size_t)t * ph.units + row] = o;
    }
    consumers_sync();  // the partial sums are read before the next tile writes them
  }
}

extern "C" __global__ void __launch_bounds__(NCONSUMER + 32, 1) KERNEL_NAME(const Params prm) {
  __shared__ __align__(8) u64 full[NS], empty[NS];
  __shared__ float red[NTOK * NWARP];
  extern __shared__ __align__(128) unsigned char ring[];
  float* acc = (float*)(ring + (size_t)NS * STAGE);  // [NTOK][SUMS] partial row sums, NWARP per row
  u32* xb = (u32*)(acc + NTOK * SUMS);               // [NTOK][K * XB / 16] the activation, as MMA fragments
  const int tid = threadIdx.x;
  if (tid == 0) ring_barriers_init(full, empty, NS, NWARP);
  __syncthreads();
#if EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");  // the next kernel may launch at once
#endif
  int s = 0;
  if (tid >= NCONSUMER) {  // producer warp: weights do not depend on the previous kernel, so no PDL wait
    if (tid == NCONSUMER) {
      PRODUCE
      l2_prefetch(prm, s > 0 && s <= NS ? &full[(s - 1) % NS] : nullptr);
    }
    return;
  }
  CONSUME
}
