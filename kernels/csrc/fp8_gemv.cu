// Batch-1 GEMVs with FP8 weights on CUDA cores; launcher, contract and reference: kernels/fp8_cuda_gemv.py,
// which prepends the #defines of a variant:
//   MODE 0 rmsnorm_gemv (out = W @ (rmsnorm(x) * norm_w) + bias), 1 residual (out += W @ a),
//        2 gate_up (out = silu(Wg @ n) * (Wu @ n)); KDIM (K, a multiple of 32); R rows (gate_up: row pairs)
//   per warp; WK warps per row group (they split K); NW warps per CTA; U chunks per row loaded per batch;
//   NORM_KIND / BIAS_KIND (-1 none, 0 bf16, 1 fp16, 2 fp32); EARLY (release the next kernel right after
//   the PDL wait instead of after the main loop); PF (the l2_prefetch span is used); CVT (unpack with the
//   hardware e4m3x2 -> f16x2 conversion instead of integer ops); INT8 (int8 weights: the LM head).
// Weights: q [N, K] e4m3 row-major, scale / offset [N, K/32] float32: w = offset + scale * q per group of 32.
// INT8: q [N, K] int8, scale [N, K/32] float16, no offset: w = scale * q (inference.quant.Int8Weight).
// A lane reads 16-byte chunks (half a group: 4 words) of its rows, chunk c = lane + 32 * (wk + WK * i);
// batches of U chunks per row are in registers, the first issued before the PDL wait (weights do not depend
// on the previous kernel). The activation is staged once per CTA in shared memory, transposed so that word j
// of chunk c (x[16c + 4j .. 16c + 4j + 3]) sits at xs4[j * NCH + c]: the lanes of a warp read consecutive
// float4s (no bank conflicts); xsum[c] holds the sum of chunk c's 16 values (the offsets' share). Each e4m3
// byte becomes a float32 with integer ops only: shifted to the top byte, arithmetic shift right by 4, masked
// (sign to bit 31, the 7 exponent/mantissa bits to bits 26..20): the e4m3 value times 2^-120, exactly
// (e4m3 subnormals become float32 subnormals: compiled without flush-to-zero). The staged activation is
// multiplied by XS = 2^64 so that products stay clear of the float32 subnormal range; a row's sum is
//   y = YS * sum_chunks(scale * sum(q' * x')) + sum_chunks(offset * xsum),   q' = q * 2^-120, x' = x * 2^64,
// YS = 2^56 (with CVT q' = q and YS = 2^-64)
// then (norm modes) times rstd. Warp shuffles reduce the lanes, shared memory the WK warps of a row group.
#include "common.cuh"
#include "fp8_common.cuh"
#define NCH (KDIM / 16)                   // 16-byte chunks per row
#define KG (KDIM / 32)                       // groups per row
#define STRIDE (32 * WK)                     // chunk stride of a lane
#define PER ((NCH + STRIDE - 1) / STRIDE)    // chunks per lane and row (at most)
#define NB ((PER + U - 1) / U)               // batches
#define NROWS (MODE == 2 ? 2 * R : R)        // weight rows per warp
#define GROUPS (NW / WK)                     // row groups per CTA
#define UNITS_PER_CTA (GROUPS * R)
#define NT (NW * 32)                         // threads per CTA
#define NIT ((KDIM / 4 + NT - 1) / NT)        // activation float4s per thread
#define PRE (NIT < 8 ? NIT : 8)              // of which loaded at once

struct Params {  // mirrored by _Params in kernels/fp8_cuda_gemv.py
  const unsigned char* q; const float* scale; const float* offset; const float* act; const void* norm_w;
  const void* bias; float* out; const unsigned char* pf; unsigned long long pf_bytes; int units; float eps;
};

#ifndef INT8
#define INT8 0
#endif

