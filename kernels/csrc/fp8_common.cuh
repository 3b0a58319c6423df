// Helpers of the FP8 GEMVs (fp8_gemv.cu, fp8_stream_gemv.cu): the activation staged in shared memory and the
// e4m3 dot products. Needs common.cuh first.
#define XS 1.8446744073709552e19f  // 2^64: the staged activation's scale (products clear of float32 subnormals)

// The norm weights of a thread's first PRE_ activation float4s (k4 = tid + i * NT_ < n4): loaded before the PDL
// wait, as they do not depend on the previous kernel.
template <int NK_, int NIT_, int PRE_, int NT_>  // names with _: the kernels #define NORM_KIND, NIT, PRE, NT
__device__ __forceinline__ void first_norms(const void* norm_w, int n4, int tid, float4 (&nw)[PRE_]) {
#pragma unroll
  for (int i = 0; i < PRE_; ++i) {
    const int k4 = tid + i * NT_;
    nw[i] = NK_ >= 0 && i < NIT_ && k4 < n4 ? norm4<NK_>(norm_w, k4) : make_float4(1.f, 1.f, 1.f, 1.f);
  }
}

// Stage n4 float4s of the activation `act` (times the norm weights; nw: first_norms') for a CTA of NT_ threads:
// float4 k4 = 4c + j -> xs4[j * nch + c] times XS (the lanes of a warp then read consecutive float4s: no bank
// conflicts), xsum[c] the sum of chunk c's 16 values (4 neighbouring lanes). PRE_ loads a thread in flight at
// once (one L2 round trip for n4 up to PRE_ * NT_). Returns the thread's sum of squares of x (the RMSNorm's).
template <int NK_, int NIT_, int PRE_, int NT_>  // names with _: the kernels #define NORM_KIND, NIT, PRE, NT
__device__ __forceinline__ float stage_act(const float4* act, const void* norm_w, int n4, int nch, int tid,
                                           const float4 (&nw)[PRE_], float4* xs4, float* xsum) {
  float ssq = 0.f;
#pragma unroll
  for (int i0 = 0; i0 < NIT_; i0 += PRE_) {
    float4 v[PRE_];
#pragma unroll
    for (int i = 0; i < PRE_; ++i) {
      const int k4 = tid + (i0 + i) * NT_;
      v[i] = i0 + i < NIT_ && k4 < n4 ? __ldcg(act + k4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < PRE_; ++i) {
      if (i0 + i >= NIT_) break;
      const int k4 = tid + (i0 + i) * NT_;
      const bool in = k4 < n4;
      float4 x = v[i];
      ssq += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
      if (NK_ >= 0) {
        const float4 n = i0 == 0 ? nw[i] : in ? norm4<NK_>(norm_w, k4) : make_float4(1.f, 1.f, 1.f, 1.f);
        x.x *= n.x; x.y *= n.y; x.z *= n.z; x.w *= n.w;
      }
      float t = (x.x + x.y) + (x.z + x.w);
      t += __shfl_xor_sync(0xffffffffu, t, 1);
      t += __shfl_xor_sync(0xffffffffu, t, 2);
      if (in) {
        xs4[(k4 & 3) * nch + (k4 >> 2)] = make_float4(x.x * XS, x.y * XS, x.z * XS, x.w * XS);
        if ((k4 & 3) == 0) xsum[k4 >> 2] = t;
      }
    }
  }
  return ssq;
}

// The 4 e4m3 of word w times x, added to acc: the hardware e4m3x2 -> f16x2 conversion (exact), each half to
// float32, float32 FMAs in k order.
__device__ __forceinline__ float dot_word_cvt(u32 w, float4 x, float acc) {
  u32 h01, h23;
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.rn.f16x2.e4m3x2 %0, l; cvt.rn.f16x2.e4m3x2 %1, h; }"
      : "=r"(h01), "=r"(h23) : "r"(w));
  return fmaf(h2f(h23 >> 16), x.w, fmaf(h2f(h23 & 0xffffu), x.z, fmaf(h2f(h01 >> 16), x.y,
              fmaf(h2f(h01 & 0xffffu), x.x, acc))));
}
