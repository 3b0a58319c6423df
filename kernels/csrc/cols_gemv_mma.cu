// Decode GEMVs over 1..8 activation columns per CTA on tensor cores (mma.sync m16n8k16, bf16 weights, float32
// accumulation); kernels/cols_gemv.py launches it (Config.mma) with the contract and MODEs of cols_gemv.cu:
//   MODE 0 rmsnorm_gemv, 1 residual, 2 gate_up, 3 lm_head (argmax, the draft's acceptance, the token fed back).
//   KDIM (K, a multiple of 8); R 16-row tiles (gate_up: 16 gate + 16 up rows) per warp; WK warps per row group
//   (they split K); NW warps per CTA; U steps per batch; NORM_KIND / BIAS_KIND (-1 none, 0 bf16, 1 fp16, 2 fp32);
//   SK CTAs per cluster splitting K (1: no cluster; not the LM head).
// A CTA takes 8 columns (column group cgrp: columns 8 cgrp .. 8 cgrp + 7 that exist) as the MMA's n = 8.
// Split K (SK > 1, for small weights: a 16-row tile per CTA would leave most SMs idle): the SK CTAs of a cluster
// take consecutive step ranges, stage only their K range, and the cluster's rank 0 adds the ranks' partial sums
// (and partial sums of squares) in rank order from the peers' shared memory, then stores: fixed by the config.
// Why: the CUDA-core kernel's multiply-adds grow with the columns (8 columns: 2-3x a one-column launch on the 135M
// model); an MMA costs the same for 1 or 8 columns, and its column j is computed from the activation's column j
// only, in the instruction's fixed order, so a verify step (8 columns) and a plain step (1) give each column the
// same bits. Columns a launch lacks load zeros into their B fragments and are never stored.
// The activation (x * norm_w, float32) is split into three bf16 parts, hi + mid + lo = x to ~24 bits (each
// product with a bf16 weight exact), staged once per CTA; the MMAs of a part and half (weights 0..3 / 4..7 of the
// lanes' chunks) accumulate in their own chain (six independent chains), added in a fixed order at the end.
// Weight layout in registers: a step covers 4 chunks (16 bytes, 8 weights) of 16 rows: lane (g = lane / 4,
// t = lane % 4) loads chunk t of rows g and g + 8. The MMA's k order is permuted consistently for A and B: the
// lane's k slots 2t, 2t + 1 (and + 8, + 9) are weights 0..3 of its chunk in the first MMA, 4..7 in the second,
// and its B fragment is the same 8 activation values, staged as uint4 per (part, chunk, column) so a warp's
// fragment load is 512 contiguous bytes. Step s of warp wk: s = s_lo + wk + WK * i (chunks 4 s .. 4 s + 3).
#include "common.cuh"
#define NCH (KDIM / 8)                       // 16-byte chunks per row
#define NSTEP ((NCH + 3) / 4)                // MMA steps (4 chunks) per row tile
#define SPC ((NSTEP + SK - 1) / SK)          // steps per CTA of a cluster
#define PER ((SPC + WK - 1) / WK)            // steps per warp (at most)
#define NCHL (4 * SPC)                       // chunks staged per CTA
#define K4L (8 * SPC)                        // float4s staged per CTA and column
#define NB ((PER + U - 1) / U)               // batches
#define G2 (MODE == 2 ? 2 : 1)               // gate and up
#define GROUPS (NW / WK)                     // row groups per CTA
#define UNITS_PER_CTA (GROUPS * R * 16)
#define NT (NW * 32)                         // threads per CTA
#define K4 (KDIM / 4)                        // float4s per activation column
#define NIT ((8 * K4L + NT - 1) / NT)        // staged (column, float4) items per thread (at most)
#define SB 4                                 // staged items per thread in flight
#include "cols_common.cuh"

