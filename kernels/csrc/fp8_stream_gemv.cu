// Batch-1 GEMVs with FP8 weights streamed through a shared-memory ring (TMA bulk copies) by one persistent CTA
// per SM; launcher, contract and reference: kernels/fp8_stream_gemv.py, which prepends the #defines:
//   MODE 0 rmsnorm_gemv (out = W @ (rmsnorm(x) * norm_w) + bias), 1 residual (out += W @ a), 2 gate_up
//   (out = silu(Wg @ n) * (Wu @ n)); KDIM (K, a multiple of 128); KC columns per ring slot (a multiple of 128;
//   KC == KDIM: a slot holds whole rows); NS ring slots; WKS warps per row pair (they split a slot's chunks:
//   for CTAs of few long rows, down_proj); NORM_KIND / BIAS_KIND
//   (-1 none, 0 bf16, 1 fp16, 2 fp32); EARLY (release the next kernel at the CTA's start instead of after
//   the consumers' PDL wait); PF (the producer prefetches its share of pf into L2 after its copies); MT rows per
//   tile and slot (even, up to 32); NWARP consumer warps (default 8).
// Weights: q [N, K] e4m3 row-major, scale / offset [N, K/32] float32, w = offset + scale * q per group of 32.
// CTA b owns units [b * N / grid, (b + 1) * N / grid) (gate/up: those gate rows, then the same up rows),
// in tiles of MT rows. The producer warp copies each tile slot by slot (MT rows x KC columns of q, and their
// scales and offsets: with KC == KDIM three bulk copies a tile, rows being contiguous; else three a row, each
// lane its rows' copies: small copies issued by one thread made down_proj 1.5x slower) from the kernel's
// start: weights do not depend on the previous kernel. NWARP consumer warps (8 unless the launcher says) wait for the
// previous kernel (PDL), stage the activation once in shared memory (transposed float4s times 2^64 and each
// 16-value chunk's sum, as kernels/csrc/fp8_gemv.cu does). The warps form NWARP / WKS groups; group g takes
// the row pairs g, g + NWARP / WKS, ... of each tile, its WKS warps the 16-byte chunks lane + 32 * (wk + WKS
// * i) of each slot (conflict-free shared loads); the arithmetic is fp8_gemv.cu's CVT path (e4m3x2 -> f16x2
// -> float32, float32 FMAs, the group's scale per chunk, the offset times the chunk's sum); each warp's row
// sums by shuffles into part[row * WKS + wk], added in wk order by the mode's epilogue.
#include "common.cuh"
#include "fp8_common.cuh"
#ifndef NWARP
#define NWARP 8                          // consumer warps
#endif
#define NCONSUMER (NWARP * 32)
#ifndef MT
#define MT 16                            // rows per tile (the launcher's plan: fewer where a CTA has fewer rows)
#endif
#define NCH (KDIM / 16)                  // 16-byte chunks per row
#define KG (KDIM / 32)                   // groups per row
#define QB (MT * KC)                     // e4m3 bytes of a slot
#define SB (MT * (KC / 32) * 4)          // scale (and offset) bytes of a slot
#define STAGE (QB + 2 * SB)
#define YS 5.421010862427522e-20f        // 2^-64

struct Params {  // mirrored by _Params in kernels/fp8_stream_gemv.py
  const unsigned char* q; const float* scale; const float* offset; const float* act; const void* norm_w;
  const void* bias; float* out; const unsigned char* pf; unsigned long long pf_bytes; int units; float eps;
};

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" :: "n"(NCONSUMER) : "memory"); }
// The CTA's units [u0, u0 + nu) and its row segments: rows seg0 .. seg0 + nu - 1 (gate/up: then the up rows
// units + u0 ..), local rows 0 .. nu - 1 (and nu .. 2nu - 1).
__device__ __forceinline__ void unit_range(int units, int& u0, int& nu) {
  u0 = (int)((long long)blockIdx.x * units / gridDim.x);
  nu = (int)((long long)(blockIdx.x + 1) * units / gridDim.x) - u0;
}
#define NSEG (MODE == 2 ? 2 : 1)
#define GROUPS (NWARP / WKS)                  // row-pair groups
#define PP ((MT / 2 + GROUPS - 1) / GROUPS)   // row pairs per warp and tile (at most)
#define NIT ((KDIM / 4 + NCONSUMER - 1) / NCONSUMER)  // activation float4s per consumer thread
#define PRE (NIT < 12 ? NIT : 12)             // of which loaded at once

