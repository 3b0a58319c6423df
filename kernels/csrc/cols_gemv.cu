// Decode GEMVs over CG activation columns on CUDA cores, 16-bit weights; launcher, contract and references:
// kernels/cols_gemv.py, which prepends the #defines of a variant:
//   MODE 0 rmsnorm_gemv (out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias), 1 residual (out[c] += W @ a[c]),
//        2 gate_up (out[c] = silu(Wg @ n_c) * (Wu @ n_c)), 3 lm_head (logits as MODE 0, then the per-column
//        argmax, the draft's acceptance and the next token fed back: kernels.lm_head_mma_cols' contract);
//   KDIM (K, a multiple of 8); CG columns per CTA (G = gridDim.x / row blocks column groups, neighbours in
//   launch order); R rows (gate_up: row pairs) per warp; WK warps per row group (they split K); NW warps per
//   CTA; U chunks per row loaded per batch; WKIND (0 bf16, 1 fp16 weights); NORM_KIND / BIAS_KIND (-1 none,
//   0 bf16, 1 fp16, 2 fp32).
// Column c's arithmetic does not depend on CG or on the other columns: the staged activation's sum of squares
// (per thread in k order, a shuffle tree, then the warps in order), every product and sum written out as
// float32 operations in a fixed order (compiled with --fmad=false: no contraction the compiler could choose
// differently per variant), one xor-shuffle tree per sum (warp_sums: stages scattered over the lanes, the same
// tree whatever the CG x rows sums a warp holds), the WK warps' partials added in order. So a verify step (CG
// columns) computes for each column the bits of the plain step (one column).
// A lane reads 16-byte chunks (8 weights) of its rows, chunk c = lane + 32 * (wk + WK * i); batches of U chunks
// per row in registers, the next batch loaded while this one is multiplied, the first before the PDL wait. The
// activation (times norm_w) is staged once per CTA in shared memory, half-chunk float4 j of chunk c of column q
// at xs4[(2q + j) * NCH + c] (a warp reads consecutive float4s).
#include "common.cuh"
#define NCH (KDIM / 8)                       // 16-byte chunks per row
#define STRIDE (32 * WK)                     // chunk stride of a lane
#define PER ((NCH + STRIDE - 1) / STRIDE)    // chunks per lane and row (at most)
#define NB ((PER + U - 1) / U)               // batches
#define NROWS (MODE == 2 ? 2 * R : R)        // weight rows per warp
#define GROUPS (NW / WK)                     // row groups per CTA
#define UNITS_PER_CTA (GROUPS * R)
#define NT (NW * 32)                         // threads per CTA
#define K4 (KDIM / 4)                        // float4s per activation column
#define NIT ((K4 + NT - 1) / NT)             // activation float4s per thread and column
#include "cols_common.cuh"  // after NT


__device__ __forceinline__ float lo16(u32 w) { return WKIND == 1 ? h2f(w & 0xffffu) : __uint_as_float(w << 16); }
__device__ __forceinline__ float hi16(u32 w) { return WKIND == 1 ? h2f(w >> 16) : __uint_as_float(w & 0xffff0000u); }

// The 8 weights of a 16-byte chunk as float32, in k order.
__device__ __forceinline__ void unpack8(uint4 w, float* f) {
  f[0] = lo16(w.x); f[1] = hi16(w.x); f[2] = lo16(w.y); f[3] = hi16(w.y);
  f[4] = lo16(w.z); f[5] = hi16(w.z); f[6] = lo16(w.w); f[7] = hi16(w.w);
}

struct Batch { uint4 w[NROWS][U]; };

// Batch b of this lane's chunks of each row (wrow[r]: the row's chunk cbase), zeros past the row or the units.
__device__ __forceinline__ void load_batch(const u32* const* wrow, const bool* ok, int cbase, int b, Batch& bt) {
#pragma unroll
  for (int r = 0; r < NROWS; ++r)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = (b * U + u) * STRIDE;
      bt.w[r][u] = ok[r] && cbase + i < NCH ? ld_stream(wrow[r] + i * 4) : make_uint4(0u, 0u, 0u, 0u);
    }
}

