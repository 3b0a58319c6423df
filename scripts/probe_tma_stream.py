"""How fast one CTA per SM streams a weight matrix through a shared-memory ring, by copy mechanism
(GPU only; no dot products: the consumers only wait for each slot and free it):

    PYTHONPATH=. python scripts/probe_tma_stream.py

The question behind it (kernels/PERF.md, seventh session): kernels.stream_gemv copies each row of a
16-row ring slot with its own cp.async.bulk, issued by one thread, and streams at ~1.8 / 2.8 / 4.0 TB/s
with 0.75 / 1.5 / 3 KB copies. Is that the issuing thread, or the copies themselves? Mechanisms:
    rows1   one bulk copy per row, one thread issues them (stream_gemv today)
    rows16  one bulk copy per row, lane r of the producer warp issues row r's
    box2d   tensor-map copies of 16 rows x 256 columns (8 KB each), one thread
    box3d   ONE tensor-map copy per slot: a 3-D view (64 columns, 16 rows, KC / 64 column chunks),
            128-byte swizzle, laid out in shared memory chunk by chunk (what ldmatrix would read
            conflict-free)
Matrices: gate/up of the 1.5B (17920 x 1536) and of the 3B / Qwen3 (22016 x 2048; 24576 x 2048),
28 distinct copies (never in L2) back to back in one CUDA graph; GB/s of weights. Table last.
"""
import ctypes

import torch

from kernels import _cuda_rtc, stream_gemv
from kernels.bench_kernels import graph_us

SRC = _cuda_rtc.load_source("common.cuh") + r"""
struct P { const unsigned char* w; const void* tmap; float* sink; int R; int K; };
extern "C" __global__ void __launch_bounds__(288, 1) stream_probe(const __grid_constant__ P p) {
  __shared__ __align__(8) u64 full[NS], empty[NS];
  extern __shared__ __align__(1024) unsigned char ring_raw[];
  unsigned char* ring = ring_raw + ((1024u - (smem_u32(ring_raw) & 1023u)) & 1023u);  // tensor copies: 1 KB aligned
  const int tid = threadIdx.x, lane = tid & 31;
  if (tid == 0) {
    for (int i = 0; i < NS; ++i) {
      mbar_init(smem_u32(&full[i]), 1);
      mbar_init(smem_u32(&empty[i]), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int tiles = p.R / 16;
  const int t0 = (int)((long long)blockIdx.x * tiles / gridDim.x);
  const int t1 = (int)((long long)(blockIdx.x + 1) * tiles / gridDim.x);
  const int nk = p.K / KC;
  if (tid >= 256) {  // producer warp
    int s = 0;
    for (int t = t0; t < t1; ++t) for (int c = 0; c < nk; ++c, ++s) {
      const int buf = s % NS;
      if (s >= NS) mbar_wait(smem_u32(&empty[buf]), ((s / NS) - 1) & 1);
      const u32 fb = smem_u32(&full[buf]), dst = smem_u32(ring + (size_t)buf * SLOT);
      if (lane == 0) mbar_expect_tx(fb, 16 * KC * 2);
      __syncwarp();
#if MECH == 0 || MECH == 1
      for (int r = MECH == 1 ? lane : (lane == 0 ? 0 : 16); r < 16; r += MECH == 1 ? 32 : 1) {
        const unsigned char* src = p.w + ((size_t)(t * 16 + r) * p.K + c * KC) * 2;
        bulk_copy(dst + r * (KC * 2 + PAD), src, KC * 2, fb);
      }
#elif MECH == 2
      if (lane == 0) for (int b = 0; b < KC / 256; ++b)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(dst + b * 8192), "l"(p.tmap), "r"(c * KC + b * 256), "r"(t * 16), "r"(fb) : "memory");
#else
      if (lane == 0)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3, %4}], [%5];"
                     :: "r"(dst), "l"(p.tmap), "r"(0), "r"(t * 16), "r"(c * (KC / 64)), "r"(fb) : "memory");
#endif
    }
    return;
  }
  int s = 0;
  float acc = 0.f;
  for (int t = t0; t < t1; ++t) for (int c = 0; c < nk; ++c, ++s) {
    const int buf = s % NS;
    mbar_wait(smem_u32(&full[buf]), (s / NS) & 1);
    acc += *(const float*)(ring + (size_t)buf * SLOT + tid * 4);
    __syncwarp();
    if (lane == 0) mbar_arrive(smem_u32(&empty[buf]));
  }
  if (acc == 12345.f) p.sink[0] = acc;
}
"""