#if INT8
// int8 byte J of word w as float32, exactly: with its sign bit flipped (b + 128) as the low byte of 2^23's
// mantissa, minus 2^23 + 128: one byte permute and one add a weight.
#define YS 5.421010862427522e-20f            // 2^-64
template <int J> __device__ __forceinline__ float int8_f32(u32 v) {
  return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7540 | J)) - 8388736.f;
}
__device__ __forceinline__ float dot_word(u32 w, float4 x, float acc) {
  const u32 v = w ^ 0x80808080u;
  acc = fmaf(int8_f32<0>(v), x.x, acc);
  acc = fmaf(int8_f32<1>(v), x.y, acc);
  acc = fmaf(int8_f32<2>(v), x.z, acc);
  return fmaf(int8_f32<3>(v), x.w, acc);
}
#elif CVT
// The hardware conversion instead: e4m3x2 -> f16x2 (exact), each half -> float32; the value itself.
#define YS 5.421010862427522e-20f            // 2^-64
__device__ __forceinline__ float dot_word(u32 w, float4 x, float acc) { return dot_word_cvt(w, x, acc); }
#else
#define YS 7.205759403792794e16f             // 2^120 / 2^64
// Byte J of word w (an e4m3 value) as float32 times 2^-120.
template <int J> __device__ __forceinline__ float e4m3(u32 w) {
  const int t = J == 3 ? (int)w : (int)(w << (24 - 8 * J));
  return __uint_as_float((u32)(t >> 4) & 0x87F00000u);
}
__device__ __forceinline__ float dot_word(u32 w, float4 x, float acc) {
  acc = fmaf(e4m3<0>(w), x.x, acc);
  acc = fmaf(e4m3<1>(w), x.y, acc);
  acc = fmaf(e4m3<2>(w), x.z, acc);
  return fmaf(e4m3<3>(w), x.w, acc);
}
#endif

// The weight rows of slot r of this warp (gate_up: slots R.. are the up rows of slots 0..R-1).
__device__ __forceinline__ long long slot_row(const Params& prm, int unit0, int r, bool& ok) {
  const int u = unit0 + (r % R);
  ok = u < prm.units;
  return MODE == 2 && r >= R ? (long long)prm.units + u : (long long)u;
}

struct Batch { uint4 w[NROWS][U]; float s[NROWS][U], o[NROWS][U]; };

// Chunks c0, c0 + STRIDE, ... of the rows.
__device__ __forceinline__ void load_batch(const Params& prm, const long long* rows, const bool* ok, int c0,
                                           Batch& b) {
#pragma unroll
  for (int r = 0; r < NROWS; ++r)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * STRIDE;
      if (ok[r] && c < NCH) {
        b.w[r][u] = ld_stream(prm.q + rows[r] * KDIM + c * 16);
#if INT8
        b.s[r][u] = h2f(__ldg((const unsigned short*)prm.scale + rows[r] * KG + (c >> 1)));
        b.o[r][u] = 0.f;
#else
        b.s[r][u] = __ldg(prm.scale + rows[r] * KG + (c >> 1));
        b.o[r][u] = __ldg(prm.offset + rows[r] * KG + (c >> 1));
#endif
      } else {
        b.w[r][u] = make_uint4(0u, 0u, 0u, 0u);
        b.s[r][u] = 0.f;
        b.o[r][u] = 0.f;
      }
    }
}