// The GEMV's partials: CG * NROWS a lane, gate and up of a unit together; flat index of acc[q][r].
#define NV (CG * NROWS)
#define PAIR (MODE == 2 ? 2 : 1)
#define KEPT (NV >> splits<NV, PAIR>())
#define NDUP (32 >> splits<NV, PAIR>())
__device__ __forceinline__ constexpr int flat(int q, int r) {
  return MODE == 2 ? 2 * (q * R + r % R) + (r >= R) : q * NROWS + r;
}


extern "C" __global__ void __launch_bounds__(NW * 32) KERNEL_NAME(const Params prm) {
  extern __shared__ __align__(16) unsigned char smem[];  // dynamic: xs4 [CG * 2 * NCH] float4
  float4* xs4 = (float4*)smem;
  __shared__ float ssq_red[NW][CG];
  __shared__ float rstd_s[CG];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int group = warp / WK, wk = warp % WK;
  const int block = blockIdx.x / prm.groups, cgrp = blockIdx.x % prm.groups;  // column groups are neighbours
  const int col0 = cgrp * CG;
  const int unit0 = block * UNITS_PER_CTA + group * R;
  long long rows[NROWS];
  bool ok[NROWS];
#pragma unroll
  for (int r = 0; r < NROWS; ++r) {
    const int u = unit0 + (r % R);
    ok[r] = u < prm.units;
    rows[r] = MODE == 2 && r >= R ? (long long)prm.units + u : (long long)u;
  }
  const int cbase = lane + 32 * wk;
  const u32* wrow[NROWS];
#pragma unroll
  for (int r = 0; r < NROWS; ++r) wrow[r] = prm.w + rows[r] * (KDIM / 2) + cbase * 4;
  Batch cur;
  load_batch(wrow, ok, cbase, 0, cur);  // before the wait: weights do not depend on the previous kernel
  asm volatile("griddepcontrol.wait;" ::: "memory");

  // Stage the CTA's columns (times norm_w), with each column's sum of squares.
  float ssq[CG];
#pragma unroll
  for (int q = 0; q < CG; ++q) ssq[q] = 0.f;
#pragma unroll
  for (int i = 0; i < NIT; ++i) {
    const int k4 = tid + i * NT;
    if (k4 < K4) {
      float4 v[CG];  // every column's loads in flight at once: one L2 round trip per i, not one per column
#pragma unroll
      for (int q = 0; q < CG; ++q) v[q] = __ldcg((const float4*)prm.act + (size_t)(col0 + q) * K4 + k4);
      const float4 n = norm4<NORM_KIND>(prm.norm_w, k4);
#pragma unroll
      for (int q = 0; q < CG; ++q) {
        float4 x = v[q];
        ssq[q] = fmaf(x.w, x.w, fmaf(x.z, x.z, fmaf(x.y, x.y, fmaf(x.x, x.x, ssq[q]))));
        if (NORM_KIND >= 0) { x.x = __fmul_rn(x.x, n.x); x.y = __fmul_rn(x.y, n.y); x.z = __fmul_rn(x.z, n.z); x.w = __fmul_rn(x.w, n.w); }
        xs4[(2 * q + (k4 & 1)) * NCH + (k4 >> 1)] = x;
      }
    }
  }
  if (NORM_KIND >= 0 || MODE == 3) {
    constexpr int S = splits<CG, 1>();
    const int q0 = warp_sums<CG, 1>(ssq, lane);
#pragma unroll
    for (int j = 0; j < (CG >> S); ++j)
      if ((lane & ((32 >> S) - 1)) == j % (32 >> S)) ssq_red[warp][q0 + j] = ssq[j];
  }
  __syncthreads();
  if (NORM_KIND >= 0 && tid < CG) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < NW; ++i) s = __fadd_rn(s, ssq_red[i][tid]);
    rstd_s[tid] = rsqrtf(__fadd_rn(__fdiv_rn(s, (float)KDIM), prm.eps));
  }

  float acc[CG][NROWS];
#pragma unroll
  for (int q = 0; q < CG; ++q)
#pragma unroll
    for (int r = 0; r < NROWS; ++r) acc[q][r] = 0.f;