// Two floats as bf16x2 (round to nearest even), `lo` in the low half: the MMA's element order.
__device__ __forceinline__ u32 bf16x2(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ float bf_lo(u32 v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf_hi(u32 v) { return __uint_as_float(v & 0xffff0000u); }

// x0, x1 as three bf16x2 parts (hi, mid, lo), each the rest of the one before rounded: hi + mid + lo = x.
__device__ __forceinline__ void split3(float x0, float x1, u32& h, u32& m, u32& l) {
  h = bf16x2(x0, x1);
  const float r0 = __fsub_rn(x0, bf_lo(h)), r1 = __fsub_rn(x1, bf_hi(h));
  m = bf16x2(r0, r1);
  l = bf16x2(__fsub_rn(r0, bf_lo(m)), __fsub_rn(r1, bf_hi(m)));
}

__device__ __forceinline__ void mma(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Weight rows of a lane: [tile r][gate/up e][g or g + 8 h] -> slot (r * G2 + e) * 2 + h.
#define NROWS (R * G2 * 2)
struct Batch { uint4 w[NROWS][U]; };

__device__ __forceinline__ void load_batch(const Params& prm, const long long* rows, const bool* ok, int s0,
                                           int s_hi, int t, Batch& b) {
#pragma unroll
  for (int r = 0; r < NROWS; ++r)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u * WK, c = 4 * s + t;
      b.w[r][u] = ok[r] && s < s_hi && c < NCH ? ld_stream(prm.w + rows[r] * (KDIM / 2) + c * 4)
                                              : make_uint4(0u, 0u, 0u, 0u);
    }
}

extern "C" __global__ void __launch_bounds__(NW * 32) KERNEL_NAME(const Params prm) {
  static_assert(SK == 1 || MODE != 3, "the LM head does not split K over a cluster");
  extern __shared__ __align__(16) unsigned char smem[];  // xs [3 parts][NCHL chunks][8 columns] uint4, sq [8][K4L]
  uint4* xs = (uint4*)smem;
  __shared__ float red[WK > 1 ? NW : 1][R * G2 * 4 * 32];
  __shared__ float rstd_s[8];
  __shared__ float ssq_s[8];  // this CTA's sums of squares (its K range)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int group = warp / WK, wk = warp % WK;
  const int rank = blockIdx.x % SK, cta = blockIdx.x / SK;  // a cluster: SK consecutive CTAs
  const int block = cta / prm.groups, cgrp = cta % prm.groups;  // column groups are neighbours
  const int s_lo = rank * SPC, s_hi = min(NSTEP, s_lo + SPC);  // this CTA's steps
  const int col0 = cgrp * 8;
  const int ncols = min(8, prm.ncols - col0);
  const int unit0 = block * UNITS_PER_CTA + group * R * 16;
  long long rows[NROWS];
  bool ok[NROWS];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int e = 0; e < G2; ++e)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int slot = (r * G2 + e) * 2 + h, u = unit0 + r * 16 + g + 8 * h;
        ok[slot] = u < prm.units;
        rows[slot] = (long long)u + (e ? (long long)prm.units : 0ll);
      }
  Batch cur;
  load_batch(prm, rows, ok, s_lo + wk, s_hi, t, cur);  // before the wait: weights do not depend on the previous kernel
  asm volatile("griddepcontrol.wait;" ::: "memory");

  // Stage the CTA's columns (times norm_w) as hi / mid / lo parts, the threads over (column, float4) items, and
  // each float4's sum of squares in sq[column][k4]; a column's sum is then added in an order fixed by K (lane
  // j takes k4 = j, j + 32, ... in order, then a shuffle tree), whichever thread staged what.
  float* sq = (float*)(xs + 3 * NCHL * 8);
#pragma unroll
  for (int i0 = 0; i0 < NIT; i0 += SB) {  // SB items per thread in flight
    float4 v[SB];
#pragma unroll
    for (int j = 0; j < SB; ++j) {
      const int it = tid + (i0 + j) * NT;
      const int q = it / K4L, k4 = 8 * s_lo + it % K4L;
      if (i0 + j < NIT && it < ncols * K4L && k4 < K4)
        v[j] = __ldcg((const float4*)prm.act + (size_t)(col0 + q) * K4 + k4);
    }
#pragma unroll
    for (int j = 0; j < SB; ++j) {
      const int it = tid + (i0 + j) * NT;
      const int q = it / K4L, lk4 = it % K4L, k4 = 8 * s_lo + lk4;
      if (i0 + j < NIT && it < ncols * K4L && k4 < K4) {
        float4 x = v[j];
        sq[q * K4L + lk4] = fmaf(x.w, x.w, fmaf(x.z, x.z, fmaf(x.y, x.y, __fmul_rn(x.x, x.x))));
        if (NORM_KIND >= 0) {
          const float4 n = norm4<NORM_KIND>(prm.norm_w, k4);
          x.x = __fmul_rn(x.x, n.x); x.y = __fmul_rn(x.y, n.y); x.z = __fmul_rn(x.z, n.z); x.w = __fmul_rn(x.w, n.w);
        }
        u32 h0, m0, l0, h1, m1, l1;
        split3(x.x, x.y, h0, m0, l0);
        split3(x.z, x.w, h1, m1, l1);
        uint2* dst = (uint2*)xs + ((size_t)((lk4 >> 1) * 8 + q) * 2 + (lk4 & 1));
        dst[0] = make_uint2(h0, h1);
        dst[(size_t)NCHL * 16] = make_uint2(m0, m1);
        dst[(size_t)NCHL * 32] = make_uint2(l0, l1);
      }
    }
  }
  __syncthreads();
  if (NORM_KIND >= 0) {
    for (int q = warp; q < ncols; q += NW) {
      float s = 0.f;
      for (int k4 = lane; k4 < min(K4L, K4 - 8 * s_lo); k4 += 32) s = __fadd_rn(s, sq[q * K4L + k4]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
      if (lane == 0) ssq_s[q] = s;
      if (lane == 0 && SK == 1) rstd_s[q] = rsqrtf(__fadd_rn(__fdiv_rn(s, (float)KDIM), prm.eps));
    }
  }

  // Six accumulator chains per tile (half x part: independent MMAs in flight), added in a fixed order after.
  float ch[R * G2][6][4];
#pragma unroll
  for (int i = 0; i < R * G2; ++i)
#pragma unroll
    for (int h = 0; h < 6; ++h) ch[i][h][0] = ch[i][h][1] = ch[i][h][2] = ch[i][h][3] = 0.f;
  const bool b_ok = g < ncols;  // this lane's B column (g) exists
#pragma unroll 1
  for (int b = 0; b < NB; ++b) {
    Batch nxt;
    if (b + 1 < NB) load_batch(prm, rows, ok, s_lo + wk + (b + 1) * U * WK, s_hi, t, nxt);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s_lo + wk + (b * U + u) * WK;
      if (s < s_hi) {
        const int c = 4 * s + t, lc = c - 4 * s_lo;
        uint4 xb[3];
#pragma unroll
        for (int p = 0; p < 3; ++p)
          xb[p] = b_ok && c < NCH ? xs[((size_t)p * NCHL + lc) * 8 + g] : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int i = 0; i < R * G2; ++i) {
          const uint4 wa = cur.w[2 * i][u], wb = cur.w[2 * i + 1][u];
#pragma unroll
          for (int p = 0; p < 3; ++p) {
            mma(ch[i][p], wa.x, wb.x, wa.y, wb.y, xb[p].x, xb[p].y);
            mma(ch[i][3 + p], wa.z, wb.z, wa.w, wb.w, xb[p].z, xb[p].w);
          }
        }
      }
    }
    if (b + 1 < NB) cur = nxt;
  }
  float acc[R * G2][4];
