"""Batch-1 GEMVs in CUDA C whose weights stream through a shared-memory ring (TMA bulk copies),
several GEMVs per launch. EXPERIMENTAL: correct, but slower than the Triton kernels in the decode
step today (kernels/PERF.md, sixth session), so the runner uses it only on request
(INFERENCE_GEMV=cuda / FastRunner.use_gemv("cuda")). Hopper (sm_90+) with NVRTC only.

The ops are those of the Triton kernels, with the same contracts and references:
    "rmsnorm_gemv"  out = W @ (rmsnorm(x) * norm_w) + bias    (kernels.rmsnorm_gemv; QKV)
    "residual"      x += W @ a                                (kernels.gemv_residual; o_proj, down)
    "gate_up"       out = silu(Wg @ n) * (Wu @ n)             (kernels.gate_up_silu)
stream_chain([Op, ...]) runs up to MAX_PHASES of them in ONE launch (the runner: o_proj + gate/up +
down + the next layer's QKV), with a grid barrier between two ops; stream_rmsnorm_gemv,
stream_gemv_residual and stream_gate_up_silu are one-op launches.

The idea: weights do not depend on the previous op, so a producer warp per CTA copies them into a
ring of shared-memory stages without a break, across the ops of the launch and from before the
PDL wait, while 8 consumer warps wait for the activations (previous kernel, or grid barrier),
stage the activation in shared memory once per op, and take one row slice each per stage: dot
product from shared memory against the activation held in registers, shuffle reduction, fp32 row
sum in shared memory, op epilogue (norm scale, bias, SiLU*up, residual add). Layout: one CTA per
SM (grid = min(#SMs, units)), CTA b owns a balanced contiguous range of units (rows; gate/up row
pairs); a stage is NWARP / WPR rows x WPR * VPL * 256 columns (geometry()).

Measured (H200, 1.5B shapes): the streaming alone reaches 3.6-3.9 TB/s across a chain (no dot
products, no barriers), but each layer's consumers spend ~12 us on the stage dot products and
~2-4 us per grid barrier, on the critical path: 38.7 us per layer vs 31.5 for the Triton GEMVs.
PROBE_DEFINES (NO_COMPUTE, NO_BARRIER, TRACE) are for scripts/probe_stream_gemv.py only.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels._util import check_vec

NWARP = 8  # consumer warps
THREADS = 32 * (NWARP + 1)  # + one producer warp
MAX_VPL = 6  # 16-byte vectors per lane per chunk
STAGE = MAX_VPL * 256 * 2 * NWARP  # bytes of a ring slot (24 KB)
MAX_PHASES = 4
SMEM_BUDGET = 150 * 1024  # ring + row sums + activation: leaves room for an attention CTA (~70 KB)
# for scripts/probe_stream_gemv.py only (NO_COMPUTE / NO_BARRIER = 1 give wrong results, for timing)
PROBE_DEFINES = {"NO_COMPUTE": 0, "NO_BARRIER": 0, "TRACE": 0}
CARVEOUT = 100  # percent of L1 given to shared memory: all of it, so the next kernel's CTA fits beside
# mode -> (MODE, kernel name of a one-op launch: what profilers show), rows per unit
MODES = {"rmsnorm_gemv": (0, "stream_rmsnorm_gemv", 1), "residual": (1, "stream_gemv_residual", 1),
         "gate_up": (2, "stream_gate_up_silu", 2)}
_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}

_SOURCE = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
#define NWARP 8
#define NCONSUMER (NWARP * 32)
#define STAGE (MAX_VPL * 256 * 2 * NWARP)  // bytes of one ring slot

struct Phase {  // one GEMV of the chain (mirrored by _Phase in Python)
  const unsigned char* w; const float* act; const void* norm_w; const void* bias; float* out;
  int units, K, pad0, pad1;
};
struct Params { Phase p[MAXP]; u32* sync; unsigned long long* trace; float eps; int pad; };

// TRACE (probes only): CTA 0's consumer thread 0 writes (%globaltimer, code) pairs to prm.trace, each
// read once the value it follows is available. code = 100 * phase + event.
#if TRACE
#define STAMP(code, dep) do { unsigned long long t_; \
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_) : "f"((float)(dep)) : "memory"); \
  if (blockIdx.x == 0 && threadIdx.x == 0 && tn < 120) { trace[2 * tn] = t_; trace[2 * tn + 1] = (code); } \
  ++tn; } while (0)
#else
#define STAMP(code, dep) do {} while (0)
#endif

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
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
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" :: "n"(NCONSUMER) : "memory"); }
__device__ __forceinline__ float h2f(u32 bits16) {
  float f; unsigned short h = (unsigned short)bits16; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
template <int KIND> __device__ __forceinline__ float any_f32(const void* p, int i) {  // 0 bf16, 1 fp16, 2 fp32
  if (KIND == 2) return ((const float*)p)[i];
  const u32 b = ((const unsigned short*)p)[i];
  return KIND == 1 ? h2f(b) : __uint_as_float(b << 16);
}
__device__ __forceinline__ float lo16(u32 w) { return W_HALF ? h2f(w & 0xffffu) : __uint_as_float(w << 16); }
__device__ __forceinline__ float hi16(u32 w) { return W_HALF ? h2f(w >> 16) : __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float dot8(uint4 w, const float* x, float acc) {  // short dependency chains
  const float a = fmaf(hi16(w.x), x[1], lo16(w.x) * x[0]), b = fmaf(hi16(w.y), x[3], lo16(w.y) * x[2]);
  const float c = fmaf(hi16(w.z), x[5], lo16(w.z) * x[4]), d = fmaf(hi16(w.w), x[7], lo16(w.w) * x[6]);
  return acc + ((a + b) + (c + d));
}
__device__ __forceinline__ void unit_range(int units, int& u0, int& nu) {
  u0 = (int)((long long)blockIdx.x * units / gridDim.x);
  nu = (int)((long long)(blockIdx.x + 1) * units / gridDim.x) - u0;
}

// All CTAs done with the previous phase (and its outputs visible) before any goes on.
__device__ __forceinline__ void grid_barrier(u32* count, u32 target) {
  if (NO_BARRIER) return;
  consumers_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    u32 v;
    do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory"); } while (v < target);
  }
  consumers_sync();
}

// Producer (one thread): copy this CTA's rows of phase `ph` into the ring, stage by stage. A stage
// is RS = NWARP / WPR rows x KC columns (WPR warps share a row, VPL 16-byte vectors per lane each).
template <int MODE, int WPR, int VPL>
__device__ __forceinline__ void produce(const Phase& ph, int& s, unsigned char* ring, u64* full, u64* empty) {
  constexpr int RS = NWARP / WPR, KC = WPR * VPL * 256;
  int u0, nu;
  unit_range(ph.units, u0, nu);
  const int nr = MODE == 2 ? 2 * nu : nu, K = ph.K;
  for (int k0 = 0; k0 < K; k0 += KC) {
    const u32 bytes = (u32)min(KC, K - k0) * 2u;
    for (int g = 0; g * RS < nr; ++g, ++s) {
      const int buf = s % NS;
      if (s >= NS) mbar_wait(smem_u32(&empty[buf]), ((s / NS) - 1) & 1);
      const int rows = min(RS, nr - g * RS);
      const u32 fb = smem_u32(&full[buf]);
      mbar_expect_tx(fb, rows * bytes);
      for (int r = 0; r < rows; ++r) {
        const int lr = g * RS + r;
        const long long row = MODE == 2 ? (lr < nu ? u0 + lr : ph.units + u0 + lr - nu) : u0 + lr;
        bulk_copy(smem_u32(ring + (size_t)buf * STAGE + (size_t)r * KC * 2), ph.w + (row * K + k0) * 2, bytes, fb);
      }
    }
  }
}

// Consumers (8 warps): warp w takes row w / WPR of each stage, columns slice (w % WPR) of the chunk;
// partial dot products go to acc[row * WPR + slice], summed in the epilogue.
//   MODE 0: out[u] = rstd * (W[u] . x*norm_w) + bias[u]        (rstd = 1 without a norm)
//   MODE 1: out[u] += W[u] . act                                (out: the residual stream)
//   MODE 2: out[u] = silu(rstd * W[u] . n) * (rstd * W[units + u] . n), n = x*norm_w
template <int MODE, int WPR, int VPL, int NORM_KIND, int BIAS_KIND>
__device__ __forceinline__ void consume(const Phase& ph, int& s, const unsigned char* ring, u64* full, u64* empty,
                                        float* acc, float* xs, float* red, float eps, int phase, u32* sync, u32 target,
                                        unsigned long long* trace, int& tn) {
  constexpr int RS = NWARP / WPR, KC = WPR * VPL * 256;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, slice = warp % WPR, rr = warp / WPR;
  int u0, nu;
  unit_range(ph.units, u0, nu);
  const int nr = MODE == 2 ? 2 * nu : nu, K = ph.K;
  const float* act = ph.act;
  // What does not depend on the previous phase is loaded before waiting for it: norm weights, bias.
  float nwr[VPL * 8];
  const int cbase0 = slice * VPL * 256 + lane * 8;
#pragma unroll
  for (int j = 0; j < VPL * 8; ++j) {
    const int col = cbase0 + (j >> 3) * 256 + (j & 7);
    nwr[j] = NORM_KIND >= 0 && col < K ? any_f32<NORM_KIND>(ph.norm_w, col) : 1.f;
  }
  const float bias0 = BIAS_KIND >= 0 && tid < nu ? any_f32<BIAS_KIND>(ph.bias, u0 + tid) : 0.f;
  if (target == 0) {  // the first phase: activations come from the previous kernel
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  } else {
    grid_barrier(sync, target);
  }
  STAMP(100 * phase + 0, 0.f);
  // The activation, once per CTA, into shared memory (the warps then take their slices from there).
  float rstd = 1.f, ssq = 0.f;
  for (int k = tid * 4; k < K; k += NCONSUMER * 4) {
    const float4 v = __ldcg((const float4*)(act + k));
    if (NORM_KIND >= 0) ssq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    *(float4*)(xs + k) = v;
  }
  if (NORM_KIND >= 0) {
    for (int o = 16; o > 0; o >>= 1) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
    if (lane == 0) red[warp] = ssq;
  }
  consumers_sync();
  if (NORM_KIND >= 0) {
    ssq = 0.f;
    for (int i = 0; i < NWARP; ++i) ssq += red[i];
    rstd = rsqrtf(ssq / K + eps);
  }
  STAMP(100 * phase + 1, rstd);
  float xr[VPL * 8];
  for (int k0 = 0; k0 < K; k0 += KC) {
    const int cbase = k0 + slice * VPL * 256 + lane * 8;
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
      const int col = cbase + j * 256;
      float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b = a;
      if (col < K) {
        a = *(const float4*)(xs + col);
        b = *(const float4*)(xs + col + 4);
        if (k0 > 0 && NORM_KIND >= 0) {  // rows longer than one chunk: norm weights of this chunk
#pragma unroll
          for (int e = 0; e < 8; ++e) nwr[j * 8 + e] = any_f32<NORM_KIND>(ph.norm_w, col + e);
        }
      }
      if (NORM_KIND >= 0) {
        a.x *= nwr[j * 8 + 0]; a.y *= nwr[j * 8 + 1]; a.z *= nwr[j * 8 + 2]; a.w *= nwr[j * 8 + 3];
        b.x *= nwr[j * 8 + 4]; b.y *= nwr[j * 8 + 5]; b.z *= nwr[j * 8 + 6]; b.w *= nwr[j * 8 + 7];
      }
      xr[j * 8 + 0] = a.x; xr[j * 8 + 1] = a.y; xr[j * 8 + 2] = a.z; xr[j * 8 + 3] = a.w;
      xr[j * 8 + 4] = b.x; xr[j * 8 + 5] = b.y; xr[j * 8 + 6] = b.z; xr[j * 8 + 7] = b.w;
    }
    STAMP(100 * phase + 2, xr[0] + xr[VPL * 8 - 1]);
    for (int g = 0; g * RS < nr; ++g, ++s) {
      const int buf = s % NS;
      mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
      STAMP(100 * phase + 3, 0.f);
      const int lr = g * RS + rr;
      if (lr < nr) {
        const uint4* wrow = (const uint4*)(ring + (size_t)buf * STAGE + (size_t)rr * KC * 2) + slice * VPL * 32;
        float d = 0.f;
#pragma unroll
        for (int j = 0; j < VPL; ++j)
          if (!NO_COMPUTE && cbase + j * 256 < K) d = dot8(wrow[j * 32 + lane], xr + j * 8, d);
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        if (lane == 0) acc[lr * WPR + slice] = k0 == 0 ? d : acc[lr * WPR + slice] + d;
      }
      __syncwarp();
      STAMP(100 * phase + 4, acc[0]);
      if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
    }
  }
  consumers_sync();
  for (int r = tid; r < nu; r += NCONSUMER) {
    float y = 0.f;
#pragma unroll
    for (int i = 0; i < WPR; ++i) y += acc[r * WPR + i];
    if (MODE == 0) {
      y *= rstd;
      if (BIAS_KIND >= 0) y += r == tid ? bias0 : any_f32<BIAS_KIND>(ph.bias, u0 + r);
      ph.out[u0 + r] = y;
    } else if (MODE == 1) {
      ph.out[u0 + r] = __ldcg(ph.out + u0 + r) + y;
    } else {
      float u = 0.f;
#pragma unroll
      for (int i = 0; i < WPR; ++i) u += acc[(nu + r) * WPR + i];
      const float gt = y * rstd;
      ph.out[u0 + r] = gt / (1.f + __expf(-gt)) * (u * rstd);
    }
  }
  STAMP(100 * phase + 5, 0.f);
}

extern "C" __global__ void __launch_bounds__(NCONSUMER + 32, 1) KERNEL_NAME(const Params prm) {
  __shared__ __align__(8) u64 full[NS], empty[NS];
  __shared__ float red[NWARP];
  extern __shared__ __align__(128) unsigned char ring[];
  float* acc = (float*)(ring + (size_t)NS * STAGE);  // [SUMS] row sums
  float* xs = acc + SUMS;                              // [max K] the activation of the current phase
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int i = 0; i < NS; ++i) { mbar_init(smem_u32(&full[i]), 1); mbar_init(smem_u32(&empty[i]), NWARP); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  int s = 0, tn = 0;
  unsigned long long* trace = prm.trace;
  STAMP(900, 0.f);
  if (tid >= NCONSUMER) {  // producer warp: weights do not depend on the previous kernel, so no PDL wait
    if (tid == NCONSUMER) { PRODUCE }
    return;
  }
  CONSUME
#if NPH > 1
  consumers_sync();
  if (tid == 0) {  // the last CTA out resets the barrier counters for the next launch
    __threadfence();
    if (atomicAdd(prm.sync + 1, 1u) == gridDim.x - 1) { prm.sync[0] = 0; prm.sync[1] = 0; }
  }
#endif
}
"""