extern "C" __global__ void __launch_bounds__(NW * 32) KERNEL_NAME(const Params prm) {
  extern __shared__ __align__(16) unsigned char smem[];  // dynamic: xs4 [4 * NCH] float4, xsum [NCH] float
  float4* xs4 = (float4*)smem;
  float* xsum = (float*)(smem + 64 * NCH);
  __shared__ float red[NW][NROWS];
  __shared__ float ssq_red[NW];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int group = warp / WK, wk = warp % WK;
  const int unit0 = blockIdx.x * UNITS_PER_CTA + group * R;
  long long rows[NROWS];
  bool ok[NROWS];
#pragma unroll
  for (int r = 0; r < NROWS; ++r) rows[r] = slot_row(prm, unit0, r, ok[r]);
  const int cbase = lane + 32 * wk;
  Batch cur;
  load_batch(prm, rows, ok, cbase, cur);  // before the wait: weights do not depend on the previous kernel
  float bias[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    bias[r] = BIAS_KIND >= 0 && ok[r] ? any_f32<BIAS_KIND < 0 ? 2 : BIAS_KIND>(prm.bias, (int)rows[r]) : 0.f;
  float4 nw[PRE];  // the norm weights of this thread's first activation float4s (weights too: before the wait)
  first_norms<NORM_KIND, NIT, PRE, NT>(prm.norm_w, KDIM / 4, tid, nw);
  asm volatile("griddepcontrol.wait;" ::: "memory");
#if EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  // Stage the activation (times the norm weights): fp8_common.cuh's stage_act.
  float ssq = stage_act<NORM_KIND, NIT, PRE, NT>((const float4*)prm.act, prm.norm_w, KDIM / 4, NCH, tid, nw, xs4, xsum);
  if (NORM_KIND >= 0) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
    if (lane == 0) ssq_red[warp] = ssq;
  }
  __syncthreads();
  float rstd = 1.f;
  if (NORM_KIND >= 0) {
    ssq = 0.f;
#pragma unroll
    for (int i = 0; i < NW; ++i) ssq += ssq_red[i];
    rstd = rsqrtf(ssq / KDIM + prm.eps);
  }
  float acc_s[NROWS], acc_o[NROWS];
#pragma unroll
  for (int r = 0; r < NROWS; ++r) acc_s[r] = acc_o[r] = 0.f;
#pragma unroll 1
  for (int b = 0; b < NB; ++b) {
    Batch nxt;
    if (b + 1 < NB) load_batch(prm, rows, ok, cbase + (b + 1) * U * STRIDE, nxt);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = cbase + (b * U + u) * STRIDE;
      if (c < NCH) {
        const float4 x0 = xs4[c], x1 = xs4[NCH + c], x2 = xs4[2 * NCH + c], x3 = xs4[3 * NCH + c];
        const float xt = xsum[c];
#pragma unroll
        for (int r = 0; r < NROWS; ++r) {
          const uint4 w = cur.w[r][u];
          const float d = dot_word(w.y, x1, dot_word(w.x, x0, 0.f));
          const float e = dot_word(w.w, x3, dot_word(w.z, x2, 0.f));
          acc_s[r] = fmaf(cur.s[r][u], d + e, acc_s[r]);
          if (!INT8) acc_o[r] = fmaf(cur.o[r][u], xt, acc_o[r]);
        }
      }
    }
    if (b + 1 < NB) cur = nxt;
  }
#if PF
  if (tid == 0 && prm.pf_bytes > 0) l2_prefetch_share(prm.pf, prm.pf_bytes);  // the next kernel's first weights
#endif
#if !EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  float y[NROWS];
#pragma unroll
  for (int r = 0; r < NROWS; ++r) {
    y[r] = fmaf(acc_s[r], YS, acc_o[r]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) y[r] += __shfl_xor_sync(0xffffffffu, y[r], o);
  }
  bool writer = lane == 0;
  if (WK > 1) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < NROWS; ++r) red[warp][r] = y[r];
    }
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int r = 0; r < NROWS; ++r) {
        float t = 0.f;
#pragma unroll
        for (int i = 0; i < WK; ++i) t += red[warp + i][r];
        y[r] = t;
      }
    }
    writer = writer && wk == 0;
  }
  if (writer) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (!ok[r]) continue;
      const int u = unit0 + r;
      if (MODE == 0) {
        prm.out[u] = y[r] * rstd + bias[r];
      } else if (MODE == 1) {
        prm.out[u] = __ldcg(prm.out + u) + y[r];
      } else {
        const float g = y[r] * rstd, v = y[r + (MODE == 2 ? R : 0)] * rstd;
        prm.out[u] = g / (1.f + __expf(-g)) * v;
      }
    }
  }
}
