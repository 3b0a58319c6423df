// Flag all-reduce of one float32 vector across the ranks of one host (NVLink peer memory; no multicast).
//
// Every rank's partial lives in its own symmetric buffer (src.p[q]: rank q's, mapped here). Each CTA
//   1. waits for the kernel that wrote this rank's partial (griddepcontrol.wait: PDL),
//   2. publishes "rank `rank`'s partial for this reduction is ready" to every peer: a store-release (system
//      scope) of the epoch into the peer's flag slot [blockIdx.x][rank],
//   3. spins (load-acquire, system scope) until every peer's slot [blockIdx.x][q] in its own flags holds
//      at least the epoch,
//   4. sums the partials IN RANK ORDER (every rank gets the same bits) into dst, grid-stride, 4 floats a load,
//      and (next != null) starts this rank's next partial buffer: next = carry ? the sum : 0 (rank 0 carries the
//      residual stream, the others start from zero). next is the buffer the peers read in the previous
//      reduction: each peer published this epoch only after that reduction had completed, so it is free.
// epoch = step[0] * per_step + r + 1: step[0] is a device counter the CUDA graph increments once per decode
// step (so replays need no host work), r this reduction's index within the step. Epochs only grow, so one
// slot per (CTA, peer) suffices: a peer that published a later epoch passed this one.
// A wait that lasts longer than TIMEOUT_NS traps (a dead peer gives an error, not a hang).
#include "common.cuh"

struct SrcPtrs { const float* p[MAX_RANKS]; };
struct FlagPtrs { u64* p[MAX_RANKS]; };