__device__ __forceinline__ void produce(const Params& prm, unsigned char* ring, u64* full, u64* empty) {
  const int lane = threadIdx.x & 31;
  int u0, nu, s = 0;
  unit_range(prm.units, u0, nu);
  for (int seg = 0; seg < NSEG; ++seg) {
    const long long base = (long long)seg * prm.units + u0;
    for (int t0 = 0; t0 < nu; t0 += MT) {
      const int rows = min(MT, nu - t0);
      const long long r0 = base + t0;
      for (int k0 = 0; k0 < KDIM; k0 += KC, ++s) {
        const int buf = s % NS;
        if (s >= NS) mbar_wait(smem_u32(&empty[buf]), ((s / NS) - 1) & 1);
        const u32 kc = (u32)min(KC, KDIM - k0), fb = smem_u32(&full[buf]);
        unsigned char* slot = ring + (size_t)buf * STAGE;
        if (lane == 0) mbar_expect_tx(fb, (u32)rows * (kc + kc / 4));  // e4m3 + float32 scale and offset per 32
        __syncwarp();
        if (KC == KDIM) {  // whole rows: contiguous in global memory as in the slot
          if (lane == 0) {
            bulk_copy(smem_u32(slot), prm.q + r0 * KDIM, (u32)rows * KDIM, fb);
            bulk_copy(smem_u32(slot + QB), prm.scale + r0 * KG, (u32)rows * KG * 4, fb);
            bulk_copy(smem_u32(slot + QB + SB), prm.offset + r0 * KG, (u32)rows * KG * 4, fb);
          }
        } else {
          for (int r = lane; r < rows; r += 32) {
            bulk_copy(smem_u32(slot + r * KC), prm.q + (r0 + r) * KDIM + k0, kc, fb);
            bulk_copy(smem_u32(slot + QB + r * (KC / 8)), prm.scale + (r0 + r) * KG + k0 / 32, kc / 8, fb);
            bulk_copy(smem_u32(slot + QB + SB + r * (KC / 8)), prm.offset + (r0 + r) * KG + k0 / 32, kc / 8, fb);
          }
        }
      }
    }
  }
#if PF
  // This CTA's share of the next kernel's first weights, into L2, once the ring has taken all its slots
  // (when it held the CTA's whole share) so that the prefetch never queues before its own weights.
  if (prm.pf_bytes > 0 && lane == 0) {
    if (s > 0 && s <= NS) mbar_wait(smem_u32(&full[(s - 1) % NS]), 0);
    l2_prefetch_share(prm.pf, prm.pf_bytes);
  }
#endif
}

__device__ __forceinline__ void consume(const Params& prm, const unsigned char* ring, u64* full, u64* empty,
                                        float4* xs4, float* xsum, float* part, float* red) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int u0, nu, s = 0;
  unit_range(prm.units, u0, nu);
  float4 nw[PRE];  // before the wait: the norm weights do not depend on the previous kernel
  first_norms<NORM_KIND, NIT, PRE, NCONSUMER>(prm.norm_w, KDIM / 4, tid, nw);
  asm volatile("griddepcontrol.wait;" ::: "memory");