class _Phase(ctypes.Structure):
    _fields_ = [("w", ctypes.c_void_p), ("act", ctypes.c_void_p), ("norm_w", ctypes.c_void_p),
                ("bias", ctypes.c_void_p), ("out", ctypes.c_void_p), ("units", ctypes.c_int), ("K", ctypes.c_int),
                ("pad0", ctypes.c_int), ("pad1", ctypes.c_int)]


class _Params(ctypes.Structure):
    _fields_ = [("p", _Phase * MAX_PHASES), ("sync", ctypes.c_void_p), ("trace", ctypes.c_void_p),
                ("eps", ctypes.c_float), ("pad", ctypes.c_int)]


@dataclass(frozen=True)
class Op:
    """One GEMV of a chain. mode "rmsnorm_gemv": out = W @ (rmsnorm(act) * norm_w) + bias (no norm
    without norm_w); "residual": out += W @ act; "gate_up": out = silu(Wg @ n) * (Wu @ n)."""
    mode: str
    w: torch.Tensor
    act: torch.Tensor
    out: torch.Tensor
    norm_w: torch.Tensor | None = None
    bias: torch.Tensor | None = None

    @property
    def units(self) -> int:
        return self.w.shape[0] // MODES[self.mode][2]


def geometry(k: int) -> tuple[int, int]:
    """(WPR, VPL) for rows of k weights: WPR warps share a row, VPL 16-byte vectors per lane; the
    fewest warps per row whose chunk (WPR * VPL * 256 columns) holds the row, else 8 warps x 6."""
    v = -(-k // 256)
    for wpr in (1, 2, 4, 8):
        if -(-v // wpr) <= MAX_VPL:
            return wpr, -(-v // wpr)
    return NWARP, MAX_VPL


def plan(ops: list[Op] | tuple, sms: int) -> dict:
    """Grid, ring stages and dynamic shared memory (bytes) of a launch running `ops` in order.
    ops: Op or (mode, units, K) tuples."""
    shapes = [(o.mode, o.units, o.w.shape[1]) if isinstance(o, Op) else o for o in ops]
    grid = max(1, min(sms, min(u for _, u, _ in shapes)))  # one CTA per SM
    sums = max(MODES[m][2] * -(-u // grid) * geometry(k)[0] for m, u, k in shapes)  # row sums, floats
    sums = -(-sums // 4) * 4  # keeps the activation after them 16-byte aligned
    fixed = 4 * (sums + max(k for _, _, k in shapes))  # + the activation
    stages = max(2, min(8, (SMEM_BUDGET - fixed) // STAGE))
    return {"grid": grid, "stages": stages, "smem": stages * STAGE + fixed, "sums": sums}


def supported(w: torch.Tensor) -> bool:
    """Whether these kernels take weight `w` ([rows, K]) on its device."""
    return (w.dim() == 2 and w.dtype in (torch.bfloat16, torch.float16) and w.is_contiguous()
            and w.shape[1] % 8 == 0 and w.data_ptr() % 16 == 0 and w.device.type == "cuda"
            and _cuda_rtc.available(w.device))


@lru_cache(maxsize=None)
def _kernel(device_index: int, phases: tuple, w_half: bool, stages: int, sums: int, smem: int,
            carveout: int | None, probe: tuple = ()):
    """phases: ((mode, norm_kind, bias_kind, K), ...) with kinds -1 for none."""
    produce, consume = [], []
    for i, (mode, norm_kind, bias_kind, k) in enumerate(phases):
        wpr, vpl = geometry(k)
        m = MODES[mode][0]
        produce.append(f"produce<{m}, {wpr}, {vpl}>(prm.p[{i}], s, ring, full, empty);")
        consume.append(f"consume<{m}, {wpr}, {vpl}, {norm_kind}, {bias_kind}>(prm.p[{i}], s, ring, full, empty, "
                       f"acc, xs, red, prm.eps, {i}, prm.sync, {i}u * gridDim.x, trace, tn);")
    name = MODES[phases[0][0]][1] if len(phases) == 1 else "stream_gemv_chain"
    defines = {**PROBE_DEFINES, "KERNEL_NAME": name, "W_HALF": int(w_half), "MAX_VPL": MAX_VPL, "NS": stages,
               "SUMS": sums, "MAXP": MAX_PHASES, "NPH": len(phases),
               "PRODUCE": " ".join(produce), "CONSUME": " ".join(consume)}
    src = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", ("--use_fast_math",))
    return _cuda_rtc.CudaKernel(cubin, name, torch.device("cuda", device_index), smem, 1, carveout)


@lru_cache(maxsize=None)
def _sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _check(op: Op) -> None:
    n, k = op.w.shape
    assert op.mode in MODES, f"unknown mode {op.mode!r}"
    assert supported(op.w), "stream_gemv needs contiguous bf16/fp16 weights, K % 8 == 0, a Hopper GPU with NVRTC"
    assert n % MODES[op.mode][2] == 0, "gate_up must have an even number of rows"
    check_vec(op.act, k, "act")
    check_vec(op.out, op.units, "out")
    assert op.act.data_ptr() % 16 == 0, "the activation must be 16-byte aligned"
    assert op.act.device == op.out.device == op.w.device
    if op.mode == "residual":
        assert op.act.data_ptr() != op.out.data_ptr(), "a and x must be different buffers"
    for t, name, size in ((op.norm_w, "norm_w", k), (op.bias, "bias", op.units)):
        if t is not None:
            check_vec(t, size, name, tuple(_KIND))


def stream_chain(ops: list[Op], sync: torch.Tensor | None = None, eps: float = 1e-6, *, pdl: bool = False,
                 trace: torch.Tensor | None = None) -> None:
    """Run `ops` (1 to MAX_PHASES GEMVs, same weight dtype) in order in ONE launch: the weights of
    all of them stream through the shared-memory ring without a break; between two ops every CTA
    waits at a grid barrier (counters in `sync`, int32 [2] zeros, needed for more than one op; they
    are back at zero after the launch)."""
    assert 1 <= len(ops) <= MAX_PHASES, f"1 to {MAX_PHASES} ops per launch"
    for op in ops:
        _check(op)
    w_dtype = ops[0].w.dtype
    assert all(op.w.dtype == w_dtype for op in ops), "all weights of a chain must have one dtype"
    if len(ops) > 1:
        assert sync is not None and sync.dtype == torch.int32 and sync.numel() >= 2, "a chain needs sync counters"
    dev = ops[0].w.device.index if ops[0].w.device.index is not None else torch.cuda.current_device()
    p = plan(ops, _sms(dev))
    sig = tuple((op.mode, -1 if op.norm_w is None else _KIND[op.norm_w.dtype],
                 -1 if op.bias is None else _KIND[op.bias.dtype], op.w.shape[1]) for op in ops)
    kern = _kernel(dev, sig, w_dtype == torch.float16, p["stages"], p["sums"], p["smem"], CARVEOUT,
                   tuple(PROBE_DEFINES.values()))
    prm = _Params()
    for i, op in enumerate(ops):
        prm.p[i] = _Phase(op.w.data_ptr(), op.act.data_ptr(), op.norm_w.data_ptr() if op.norm_w is not None else 0,
                          op.bias.data_ptr() if op.bias is not None else 0, op.out.data_ptr(), op.units,
                          op.w.shape[1], 0, 0)
    prm.sync = sync.data_ptr() if sync is not None else 0
    prm.trace = trace.data_ptr() if trace is not None else 0  # int64 [240], with PROBE_DEFINES["TRACE"]
    prm.eps = eps
    kern.launch((p["grid"], 1, 1), THREADS, [prm], pdl=pdl)


def stream_rmsnorm_gemv(x, w, out, norm_w=None, eps: float = 1e-6, bias=None, *, pdl: bool = False):
    """Same contract as kernels.rmsnorm_gemv.rmsnorm_gemv (reference: rmsnorm_gemv_ref)."""
    stream_chain([Op("rmsnorm_gemv", w, x, out, norm_w, bias)], eps=eps, pdl=pdl)
    return out


def stream_gemv_residual(a, w, x, *, pdl: bool = False):
    """Same contract as kernels.gemv_residual.gemv_residual (reference: gemv_residual_ref)."""
    stream_chain([Op("residual", w, a, x)], pdl=pdl)
    return x


def stream_gate_up_silu(x, norm_w, eps: float, w_gate_up, out, *, pdl: bool = False):
    """Same contract as kernels.gate_up_silu.rmsnorm_gate_up_silu (reference: rmsnorm_gate_up_silu_ref)."""
    stream_chain([Op("gate_up", w_gate_up, x, out, norm_w)], eps=eps, pdl=pdl)
    return out
