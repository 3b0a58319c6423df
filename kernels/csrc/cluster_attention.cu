// Decode attention with thread-block clusters; launcher, contract and reference: kernels/cluster_attention.py,
// which prepends the #defines of a variant (G, HQ, HKV, CLUSTER, MIN_CHUNK, CACHE_HALF, NORM_KIND, EARLY).
#include "common.cuh"
#define D 128
#define NT 256
#define TILE 64
#define NBUF 2
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float cache_f32(u32 bits16) {
#if CACHE_HALF
  float f; unsigned short h = (unsigned short)bits16; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
  return __uint_as_float(bits16 << 16);
#endif
}
__device__ __forceinline__ float lo_f32(u32 w) {
#if CACHE_HALF
  return cache_f32(w & 0xffffu);
#else
  return __uint_as_float(w << 16);
#endif
}
__device__ __forceinline__ float hi_f32(u32 w) {
#if CACHE_HALF
  return cache_f32(w >> 16);
#else
  return __uint_as_float(w & 0xffff0000u);
#endif
}
__device__ __forceinline__ u16 to_cache(float f) {
  unsigned short h;
#if CACHE_HALF
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#endif
  return h;
}
__device__ __forceinline__ float norm_w(const void* p, int i) {
#if NORM_KIND == 2
  return ((const float*)p)[i];
#elif NORM_KIND == 1
  float f; unsigned short h = ((const unsigned short*)p)[i]; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
  return __uint_as_float(((u32)((const unsigned short*)p)[i]) << 16);
#endif
}
__device__ __forceinline__ float ex2(float x) { float y; asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ u32 smem_addr(const void* p) {
  u32 a; asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p)); return a;
}
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_prev() { asm volatile("cp.async.wait_group %0;" :: "n"(NBUF - 1) : "memory"); }
// Remote stores that count their bytes on the receiving CTA's mbarrier (no cluster barrier needed).
__device__ __forceinline__ void st_async4(u32 addr, float4 v, u32 bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(addr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar) : "memory");
}
__device__ __forceinline__ void st_async2(u32 addr, float a, float b, u32 bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
               :: "r"(addr), "f"(a), "f"(b), "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait_cluster(u32 bar, u32 parity) {
  u32 done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ float ld_cg(const float* p) {
  float v; asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ int ticket_add(int* p) {
  int old; asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(p) : "memory"); return old;
}
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
#if CACHE_HALF
#define MMA_T "f16"
#else
#define MMA_T "bf16"
#endif
__device__ __forceinline__ u32 pack2(float lo, float hi) {  // two 16-bit values, `lo` in bits 0-15
  u32 r;
#if CACHE_HALF
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}
// x = hi + lo, both 16-bit: two 16-bit MMAs give ~16 mantissa bits of the fp32 product.
__device__ __forceinline__ void split2(float x0, float x1, u32& hi, u32& lo) {
  hi = pack2(x0, x1);
  lo = pack2(x0 - lo_f32(hi), x1 - hi_f32(hi));
}
__device__ __forceinline__ void ldsm4_t(u32 addr, u32* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// d[16x8] += a[16x16] (row) * b[16x8] (col), fp32 accumulate
__device__ __forceinline__ void mma(float* d, const u32* a, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_T "." MMA_T ".f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// element offset of (row, 16-byte chunk) in a swizzled [rows][D] 16-bit tile: conflict-free
// for cp.async writes and for ldmatrix reads of 8 consecutive rows at one chunk
__device__ __forceinline__ int swz(int row, int chunk) { return row * D + ((chunk ^ (row & 7)) << 3); }

// smem layout (bytes): K/V tiles [NBUF][2][TILE][D] 16-bit, 16-byte chunks swizzled (swz), then fp32
// and 16-bit scratch (sizes mirrored by smem_bytes() in Python)
#define KV_BYTES (NBUF * 2 * TILE * D * 2)
#define PS 72  // row stride (elements) of the P tiles: 144 bytes, conflict-free for ldmatrix
#define PER (G * D / CLUSTER)  // outputs merged per CTA

extern "C" __global__ void __launch_bounds__(NT, 2) attn_cluster(
    const float* __restrict__ qkv, const int* __restrict__ pos_ptr, u16* __restrict__ k_cache,
    u16* __restrict__ v_cache, const float* __restrict__ cos_t, const float* __restrict__ sin_t,
    const void* __restrict__ q_norm, const void* __restrict__ k_norm, float* __restrict__ ws_m,
    float* __restrict__ ws_l, float* __restrict__ ws_acc, int* __restrict__ cnt, float* __restrict__ out,
    int t_max, int S, float qk_scale, float eps)
{
  extern __shared__ __align__(128) unsigned char smem[];
  u16* kv_s = (u16*)smem;
  float* q_s = (float*)(smem + KV_BYTES);   // [8][D], pre-scaled by qk_scale (log2 domain); rows >= G zero
  float* knew_s = q_s + 8 * D;              // [D] new k (normed, rotated), fp32
  float* vnew_s = knew_s + D;               // [D] new v
  float* red_s = vnew_s + D;                // [4][8] per-warp maxima of the current tile
  float* lsum_s = red_s + 32;               // [4][8] per-warp sums after the loop
  float* snew_s = lsum_s + 32;              // [8] score of the new row
  float* mrun_s = snew_s + 8;               // [8] running max after the loop
  float* part_acc = mrun_s + 8;             // [G][D] unnormalised output
  int* flag_s = (int*)(part_acc + G * D);   // [4]: [0..1] the mbarrier counting pushed bytes, [2] flag
  float* rcv_acc = (float*)(flag_s + 4);    // [CLUSTER][PER] the peers' partials pushed here: accumulators
  float* rcv_ml = rcv_acc + G * D;          // [CLUSTER][8][2] (max, sum) per head
  u16* phi_s = (u16*)(rcv_ml + CLUSTER * 16);  // [8][PS] probabilities of the tile, 16-bit high part
  u16* plo_s = phi_s + 8 * PS;              // [8][PS] remainder
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Clusters are numbered kv head fastest, so the first clusters of every head (the only active
  // ones at short context) are dispatched first.
  const u32 rank = (u32)(blockIdx.x % CLUSTER);
  const int kvh = (blockIdx.x / CLUSTER) % HKV, cluster_id = blockIdx.x / CLUSTER / HKV;
  const int split = cluster_id * CLUSTER + (int)rank;
  const int pos = *pos_ptr;  // final before this step's launches began (written by the previous step)
  const int n_ctx = pos + 1;
  int chunk = (n_ctx + S - 1) / S;
  chunk = (chunk + TILE - 1) / TILE * TILE;
  if (chunk < MIN_CHUNK) chunk = MIN_CHUNK;
  const int n_active = (n_ctx + chunk - 1) / chunk;
  if (cluster_id * CLUSTER >= n_active) return;  // the whole cluster is past the context
  // Peers push their partials into this CTA's shared memory later, counted on rbar: the barrier's
  // wait (before the first push) guarantees that every CTA has started and initialised its rbar.
  const u32 rbar = smem_addr(flag_s);
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(rbar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(rbar), "r"((u32)(CLUSTER * (PER + 2 * G) * 4)) : "memory");
  }
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  const int n_clusters = (n_active + CLUSTER - 1) / CLUSTER;
  const int start = split * chunk;
  const int end = min(start + chunk, n_ctx);
  const int end_old = min(end, pos);
  const int n_rows = max(end_old - start, 0);
  const int n_tiles = (n_rows + TILE - 1) / TILE;
  const bool owner = start <= pos && pos < end;
  const size_t cache_off = (size_t)kvh * t_max * D;
  const u16* kb = k_cache + cache_off;
  const u16* vb = v_cache + cache_off;

  // Copy tile `t` (rows start + t*TILE ...) into buffer t % NBUF; one commit group per call.
  #define ISSUE(t) do { \
    if ((t) < n_tiles) { \
      u16* dk = kv_s + ((t) % NBUF) * 2 * TILE * D; u16* dv = dk + TILE * D; \
      const int row0 = start + (t) * TILE; \
      for (int i = tid; i < TILE * (D / 8); i += NT) { \
        const int r = i >> 4, c = i & 15; \
        const bool ok = row0 + r < end_old; \
        const size_t src = (size_t)(ok ? row0 + r : start) * D + c * 8; \
        cp_async16(smem_addr(dk + swz(r, c)), kb + src, ok ? 16 : 0); \
        cp_async16(smem_addr(dv + swz(r, c)), vb + src, ok ? 16 : 0); \
      } \
    } \
    cp_async_commit(); \
  } while (0)

#if EARLY
  pdl_trigger();  // the next kernel may launch now: its CTAs load their weights while this one runs
#endif
  for (int t = 0; t < NBUF; ++t) ISSUE(t);
  // RoPE and norm weights for the dims this lane rotates: l, l+32 (first half) and l+64, l+96.
  const float c0 = cos_t[(size_t)pos * (D / 2) + lane], c1 = cos_t[(size_t)pos * (D / 2) + lane + 32];
  const float s0 = sin_t[(size_t)pos * (D / 2) + lane], s1 = sin_t[(size_t)pos * (D / 2) + lane + 32];

  for (int i = G * D + tid; i < 8 * D; i += NT) q_s[i] = 0.f;  // padding heads of the MMAs

  pdl_wait();  // qkv is written by the previous kernel

  for (int h = warp; h <= G; h += NT / 32) {  // G query heads, then (h == G) the new k
    const float* src = qkv + (size_t)(h < G ? kvh * G + h : HQ + kvh) * D;
    float x0 = src[lane], x1 = src[lane + 32], x2 = src[lane + 64], x3 = src[lane + 96];
#if HAS_NORM
    float ss = x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3;
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float rstd = rsqrtf(ss / D + eps);
    const void* w = h < G ? q_norm : k_norm;
    x0 *= rstd * norm_w(w, lane); x1 *= rstd * norm_w(w, lane + 32);
    x2 *= rstd * norm_w(w, lane + 64); x3 *= rstd * norm_w(w, lane + 96);
#endif
    const float y0 = x0 * c0 - x2 * s0, y2 = x2 * c0 + x0 * s0;
    const float y1 = x1 * c1 - x3 * s1, y3 = x3 * c1 + x1 * s1;
    float* dst = h < G ? q_s + h * D : knew_s;
    const float sc = h < G ? qk_scale : 1.0f;
    dst[lane] = y0 * sc; dst[lane + 32] = y1 * sc; dst[lane + 64] = y2 * sc; dst[lane + 96] = y3 * sc;
  }
  if (tid < D) vnew_s[tid] = qkv[(size_t)(HQ + HKV + kvh) * D + tid];
  __syncthreads();
  if (owner) {  // append the new row; nobody in this launch reads row pos from the cache
    if (tid < D) {
      k_cache[cache_off + (size_t)pos * D + tid] = to_cache(knew_s[tid]);
      v_cache[cache_off + (size_t)pos * D + tid] = to_cache(vnew_s[tid]);
    }
    if (warp < G) {  // score of the new row, fp32
      float a = 0.f;
      for (int i = lane; i < D; i += 32) a += q_s[warp * D + i] * knew_s[i];
      for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
      if (lane == 0) snew_s[warp] = a;
    }
  }

  // Main loop on tensor cores (m16n8k16, fp32 accumulate), per 64-row tile:
  //   S^T[rows x 8 heads] = K[rows x D] q^T   warps 0-3, 16 rows each; q = q_hi + q_lo (two MMAs)
  //   online softmax per head (max over the 4 warps through smem), P = p_hi + p_lo to smem
  //   O^T[D x 8 heads] += V^T P^T             all 8 warps, 16 dims each; two MMAs per step
  // Fragment owners: lane = 4 * gr + c holds heads 2c, 2c+1 and rows (or dims) gr, gr + 8.
  const int gr = lane >> 2, c = lane & 3;
  u32 qh[8][2], ql[8][2];
  if (warp < 4) {
    #pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const float* qr = q_s + gr * D + 16 * ks + 2 * c;
      split2(qr[0], qr[1], qh[ks][0], ql[ks][0]);
      split2(qr[8], qr[9], qh[ks][1], ql[ks][1]);
    }
  }
  float m_run0 = NEG_INF, m_run1 = NEG_INF, l0 = 0.f, l1 = 0.f;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};  // O^T: (dim 16w+gr, head 2c), (.., 2c+1), (dim +8, 2c), (.., 2c+1)
  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait_prev();
    __syncthreads();
    const u16* kt = kv_s + (t % NBUF) * 2 * TILE * D;
    const u16* vt = kt + TILE * D;
    float s[4];
    if (warp < 4) {
      float sa[4] = {0.f, 0.f, 0.f, 0.f}, sb[4] = {0.f, 0.f, 0.f, 0.f};
      const int i = lane >> 3, row = 16 * warp + (lane & 7) + 8 * (i & 1);
      #pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        u32 a[4];
        ldsm4(smem_addr(kt + swz(row, 2 * ks + (i >> 1))), a);
        mma(sa, a, qh[ks][0], qh[ks][1]);
        mma(sb, a, ql[ks][0], ql[ks][1]);
      }
      const int base = start + t * TILE + 16 * warp + gr;
      const bool v0 = base < end_old, v1 = base + 8 < end_old;
      s[0] = v0 ? sa[0] + sb[0] : NEG_INF; s[1] = v0 ? sa[1] + sb[1] : NEG_INF;
      s[2] = v1 ? sa[2] + sb[2] : NEG_INF; s[3] = v1 ? sa[3] + sb[3] : NEG_INF;
      float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
      #pragma unroll
      for (int o = 4; o < 32; o <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
      }
      if (gr == 0) { red_s[warp * 8 + 2 * c] = mx0; red_s[warp * 8 + 2 * c + 1] = mx1; }
    }
    __syncthreads();
    const float mt0 = fmaxf(fmaxf(red_s[2 * c], red_s[8 + 2 * c]), fmaxf(red_s[16 + 2 * c], red_s[24 + 2 * c]));
    const float mt1 = fmaxf(fmaxf(red_s[2 * c + 1], red_s[9 + 2 * c]), fmaxf(red_s[17 + 2 * c], red_s[25 + 2 * c]));
    const float mn0 = fmaxf(m_run0, mt0), mn1 = fmaxf(m_run1, mt1);
    const float al0 = ex2(m_run0 - mn0), al1 = ex2(m_run1 - mn1);
    m_run0 = mn0; m_run1 = mn1;
    if (warp < 4) {
      const float p0 = ex2(s[0] - mn0), p1 = ex2(s[1] - mn1), p2 = ex2(s[2] - mn0), p3 = ex2(s[3] - mn1);
      l0 = l0 * al0 + p0 + p2;
      l1 = l1 * al1 + p1 + p3;
      const int r0 = 16 * warp + gr, h0 = 2 * c;
      const float pv[4] = {p0, p1, p2, p3};
      #pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int idx = (h0 + (k & 1)) * PS + r0 + 8 * (k >> 1);
        const u16 hi = to_cache(pv[k]);
        phi_s[idx] = hi;
        plo_s[idx] = to_cache(pv[k] - cache_f32(hi));
      }
    }
    __syncthreads();
    acc[0] *= al0; acc[1] *= al1; acc[2] *= al0; acc[3] *= al1;
    {
      const int i = lane >> 3;
      #pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        u32 a[4], b[4];
        ldsm4_t(smem_addr(vt + swz(16 * ks + (lane & 7) + 8 * (i >> 1), 2 * warp + (i & 1))), a);
        ldsm4(smem_addr((i >> 1 ? plo_s : phi_s) + (lane & 7) * PS + 16 * ks + 8 * (i & 1)), b);
        mma(acc, a, b[0], b[1]);
        mma(acc, a, b[2], b[3]);
      }
    }
    __syncthreads();
    ISSUE(t + NBUF);
  }
