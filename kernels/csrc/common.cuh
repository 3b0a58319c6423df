// Helpers shared by the CUDA C kernels of kernels/csrc: integer types, 16-bit values as float32, norm weights by
// four, a warp's sums scattered over its lanes, streamed 16-byte loads, shared-memory addresses, cluster barriers
// and peer loads, mbarriers and weight-ring barriers, bulk copies (TMA), L2 prefetch shares and ldmatrix.
// kernels._cuda_rtc.load_source pastes it where a .cu file includes it.
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
// Tensor parallel (flag_reduce.cu; stream_gemv.cu's fused reduction): ranks at most, and how long a wait for a
// peer may last before it traps (a dead peer gives an error, not a hang); the global timer that measures it.
#ifndef MAX_RANKS
#define MAX_RANKS 8
#endif
#ifndef TIMEOUT_NS
#define TIMEOUT_NS 20000000000ull
#endif
__device__ __forceinline__ u64 global_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ float h2f(u32 bits16) {  // fp16 bits -> float32
  float f; unsigned short h = (unsigned short)bits16; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
template <int KIND> __device__ __forceinline__ float bits16_f32(u32 b) {  // 0 bf16, 1 fp16 (b < 2^16)
  return KIND == 1 ? h2f(b) : __uint_as_float(b << 16);
}
template <int KIND> __device__ __forceinline__ float any_f32(const void* p, int i) {  // 0 bf16, 1 fp16, 2 fp32
  if (KIND == 2) return ((const float*)p)[i];
  return bits16_f32<KIND>(((const unsigned short*)p)[i]);
}
// Norm weights 4k4 .. 4k4+3 as float32, one 8- or 16-byte load (KIND 0 bf16, 1 fp16, 2 fp32; < 0: ones).
template <int KIND> __device__ __forceinline__ float4 norm4(const void* p, int k4) {
  if (KIND == 2) return __ldg((const float4*)p + k4);
  if (KIND < 0) return make_float4(1.f, 1.f, 1.f, 1.f);
  const uint2 b = __ldg((const uint2*)p + k4);
  return make_float4(bits16_f32<KIND>(b.x & 0xffffu), bits16_f32<KIND>(b.x >> 16), bits16_f32<KIND>(b.y & 0xffffu),
                     bits16_f32<KIND>(b.y >> 16));
}
// A warp's N partials per lane summed over its lanes, scattered: splits<N, P>() butterfly stages in which a lane
// keeps half of what it carries and adds its partner's copy of that half (offsets 16, 8, ...), then xor stages
// over the rest. A lane ends with N >> splits values (flat indices base, base + 1, ...), which 32 >> splits lanes
// share. Each sum is the xor tree's, the same bits as every lane adding every value (each stage adds the lane's
// value and its partner's, as before), with far fewer shuffles: 8 partials 12 instead of 40. P values that stay
// on one lane (a unit's gate and up).
template <int N, int P> __host__ __device__ constexpr int splits() {
  int s = 0, m = N;
  while (s < 5 && m % (2 * P) == 0) { m /= 2; ++s; }
  return s;
}

template <int N, int S> __device__ __forceinline__ void split_stage(float* v, int lane, int& base) {
  constexpr int off = 16 >> S, h = (N >> S) / 2;
  const bool hi = lane & off;
#pragma unroll
  for (int j = 0; j < h; ++j) {
    const float send = hi ? v[j] : v[j + h], keep = hi ? v[j + h] : v[j];
    v[j] = keep + __shfl_xor_sync(0xffffffffu, send, off);  // a plain add: the includer's flags, as before
  }
  if (hi) base += h;
}

// The first flat index of the values warp_sums<N, P> leaves to `lane` (known before the sums are).
template <int N, int P> __device__ __forceinline__ int scatter_base(int lane) {
  constexpr int S = splits<N, P>();
  int base = 0;
#pragma unroll
  for (int s = 0; s < S; ++s)
    if (lane & (16 >> s)) base += (N >> s) / 2;
  return base;
}

template <int N, int P> __device__ __forceinline__ int warp_sums(float* v, int lane) {
  constexpr int S = splits<N, P>();
  int base = 0;
  if (S > 0) split_stage<N, 0>(v, lane, base);
  if (S > 1) split_stage<N, 1>(v, lane, base);
  if (S > 2) split_stage<N, 2>(v, lane, base);
  if (S > 3) split_stage<N, 3>(v, lane, base);
  if (S > 4) split_stage<N, 4>(v, lane, base);
#pragma unroll
  for (int off = 16 >> S; off > 0; off >>= 1)
#pragma unroll
    for (int j = 0; j < (N >> S); ++j) v[j] = v[j] + __shfl_xor_sync(0xffffffffu, v[j], off);
  return base;
}

// 16 bytes read once (weights): kept out of L1.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// Thread-block clusters: a barrier of every thread of the cluster, a peer CTA's shared-memory address, loads.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ u32 peer_addr(u32 local, u32 rank) {
  u32 r; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local), "r"(rank)); return r;
}
__device__ __forceinline__ float ld_peer(u32 addr) {
  float v; asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory"); return v;
}
__device__ __forceinline__ float4 ld_peer4(u32 addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr)
               : "memory");
  return v;
}
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
__device__ __forceinline__ void ldsm4(u32 addr, u32* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// This CTA's even share (16-byte units) of the n bytes at p, prefetched into L2 by bulk prefetches of at most
// 32 KB (no completion to wait for): a kernel's weights for the kernel after it.
__device__ __forceinline__ void l2_prefetch_share(const unsigned char* p, unsigned long long n) {
  const unsigned long long share = ((n + gridDim.x - 1) / gridDim.x + 15) & ~15ull;
  const unsigned long long end = min(n, share * (blockIdx.x + 1));
  for (unsigned long long a = share * blockIdx.x; a < end; a += 32768) {
    const u32 bytes = (u32)min(32768ull, end - a);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p + a), "r"(bytes) : "memory");
  }
}
// A weight ring's barriers, by thread 0 (then __syncthreads): full[i] awaits one arrival plus the bulk copies'
// bytes, empty[i] one arrival per consumer warp.
__device__ __forceinline__ void ring_barriers_init(u64* full, u64* empty, int slots, u32 consumer_warps) {
  for (int i = 0; i < slots; ++i) { mbar_init(smem_u32(&full[i]), 1); mbar_init(smem_u32(&empty[i]), consumer_warps); }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