#pragma unroll 1
  for (int b = 0; b < NB; ++b) {
    Batch nxt;
    if (b + 1 < NB) load_batch(wrow, ok, cbase, b + 1, nxt);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = cbase + (b * U + u) * STRIDE;
      if (c < NCH) {
        float wf[NROWS][8];  // unpacked once, used by every column
#pragma unroll
        for (int r = 0; r < NROWS; ++r) unpack8(cur.w[r][u], wf[r]);
#pragma unroll
        for (int q = 0; q < CG; ++q) {
          const float4 xa = xs4[2 * q * NCH + c], xb = xs4[(2 * q + 1) * NCH + c];
#pragma unroll
          for (int r = 0; r < NROWS; ++r) {  // one fused multiply-add per weight, in k order
            float a = acc[q][r];
            a = fmaf(wf[r][0], xa.x, a); a = fmaf(wf[r][1], xa.y, a); a = fmaf(wf[r][2], xa.z, a);
            a = fmaf(wf[r][3], xa.w, a); a = fmaf(wf[r][4], xb.x, a); a = fmaf(wf[r][5], xb.y, a);
            a = fmaf(wf[r][6], xb.z, a); acc[q][r] = fmaf(wf[r][7], xb.w, a);
          }
        }
      }
    }
    if (b + 1 < NB) cur = nxt;
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  float v[NV];
#pragma unroll
  for (int q = 0; q < CG; ++q)
#pragma unroll
    for (int r = 0; r < NROWS; ++r) v[flat(q, r)] = acc[q][r];
  const int base = warp_sums<NV, PAIR>(v, lane);
  if (WK > 1) {
    __shared__ float red[NW][NV];
#pragma unroll
    for (int j = 0; j < KEPT; ++j)
      if ((lane & (NDUP - 1)) == (j / PAIR) % NDUP) red[warp][base + j] = v[j];
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int j = 0; j < KEPT; ++j) {
        float t = 0.f;
#pragma unroll
        for (int i = 0; i < WK; ++i) t = __fadd_rn(t, red[warp + i][base + j]);
        v[j] = t;
      }
    }
  } else {
    __syncthreads();  // rstd_s
  }
#if MODE == 3
  __shared__ long long keys[CG][UNITS_PER_CTA];
#endif
  if (wk == 0) {
#pragma unroll
    for (int j = 0; j < KEPT; j += PAIR) {
      if ((lane & (NDUP - 1)) != (j / PAIR) % NDUP) continue;  // one lane of the NDUP writes each sum
      const int unit = (base + j) / PAIR, q = unit / R, r = unit % R;
      const int u = unit0 + r;
      const bool in = u < prm.units;
      const float rs = NORM_KIND >= 0 ? rstd_s[q] : 1.f;
#if MODE == 3
      keys[q][group * R + r] = in ? argmax_key(__fmul_rn(v[j], rs), u) : (long long)(-9223372036854775807LL - 1);
#endif
      if (!in) continue;
      float* o = prm.out + (size_t)(col0 + q) * prm.units + u;
      if (MODE == 0 || MODE == 3) {
        float y = NORM_KIND >= 0 ? __fmul_rn(v[j], rs) : v[j];
        if (BIAS_KIND >= 0) y = __fadd_rn(y, any_f32<BIAS_KIND < 0 ? 2 : BIAS_KIND>(prm.bias, u));
        *o = y;
      } else if (MODE == 1) {
        *o = __fadd_rn(__ldcg(o), v[j]);
      } else {
        const float g = __fmul_rn(v[j], rs), up = __fmul_rn(v[MODE == 2 ? j + 1 : j], rs);
        *o = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.f, __expf(-g))), up);
      }
    }
  }
#if MODE == 3
  __syncthreads();
  if (tid < CG) {  // this CTA's vote per column
    long long best = keys[tid][0];
#pragma unroll
    for (int i = 1; i < UNITS_PER_CTA; ++i) best = max(best, keys[tid][i]);
    atomicMax(prm.scratch + col0 + tid, best);
  }
  cols_head_finish(prm, tid);
#endif
}