#pragma unroll
  for (int i = 0; i < R * G2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      acc[i][j] = __fadd_rn(__fadd_rn(__fadd_rn(ch[i][2][j], ch[i][5][j]), __fadd_rn(ch[i][1][j], ch[i][4][j])),
                            __fadd_rn(ch[i][0][j], ch[i][3][j]));  // the small parts first
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (WK > 1) {  // the K slices' partials, added in order by the row group's first warp
#pragma unroll
    for (int i = 0; i < R * G2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) red[warp][(i * 4 + j) * 32 + lane] = acc[i][j];
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int i = 0; i < R * G2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          float s = 0.f;
#pragma unroll
          for (int w = 0; w < WK; ++w) s = __fadd_rn(s, red[warp + w][(i * 4 + j) * 32 + lane]);
          acc[i][j] = s;
        }
    }
  } else {
    __syncthreads();  // rstd_s
  }
#if SK > 1
  // The cluster's partials: each CTA's (row group first warps) in its shared memory, then rank 0 adds them (and
  // the sums of squares) in rank order; the second barrier keeps the peers' shared memory until it has.
  __shared__ float4 part_s[GROUPS][R * G2][32];
  if (wk == 0) {
#pragma unroll
    for (int i = 0; i < R * G2; ++i) part_s[group][i][lane] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
  }
  cluster_sync();
  if (rank == 0) {
    if (NORM_KIND >= 0 && tid < ncols) {
      float s = 0.f;
#pragma unroll
      for (int r = 0; r < SK; ++r) s = __fadd_rn(s, ld_peer(peer_addr(smem_u32(&ssq_s[tid]), r)));
      rstd_s[tid] = rsqrtf(__fadd_rn(__fdiv_rn(s, (float)KDIM), prm.eps));
    }
    if (wk == 0) {
#pragma unroll
      for (int i = 0; i < R * G2; ++i) {
        float4 v[SK];  // every rank's load in flight, then added in order
#pragma unroll
        for (int r = 0; r < SK; ++r) v[r] = ld_peer4(peer_addr(smem_u32(&part_s[group][i][lane]), r));
        float4 a = v[0];
#pragma unroll
        for (int r = 1; r < SK; ++r) {
          a.x = __fadd_rn(a.x, v[r].x); a.y = __fadd_rn(a.y, v[r].y); a.z = __fadd_rn(a.z, v[r].z); a.w = __fadd_rn(a.w, v[r].w);
        }
        acc[i][0] = a.x; acc[i][1] = a.y; acc[i][2] = a.z; acc[i][3] = a.w;
      }
    }
  }
  cluster_sync();
  if (rank != 0) return;