#if !EARLY
  pdl_trigger();  // only the epilogue and the combine are left
#endif

  // This CTA's partial: row sums over the QK warps, the new row merged in fp32 (owner), in smem.
  if (warp < 4) {
    #pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, o);
      l1 += __shfl_xor_sync(0xffffffffu, l1, o);
    }
    if (gr == 0) { lsum_s[warp * 8 + 2 * c] = l0; lsum_s[warp * 8 + 2 * c + 1] = l1; }
  }
  if (tid < 4) { mrun_s[2 * c] = m_run0; mrun_s[2 * c + 1] = m_run1; }
  {
    const int d0 = 16 * warp + gr, h0 = 2 * c;
    if (h0 < G) { part_acc[h0 * D + d0] = acc[0]; part_acc[h0 * D + d0 + 8] = acc[2]; }
    if (h0 + 1 < G) { part_acc[(h0 + 1) * D + d0] = acc[1]; part_acc[(h0 + 1) * D + d0 + 8] = acc[3]; }
  }
  __syncthreads();
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  // Push this CTA's partial to the CTAs that merge it (CTA j merges outputs [j*PER, (j+1)*PER)) with
  // remote stores counted on the receiver's rbar: no reply, no cluster barrier; each CTA then merges
  // from its own shared memory once its 16 peers' bytes are in.
  for (int o = 4 * tid; o < G * D; o += 4 * NT) {  // 4 outputs of one head per thread (PER % 4 == 0)
    const int g = o / D, d = o % D;
    float4 a = *(const float4*)(part_acc + o);
    if (owner) {
      const float m = mrun_s[g], sn = snew_s[g], mn = fmaxf(m, sn), al = ex2(m - mn), b = ex2(sn - mn);
      a.x = a.x * al + b * vnew_s[d]; a.y = a.y * al + b * vnew_s[d + 1];
      a.z = a.z * al + b * vnew_s[d + 2]; a.w = a.w * al + b * vnew_s[d + 3];
    }
    const u32 dst = o / PER;
    st_async4(peer_addr(smem_addr(rcv_acc + rank * PER + o % PER), dst), a, peer_addr(rbar, dst));
  }
  for (int t = tid; t < CLUSTER * G; t += NT) {  // head g's (max, sum) to every CTA
    const int dst = t / G, g = t % G;
    float l = lsum_s[g] + lsum_s[8 + g] + lsum_s[16 + g] + lsum_s[24 + g];
    float m = mrun_s[g];
    if (owner) {
      const float sn = snew_s[g], mn = fmaxf(m, sn), al = ex2(m - mn), b = ex2(sn - mn);
      l = l * al + b; m = mn;
    }
    st_async2(peer_addr(smem_addr(rcv_ml + (rank * 8 + g) * 2), dst), m, l, peer_addr(rbar, dst));
  }
  mbar_wait_cluster(rbar, 0);

  // Each CTA of the cluster merges its 1/CLUSTER slice of the G*D outputs.
  const int ncl = S / CLUSTER;
  for (int i = tid; i < PER; i += NT) {
    const int o = rank * PER + i, g = o / D, d = o % D;
    float M = NEG_INF, L = 0.f, A = 0.f;
    #pragma unroll
    for (int c = 0; c < CLUSTER; ++c) M = fmaxf(M, rcv_ml[(c * 8 + g) * 2]);
    #pragma unroll
    for (int c = 0; c < CLUSTER; ++c) {
      const float w = ex2(rcv_ml[(c * 8 + g) * 2] - M);
      L += w * rcv_ml[(c * 8 + g) * 2 + 1]; A += w * rcv_acc[c * PER + i];
    }
    if (n_clusters == 1) {
      out[(size_t)(kvh * G + g) * D + d] = A / L;
    } else {  // publish this cluster's merged partial
      const size_t hrow = (size_t)(kvh * G + g) * ncl;
      ws_acc[(hrow + cluster_id) * D + d] = A;
      if (d == 0) { ws_m[hrow + cluster_id] = M; ws_l[hrow + cluster_id] = L; }
    }
  }
  if (n_clusters == 1) {  // nobody reads a peer's shared memory after the barrier
    return;
  }
  // Several clusters: the last cluster to draw a ticket merges all clusters' partials.
  __threadfence();
  cluster_sync();
  if (rank == 0 && tid == 0) {
    const int t = ticket_add(cnt + kvh);
    const int last = t == n_clusters - 1;
    if (last) cnt[kvh] = 0;  // ready for the next launch
    flag_s[2] = last;
  }
  cluster_sync();
  if (__float_as_int(ld_peer(peer_addr(smem_addr(flag_s + 2), 0)))) {
    for (int i = tid; i < PER; i += NT) {
      const int o = rank * PER + i, g = o / D, d = o % D;
      const size_t hrow = (size_t)(kvh * G + g) * ncl;
      float M2 = NEG_INF, L2 = 0.f, A2 = 0.f;
      for (int c = 0; c < n_clusters; ++c) {
        const float m = ld_cg(ws_m + hrow + c), l = ld_cg(ws_l + hrow + c), a = ld_cg(ws_acc + (hrow + c) * D + d);
        const float mn = fmaxf(M2, m), s1 = ex2(M2 - mn), s2 = ex2(m - mn);
        L2 = L2 * s1 + l * s2; A2 = A2 * s1 + a * s2; M2 = mn;
      }
      out[(size_t)(kvh * G + g) * D + d] = A2 / L2;
    }
  }
  cluster_sync();
}