__device__ __forceinline__ void st_release_sys(u64* addr, u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(addr), "l"(v) : "memory");
}
__device__ __forceinline__ u64 ld_acquire_sys(const u64* addr) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_volatile_f4(const float* addr) {
  float4 v;
  asm volatile("ld.volatile.global.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(addr) : "memory");
  return v;
}

extern "C" __global__ void flag_reduce(SrcPtrs src, FlagPtrs flags, float* __restrict__ dst,
                                       float* __restrict__ next, int carry, const u64* __restrict__ step,
                                       int n, int rank, int world, int r, int per_step) {
  asm volatile("griddepcontrol.wait;" ::: "memory");  // this rank's partial (and the step counter) are written
  const u64 epoch = step[0] * (u64)per_step + (u64)r + 1;
  const int q = threadIdx.x;
  const int slot = blockIdx.x * MAX_RANKS;
  if (q < world && q != rank) st_release_sys(flags.p[q] + slot + rank, epoch);
  if (q < world && q != rank) {
    const u64* mine = flags.p[rank] + slot + q;
    if (ld_acquire_sys(mine) < epoch) {
      const u64 t0 = global_ns();
      while (ld_acquire_sys(mine) < epoch) {
        if (global_ns() - t0 > TIMEOUT_NS) __trap();
      }
    }
  }
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4; i < n; i += gridDim.x * blockDim.x * 4) {
    float4 acc = ld_volatile_f4(src.p[0] + i);
    for (int k = 1; k < world; ++k) {
      const float4 v = ld_volatile_f4(src.p[k] + i);
      acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    *reinterpret_cast<float4*>(dst + i) = acc;
    if (next != nullptr) *reinterpret_cast<float4*>(next + i) = carry ? acc : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// The greedy step's distributed argmax, one CTA of ARGMAX_THREADS: this rank's best (value, global id) over
// its vocabulary slice logits[0:n) (ids offset..offset+n, ties to the lowest id), packed in 64 bits, stored
// into every peer's slot slots.p[q][(epoch & 1) * MAX_RANKS + rank], then the epoch (= step[0]: one argmax
// a step, after the step's reductions) published to flags.p[q][rank]; once every peer's epoch is in, the
// best over the ranks (ties to the lowest id: what torch.argmax gives on the whole vector) goes to out[0].
#ifndef ARGMAX_THREADS
#define ARGMAX_THREADS 1024
#endif
#ifndef ARGMAX_BATCH
#define ARGMAX_BATCH 8
#endif
__device__ __forceinline__ bool better(float v, u32 i, float bv, u32 bi) { return v > bv || (v == bv && i < bi); }

extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS) flag_argmax(
    const float* __restrict__ logits, int n, u32 offset, FlagPtrs slots, FlagPtrs flags,
    const u64* __restrict__ step, long long* __restrict__ out, int rank, int world) {
  __shared__ float sv[32];
  __shared__ u32 si[32];
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the logits are written
  float bv = -__int_as_float(0x7f800000);
  u32 bi = 0xffffffffu;
  const int n4 = n & ~3, stride = blockDim.x * 4;
  // ARGMAX_BATCH loads of a thread in flight before it compares any (one L2 round trip per batch, not per load:
  // a 76k-logit slice took ~19 dependent round trips); the thread's elements are compared in the same order.
  for (int i0 = threadIdx.x * 4; i0 < n4; i0 += stride * ARGMAX_BATCH) {
    float4 v[ARGMAX_BATCH];
#pragma unroll
    for (int u = 0; u < ARGMAX_BATCH; ++u) {
      const int i = i0 + u * stride;
      if (i < n4) v[u] = *reinterpret_cast<const float4*>(logits + i);
    }
#pragma unroll
    for (int u = 0; u < ARGMAX_BATCH; ++u) {
      const int i = i0 + u * stride;
      if (i >= n4) break;
      if (better(v[u].x, i, bv, bi)) { bv = v[u].x; bi = i; }
      if (better(v[u].y, i + 1, bv, bi)) { bv = v[u].y; bi = i + 1; }
      if (better(v[u].z, i + 2, bv, bi)) { bv = v[u].z; bi = i + 2; }
      if (better(v[u].w, i + 3, bv, bi)) { bv = v[u].w; bi = i + 3; }
    }
  }
  for (int i = n4 + threadIdx.x; i < n; i += blockDim.x)
    if (better(logits[i], i, bv, bi)) { bv = logits[i]; bi = i; }
  for (int d = 16; d > 0; d >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, d);
    const u32 oi = __shfl_xor_sync(0xffffffffu, bi, d);
    if (better(ov, oi, bv, bi)) { bv = ov; bi = oi; }
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
    if (better(sv[w], si[w], bv, bi)) { bv = sv[w]; bi = si[w]; }
  const u64 epoch = step[0];
  const int base = (int)(epoch & 1) * MAX_RANKS;
  const u64 mine = ((u64)__float_as_uint(bv) << 32) | (u64)(bi + offset);
  for (int q = 0; q < world; ++q) {
    if (q == rank) continue;
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(slots.p[q] + base + rank), "l"(mine) : "memory");
    st_release_sys(flags.p[q] + rank, epoch);
  }
  float gv = 0.f;
  u32 gi = 0xffffffffu;
  for (int q = 0; q < world; ++q) {
    u64 p = mine;
    if (q != rank) {
      const u64* f = flags.p[rank] + q;
      if (ld_acquire_sys(f) < epoch) {
        const u64 t0 = global_ns();
        while (ld_acquire_sys(f) < epoch) {
          if (global_ns() - t0 > TIMEOUT_NS) __trap();
        }
      }
      asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(p) : "l"(slots.p[rank] + base + q) : "memory");
    }
    const float v = __uint_as_float((u32)(p >> 32));
    const u32 i = (u32)p;
    if (q == 0 || better(v, i, gv, gi)) { gv = v; gi = i; }
  }
  out[0] = (long long)gi;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// The fused reduction's last sum of a step (kernels.stream_gemv's Push / ReduceIn, LL words: value bits low,
// epoch high; the LM head reads x): dst = the world slots of this rank's receive buffer (slots: world x n words,
// slot q from rank q) summed in rank order as the fused consumers sum them, each word read until it carries
// epoch = (step[0] - 1) * per_step + use + 1.
__device__ __forceinline__ float ll_value(const u64* p, u32 epoch) {
  u64 v = *(const volatile u64*)p;
  if ((u32)(v >> 32) != epoch) {
    const u64 t0 = global_ns();
    do {
      v = *(const volatile u64*)p;
      if (global_ns() - t0 > TIMEOUT_NS) __trap();
    } while ((u32)(v >> 32) != epoch);
  }
  return __uint_as_float((u32)v);
}

extern "C" __global__ void fused_sum(const u64* slots, const u64* __restrict__ step, float* __restrict__ dst, int n,
                                     int world, int per_step, int use) {
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the step counter is written
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const u32 epoch = (u32)((step[0] - 1) * (u64)per_step + (u64)use + 1);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float acc = ll_value(slots + i, epoch);
    for (int k = 1; k < world; ++k) acc += ll_value(slots + (size_t)k * n + i, epoch);
    dst[i] = acc;
  }
}