#endif
#if MODE == 3
  __shared__ long long best_s[8];
  if (tid < 8) best_s[tid] = -9223372036854775807LL - 1;
  __syncthreads();
  long long best[2] = {-9223372036854775807LL - 1, -9223372036854775807LL - 1};
#endif
  if (wk == 0) {  // acc[i][j]: row g + 8 (j / 2) of tile i, column 2 t + j % 2
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int cq = 2 * t + (j & 1), u = unit0 + r * 16 + g + 8 * (j >> 1);
        if (u >= prm.units || cq >= ncols) continue;
        const float rs = NORM_KIND >= 0 ? rstd_s[cq] : 1.f;
        const float a = acc[r * G2][j];
        float* o = prm.out + (size_t)(col0 + cq) * prm.units + u;
        if (MODE == 0 || MODE == 3) {
          float y = NORM_KIND >= 0 ? __fmul_rn(a, rs) : a;
#if MODE == 3
          best[j & 1] = max(best[j & 1], argmax_key(y, u));
#endif
          if (BIAS_KIND >= 0) y = __fadd_rn(y, any_f32<BIAS_KIND < 0 ? 2 : BIAS_KIND>(prm.bias, u));
          *o = y;
        } else if (MODE == 1) {
          *o = __fadd_rn(__ldcg(o), a);
        } else {
          const float gt = __fmul_rn(a, rs), v = __fmul_rn(acc[r * G2 + G2 - 1][j], rs);
          *o = __fmul_rn(__fdiv_rn(gt, __fadd_rn(1.f, __expf(-gt))), v);
        }
      }
  }
#if MODE == 3
  if (wk == 0) {  // the warp's best per column: over g (lanes t, t + 4, ...), then one shared atomicMax
#pragma unroll
    for (int e = 0; e < 2; ++e) {
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) best[e] = max(best[e], __shfl_xor_sync(0xffffffffu, best[e], o));
      if (g == 0 && 2 * t + e < ncols) atomicMax(&best_s[2 * t + e], best[e]);
    }
  }
  __syncthreads();
  if (tid < ncols) atomicMax(prm.scratch + col0 + tid, best_s[tid]);  // this CTA's vote per column
  cols_head_finish(prm, tid);
#endif
}