class _P(ctypes.Structure):
    _fields_ = [("w", ctypes.c_void_p), ("tmap", ctypes.c_void_p), ("sink", ctypes.c_void_p), ("R", ctypes.c_int),
                ("K", ctypes.c_int)]


def tensor_map(w: torch.Tensor, mech: str, kc: int) -> torch.Tensor:
    """A CUtensorMap (128 bytes) for w [R, K] bf16, copied to device memory."""
    if mech == "box3d":  # 64 columns, rows, column chunks of 64: smem [chunk][row][64], 128-byte swizzle
        return stream_gemv._tensor_map(w, kc, rows=16)
    r, k = w.shape
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    tmap = (ctypes.c_ubyte * 128)()
    res = _cuda_rtc._driver().cuTensorMapEncodeTiled(tmap, 9, 2, ctypes.c_void_p(w.data_ptr()), (u64 * 2)(k, r),
                                                    (u64 * 1)(k * 2), (u32 * 2)(256, 16), (u32 * 2)(1, 1), 0, 0, 2, 0)
    _cuda_rtc._check(res, "cuTensorMapEncodeTiled")
    return torch.tensor(bytearray(tmap), dtype=torch.uint8).cuda()


MECHS = {"rows1": 0, "rows16": 1, "box2d": 2, "box3d": 3}


def run(shape, mech, kc, ns, n=28):
    rows, k = shape
    pad = 16 if mech.startswith("rows") else 0
    slot = 16 * (kc * 2 + pad)
    slot = -(-slot // 1024) * 1024
    src = "".join(f"#define {a} {b}\n" for a, b in dict(NS=ns, KC=kc, PAD=pad, SLOT=slot, MECH=MECHS[mech]).items())
    cubin = _cuda_rtc.nvrtc_compile(src + SRC, "sm_90a")
    smem = ns * slot + 1024
    kern = _cuda_rtc.CudaKernel(cubin, "stream_probe", torch.device("cuda", 0), smem, 1)
    ws = [torch.empty(rows, k, dtype=torch.bfloat16, device="cuda").normal_() for _ in range(n)]
    maps = [tensor_map(w, mech, kc) if mech.startswith("box") else None for w in ws]
    sink = torch.zeros(1, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    params = [_P(w.data_ptr(), m.data_ptr() if m is not None else 0, sink.data_ptr(), rows, k)
              for w, m in zip(ws, maps)]

    def go():
        for prm in params:
            kern.launch((sms, 1, 1), 288, [prm], pdl=True)
    us = graph_us(go, n)
    return us, rows * k * 2 / us / 1e3


def main():
    out = []
    for name, shape in (("1.5B gate/up", (17920, 1536)), ("3B gate/up", (22016, 2048))):
        k = shape[1]
        for mech in ("rows1", "rows16", "box2d", "box3d"):
            for kc, ns in ((k, 2), (k, 3), (k // 2, 4), (k // 2, 6), (k // 4, 8)):
                if mech == "box2d" and kc % 256:
                    continue
                if ns * 16 * (kc * 2 + 16) > 220 * 1024:
                    continue
                try:
                    us, gbs = run(shape, mech, kc, ns)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(name, mech, kc, ns, "failed:", str(e)[:200], flush=True)
                    continue
                row = (name, mech, kc * 2, ns, us, gbs)
                out.append(row)
                print(*row[:4], f"{us:.2f} us  {gbs:.0f} GB/s", flush=True)
    print("\n| matrix | mechanism | bytes per row per slot | slots | us | GB/s |\n|---|---|---:|---:|---:|---:|")
    for r in out:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.0f} |")


if __name__ == "__main__":
    main()