#if !EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  // Stage the activation (times the norm weights): fp8_common.cuh's stage_act.
  float ssq = stage_act<NORM_KIND, NIT, PRE, NCONSUMER>((const float4*)prm.act, prm.norm_w, KDIM / 4, NCH, tid, nw, xs4,
                                                       xsum);
  float rstd = 1.f;
  if (NORM_KIND >= 0) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
    if (lane == 0) red[warp] = ssq;
  }
  consumers_sync();
  if (NORM_KIND >= 0) {
    ssq = 0.f;
#pragma unroll
    for (int i = 0; i < NWARP; ++i) ssq += red[i];
    rstd = rsqrtf(ssq / KDIM + prm.eps);
  }
  constexpr int PER = (KC / 16 + 32 * WKS - 1) / (32 * WKS);  // chunks per lane and slot (at most)
  const int grp = warp / WKS, wk = warp % WKS;
  for (int seg = 0; seg < NSEG; ++seg) {
    for (int t0 = 0; t0 < nu; t0 += MT) {
      const int rows = min(MT, nu - t0);
      float as[PP][2], ao[PP][2];  // row pairs grp, grp + GROUPS, ...: scaled sums, offset sums
#pragma unroll
      for (int p = 0; p < PP; ++p) as[p][0] = as[p][1] = ao[p][0] = ao[p][1] = 0.f;
      for (int k0 = 0; k0 < KDIM; k0 += KC, ++s) {
        const int buf = s % NS, nch = min(KC, KDIM - k0) / 16;
        mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
        const unsigned char* slot = ring + (size_t)buf * STAGE;
        const float* sc = (const float*)(slot + QB);
        const float* of = (const float*)(slot + QB + SB);
#pragma unroll
        for (int i = 0; i < PER; ++i) {
          const int c = lane + 32 * (wk + WKS * i);
          if (c < nch && 2 * grp < rows) {
            const int gc = k0 / 16 + c;
            const float4 x0 = xs4[gc], x1 = xs4[NCH + gc], x2 = xs4[2 * NCH + gc], x3 = xs4[3 * NCH + gc];
            const float xt = xsum[gc];
#pragma unroll
            for (int p = 0; p < PP; ++p) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int r = 2 * (grp + GROUPS * p) + h;
                if (r < rows) {
                  const uint4 w = *(const uint4*)(slot + r * KC + c * 16);
                  const float d = dot_word_cvt(w.y, x1, dot_word_cvt(w.x, x0, 0.f)) + dot_word_cvt(w.w, x3, dot_word_cvt(w.z, x2, 0.f));
                  as[p][h] = fmaf(sc[r * (KC / 32) + (c >> 1)], d, as[p][h]);
                  ao[p][h] = fmaf(of[r * (KC / 32) + (c >> 1)], xt, ao[p][h]);
                }
              }
            }
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
      }
#pragma unroll
      for (int p = 0; p < PP; ++p) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float y = fmaf(as[p][h], YS, ao[p][h]);
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) y += __shfl_xor_sync(0xffffffffu, y, o);
          const int r = 2 * (grp + GROUPS * p) + h;
          if (lane == 0 && r < rows) part[(seg * nu + t0 + r) * WKS + wk] = y;
        }
      }
    }
  }
  consumers_sync();
  for (int i = tid; i < nu; i += NCONSUMER) {
    const int u = u0 + i;
    float y = 0.f, v = 0.f;  // the row's sum (gate/up: and its up row's), the WKS warps' parts in order
#pragma unroll
    for (int j = 0; j < WKS; ++j) {
      y += part[i * WKS + j];
      if (MODE == 2) v += part[(nu + i) * WKS + j];
    }
    if (MODE == 0) {
      prm.out[u] = y * rstd + (BIAS_KIND >= 0 ? any_f32<BIAS_KIND < 0 ? 2 : BIAS_KIND>(prm.bias, u) : 0.f);
    } else if (MODE == 1) {
      prm.out[u] = __ldcg(prm.out + u) + y;
    } else {
      const float g = y * rstd;
      prm.out[u] = g / (1.f + __expf(-g)) * (v * rstd);
    }
  }
}

extern "C" __global__ void __launch_bounds__(NCONSUMER + 32, 1) KERNEL_NAME(const Params prm) {
  __shared__ __align__(8) u64 full[NS], empty[NS];
  __shared__ float red[NWARP];
  extern __shared__ __align__(128) unsigned char smem[];  // ring [NS * STAGE], xs4 [4 * NCH], xsum [NCH], part
  float4* xs4 = (float4*)(smem + (size_t)NS * STAGE);
  float* xsum = (float*)(xs4 + 4 * NCH);
  float* part = xsum + NCH;
  const int tid = threadIdx.x;
  if (tid == 0) ring_barriers_init(full, empty, NS, NWARP);
  __syncthreads();
#if EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (tid >= NCONSUMER) {  // the producer warp: no PDL wait (weights do not depend on the previous kernel)
    produce(prm, smem, full, empty);
    return;
  }
  consume(prm, smem, full, empty, xs4, xsum, part, red);
}
