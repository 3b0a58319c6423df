// Batch-1 GEMVs with FP8 weights streamed through a shared-memory ring (TMA bulk copies) by one persistent CTA
// per SM; launcher, contract and reference: kernels/fp8_stream_gemv.py, which prepends the #defines:
//   MODE 0 rmsnorm_gemv (out = W @ (rmsnorm(x) * norm_w) + bias), 1 residual (out += W @ a), 2 gate_up
//   (out = silu(Wg @ n) * (Wu @ n)); KDIM (K, a multiple of 128); KC columns per ring slot (a multiple of 128;
//   KC == KDIM: a slot holds whole rows); NS ring slots; WKS warps per row pair (they split a slot's chunks:
//   for CTAs of few long rows, down_proj); NORM_KIND / BIAS_KIND
//   (-1 none, 0 bf16, 1 fp16, 2 fp32); EARLY (release the next kernel at the CTA's start instead of after
//   the consumers' PDL wait); PF (the producer prefetches its share of pf into L2 after its copies).
// Weights: q [N, K] e4m3 row-major, scale / offset [N, K/32] float32, w = offset + scale * q per group of 32.
// CTA b owns units [b * N / grid, (b + 1) * N / grid) (gate/up: those gate rows, then the same up rows),
// in tiles of MT rows. The producer warp copies each tile slot by slot (MT rows x KC columns of q, and their
// scales and offsets: with KC == KDIM three bulk copies a tile, rows being contiguous; else three a row, each
// lane its rows' copies: small copies issued by one thread made down_proj 1.5x slower) from the kernel's
// start: weights do not depend on the previous kernel. 8 consumer warps wait for the
// previous kernel (PDL), stage the activation once in shared memory (transposed float4s times 2^64 and each
// 16-value chunk's sum, as kernels/csrc/fp8_gemv.cu does). The warps form NWARP / WKS groups; group g takes
// the row pairs g, g + NWARP / WKS, ... of each tile, its WKS warps the 16-byte chunks lane + 32 * (wk + WKS
// * i) of each slot (conflict-free shared loads); the arithmetic is fp8_gemv.cu's CVT path (e4m3x2 -> f16x2
// -> float32, float32 FMAs, the group's scale per chunk, the offset times the chunk's sum); each warp's row
// sums by shuffles into part[row * WKS + wk], added in wk order by the mode's epilogue.
// TC 1: the dot products on tensor cores instead (consume_tc below); each slot row is padded by 16 bytes (rows 16
// bytes apart mod 128: ldmatrix conflict-free), so the producer copies e4m3 rows one by one.
#include "common.cuh"
#include "fp8_common.cuh"
#define NWARP 8
#define NCONSUMER (NWARP * 32)
#define MT 16                            // rows per tile
#define NCH (KDIM / 16)                  // 16-byte chunks per row
#define KG (KDIM / 32)                   // groups per row
#define QROW (TC ? KC + 16 : KC)         // bytes per e4m3 row of a slot
#define QB (MT * QROW)                   // e4m3 bytes of a slot
// float32 scales (and offsets) per row of a slot; TC: padded so that one group's 8 rows r, r + 1, .. fall in
// distinct shared-memory banks (a row stride of 4 x an odd number of words)
#define SROW (TC && (KC / 128) % 2 == 0 ? KC / 32 + 4 : KC / 32)
#define SB (MT * SROW * 4)                // scale (and offset) bytes of a slot
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
#define NPART (TC ? NWARP : WKS)              // partial sums per row (added by the epilogue)

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
        if (KC == KDIM && !TC) {  // whole rows: contiguous in global memory as in the slot
          if (lane == 0) {
            bulk_copy(smem_u32(slot), prm.q + r0 * KDIM, (u32)rows * KDIM, fb);
            bulk_copy(smem_u32(slot + QB), prm.scale + r0 * KG, (u32)rows * KG * 4, fb);
            bulk_copy(smem_u32(slot + QB + SB), prm.offset + r0 * KG, (u32)rows * KG * 4, fb);
          }
        } else {  // row by row (TC: into padded rows)
          for (int r = lane; r < rows; r += 32) {
            bulk_copy(smem_u32(slot + r * QROW), prm.q + (r0 + r) * KDIM + k0, kc, fb);
            bulk_copy(smem_u32(slot + QB + r * SROW * 4), prm.scale + (r0 + r) * KG + k0 / 32, kc / 8, fb);
            bulk_copy(smem_u32(slot + QB + SB + r * SROW * 4), prm.offset + (r0 + r) * KG + k0 / 32, kc / 8, fb);
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

// After the consumers' dot products: each row's NPART parts added in order, then the mode's output.
__device__ __forceinline__ void epilogue(const Params& prm, int u0, int nu, const float* part, float rstd) {
  consumers_sync();
  for (int i = threadIdx.x; i < nu; i += NCONSUMER) {
    const int u = u0 + i;
    float y = 0.f, v = 0.f;  // the row's sum (gate/up: and its up row's), the parts in order
#pragma unroll
    for (int j = 0; j < NPART; ++j) {
      y += part[i * NPART + j];
      if (MODE == 2) v += part[(nu + i) * NPART + j];
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
                  const uint4 w = *(const uint4*)(slot + r * QROW + c * 16);
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
  epilogue(prm, u0, nu, part, rstd);
}

#if TC
// ---- TC 1: the dot products on tensor cores ----------------------------------------------------------------
// The activation (times the norm weights) is scaled by 2^sigma (max |x| into [2^13, 2^14): exact, and clear of
// fp16's range) and split into three fp16 parts, hi + mid + lo = x to ~fp32 precision, staged once as MMA
// B fragments: per 16-column chunk XB = 24 words, lane 4p + q (part p = MMA column p) holding the chunk's
// values 4q .. 4q + 3 as two fp16x2 words. Per slot, warp w takes the 32-column groups w, w + NWARP, ...: one
// ldmatrix.x4 of the tile's 16 rows (each thread: 4 e4m3 of row r and of row r + 8 per 16 columns, columns
// 4q .. 4q + 3), the hardware e4m3x2 -> f16x2 conversion (exact) and two mma.sync m16n8k16 (fp32
// accumulation) give the group's 16 x 3 dot products; each row's group scale multiplies them into the
// thread's sums, lane 4i adds each row's offset times the group's sum of x (fp32, unscaled). At the tile's
// end lane 4i adds hi + mid (its MMA columns 0, 1) and lo (lane 4i + 1's column 2), times 2^-sigma, plus
// the offset sums, into part[row * NWARP + w].
#define XB 24
__device__ __forceinline__ u32 pack_h2(float lo, float hi) {  // two fp16, `lo` in bits 0-15
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// x0, x1 = hi + mid + lo per element (fp16x2 words).
__device__ __forceinline__ void split3h(float x0, float x1, u32& hi, u32& mid, u32& lo) {
  hi = pack_h2(x0, x1);
  x0 -= h2f(hi & 0xffffu); x1 -= h2f(hi >> 16);
  mid = pack_h2(x0, x1);
  lo = pack_h2(x0 - h2f(mid & 0xffffu), x1 - h2f(mid >> 16));
}
// Two e4m3 (bits 0-15 of w, or 16-31 when HI) as an fp16x2 word, the lower byte in the lower half.
template <bool HI> __device__ __forceinline__ u32 e4m3x2_h2(u32 w) {
  u32 r;
  if (HI) asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.rn.f16x2.e4m3x2 %0, h; }" : "=r"(r) : "r"(w));
  else asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.rn.f16x2.e4m3x2 %0, l; }" : "=r"(r) : "r"(w));
  return r;
}
// d[16x8] = a[16x16] (row) * b[16x8] (col) + d, fp16 in, fp32 accumulate
__device__ __forceinline__ void mma_h(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Stage the activation as above, the sum of x over each group of 32 in xsum; returns the RMSNorm's scale (1
// without a norm) and sets unscale = 2^-sigma. Ends with the consumers synchronized.
__device__ __forceinline__ float stage_tc(const Params& prm, const float4 (&nw)[PRE], u32* xb, float* xsum,
                                          float* red, float& unscale) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, n4 = KDIM / 4;
  float4 v[NIT];
#pragma unroll
  for (int i = 0; i < NIT; ++i) {
    const int k4 = tid + i * NCONSUMER;
    v[i] = k4 < n4 ? __ldcg((const float4*)prm.act + k4) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float ssq = 0.f, amax = 0.f;
#pragma unroll
  for (int i = 0; i < NIT; ++i) {
    const int k4 = tid + i * NCONSUMER;
    const bool in = k4 < n4;
    float4 x = v[i];
    ssq += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
    if (NORM_KIND >= 0) {
      const float4 n = i < PRE ? nw[i] : in ? norm4<NORM_KIND>(prm.norm_w, k4) : make_float4(1.f, 1.f, 1.f, 1.f);
      x.x *= n.x; x.y *= n.y; x.z *= n.z; x.w *= n.w;
    }
    v[i] = x;
    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(x.x), fabsf(x.y)), fmaxf(fabsf(x.z), fabsf(x.w))));
    float t = (x.x + x.y) + (x.z + x.w);  // a group's 8 float4s: 8 neighbouring lanes
    t += __shfl_xor_sync(0xffffffffu, t, 1);
    t += __shfl_xor_sync(0xffffffffu, t, 2);
    t += __shfl_xor_sync(0xffffffffu, t, 4);
    if (in && (k4 & 7) == 0) xsum[k4 >> 3] = t;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  }
  if (lane == 0) { red[warp] = ssq; red[NWARP + warp] = amax; }
  consumers_sync();
  ssq = 0.f; amax = 0.f;
#pragma unroll
  for (int i = 0; i < NWARP; ++i) { ssq += red[i]; amax = fmaxf(amax, red[NWARP + i]); }
  const int sigma = amax > 0.f ? max(-120, min(120, 13 - ilogbf(amax))) : 0;
  const float up = __int_as_float((127 + sigma) << 23);
  unscale = __int_as_float((127 - sigma) << 23);
#pragma unroll
  for (int i = 0; i < NIT; ++i) {
    const int k4 = tid + i * NCONSUMER;
    if (k4 < n4) {
      const float4 x = v[i];
      u32 h01, m01, l01, h23, m23, l23;
      split3h(x.x * up, x.y * up, h01, m01, l01);
      split3h(x.z * up, x.w * up, h23, m23, l23);
      u32* p = xb + (k4 >> 2) * XB + (k4 & 3) * 2;  // chunk k4 / 4, lane q = k4 % 4 (+ 4p: part p)
      *(uint2*)p = make_uint2(h01, h23);
      *(uint2*)(p + 8) = make_uint2(m01, m23);
      *(uint2*)(p + 16) = make_uint2(l01, l23);
    }
  }
  consumers_sync();
  return NORM_KIND >= 0 ? rsqrtf(ssq / KDIM + prm.eps) : 1.f;
}

__device__ __forceinline__ void consume_tc(const Params& prm, const unsigned char* ring, u64* full, u64* empty,
                                           u32* xb, float* xsum, float* part, float* red) {
  constexpr int GPS = KC / 32, PER = (GPS + NWARP - 1) / NWARP;  // groups per slot row; per warp and slot
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, q4 = lane & 3;
  int u0, nu, s = 0;
  unit_range(prm.units, u0, nu);
  float4 nw[PRE];  // before the wait: the norm weights do not depend on the previous kernel
  first_norms<NORM_KIND, NIT, PRE, NCONSUMER>(prm.norm_w, KDIM / 4, tid, nw);
  asm volatile("griddepcontrol.wait;" ::: "memory");
#if !EARLY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  float unscale;
  const float rstd = stage_tc(prm, nw, xb, xsum, red, unscale);
  // ldmatrix.x4 addresses: lane l gives row l % 16, bytes 16 * (l / 16) of a group's 32
  const u32 aoff = (lane & 15) * QROW + (lane >> 4) * 16;
  for (int seg = 0; seg < NSEG; ++seg) {
    for (int t0 = 0; t0 < nu; t0 += MT) {
      const int rows = min(MT, nu - t0);
      float acc[4] = {0.f, 0.f, 0.f, 0.f}, off0 = 0.f, off1 = 0.f;
      for (int k0 = 0; k0 < KDIM; k0 += KC, ++s) {
        const int buf = s % NS, ng = min(KC, KDIM - k0) / 32;
        mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
        const unsigned char* slot = ring + (size_t)buf * STAGE;
        const float* sc = (const float*)(slot + QB);
        const float* of = (const float*)(slot + QB + SB);
        const u32 abase = smem_u32(slot) + aoff;
        u32 a[PER][4];
        uint2 b0[PER], b1[PER];
#pragma unroll
        for (int i = 0; i < PER; ++i) {  // all loads first, then the MMAs
          const int j = warp + NWARP * i;
          b0[i] = b1[i] = make_uint2(0u, 0u);
          if (j < ng) {  // warp-uniform
            ldsm4(abase + j * 32, a[i]);
            if (lane < 12) {
              const u32* x = xb + ((k0 >> 4) + 2 * j) * XB + lane * 2;
              b0[i] = *(const uint2*)x;
              b1[i] = *(const uint2*)(x + XB);
            }
          }
        }
#pragma unroll
        for (int i = 0; i < PER; ++i) {
          const int j = warp + NWARP * i;
          if (j < ng) {
            float t[4] = {0.f, 0.f, 0.f, 0.f};
            mma_h(t, e4m3x2_h2<false>(a[i][0]), e4m3x2_h2<false>(a[i][1]), e4m3x2_h2<true>(a[i][0]),
                  e4m3x2_h2<true>(a[i][1]), b0[i].x, b0[i].y);
            mma_h(t, e4m3x2_h2<false>(a[i][2]), e4m3x2_h2<false>(a[i][3]), e4m3x2_h2<true>(a[i][2]),
                  e4m3x2_h2<true>(a[i][3]), b1[i].x, b1[i].y);
            const float s0 = sc[g8 * SROW + j], s1 = sc[(g8 + 8) * SROW + j];
            acc[0] = fmaf(s0, t[0], acc[0]); acc[1] = fmaf(s0, t[1], acc[1]);
            acc[2] = fmaf(s1, t[2], acc[2]); acc[3] = fmaf(s1, t[3], acc[3]);
            if (q4 == 0) {
              const float xg = xsum[(k0 >> 5) + j];
              off0 = fmaf(of[g8 * SROW + j], xg, off0);
              off1 = fmaf(of[(g8 + 8) * SROW + j], xg, off1);
            }
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
      }
      // lane 4i: MMA columns 0, 1 (hi, mid) of rows i and i + 8; lane 4i + 1: column 2 (lo)
      const float lo0 = __shfl_down_sync(0xffffffffu, acc[0], 1), lo1 = __shfl_down_sync(0xffffffffu, acc[2], 1);
      if (q4 == 0) {
        const int r = g8;
        if (r < rows) part[(seg * nu + t0 + r) * NPART + warp] = ((acc[0] + acc[1]) + lo0) * unscale + off0;
        if (r + 8 < rows) part[(seg * nu + t0 + r + 8) * NPART + warp] = ((acc[2] + acc[3]) + lo1) * unscale + off1;
      }
    }
  }
  epilogue(prm, u0, nu, part, rstd);
}
#endif

extern "C" __global__ void __launch_bounds__(NCONSUMER + 32, 1) KERNEL_NAME(const Params prm) {
  __shared__ __align__(8) u64 full[NS], empty[NS];
  __shared__ float red[2 * NWARP];
  // ring [NS * STAGE], then the staged activation: xs4 [4 * NCH], xsum [NCH] (TC: xb [NCH * XB], xsum [KG]), part
  extern __shared__ __align__(128) unsigned char smem[];
#if TC
  u32* xb = (u32*)(smem + (size_t)NS * STAGE);
  float* xsum = (float*)(xb + NCH * XB);
  float* part = xsum + KG;
#else
  float4* xs4 = (float4*)(smem + (size_t)NS * STAGE);
  float* xsum = (float*)(xs4 + 4 * NCH);
  float* part = xsum + NCH;
#endif
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
#if TC
  consume_tc(prm, smem, full, empty, xb, xsum, part, red);
#else
  consume(prm, smem, full, empty, xs4, xsum, part, red);
#endif
}
