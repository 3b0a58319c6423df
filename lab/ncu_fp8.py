"""Lab: the FP8 gate/up and down GEMVs of the 1.5B shape launched back to back for Nsight Compute (GPU only;
what limits them per launch: DRAM throughput, occupancy, warp stalls):

    ncu -k regex:fp8_cuda --launch-skip 2 --launch-count 2 --section SpeedOfLight --section Occupancy \
        --section WarpStateStats --section LaunchStats --section SchedulerStats python -m lab.ncu_fp8
    ncu -k regex:fp8_stream ... python -m lab.ncu_fp8 --stream [--warps 12 --wks 3]

Launches: gate/up (the rule's config, or with --stream the streamed kernel: kernels.fp8_stream_gemv, the plan's
launch or the given overrides) three times, then down three times; each on its own weight copy so that L2 does not
hold it. Not a test.
"""
import argparse

import torch

from inference.quant import quantize_fp8
from kernels.fp8_cuda_gemv import fp8_cuda_gemv_residual, fp8_cuda_rmsnorm_gate_up_silu
from kernels.fp8_stream_gemv import Config, fp8_stream_gemv_residual, fp8_stream_rmsnorm_gate_up_silu


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", action="store_true", help="the streamed kernels (kernels.fp8_stream_gemv)")
    p.add_argument("--warps", type=int, default=None, help="--stream: consumer warps (default: the plan's)")
    p.add_argument("--wks", type=int, default=None, help="--stream: warps per row pair (default: the plan's)")
    args = p.parse_args(argv)
    h, i = 1536, 8960
    gate_up = [quantize_fp8(torch.randn(2 * i, h, device="cuda", dtype=torch.bfloat16) * 0.02) for _ in range(3)]
    down = [quantize_fp8(torch.randn(h, i, device="cuda", dtype=torch.bfloat16) * 0.02) for _ in range(3)]
    x, nw = torch.randn(h, device="cuda"), torch.ones(h, device="cuda", dtype=torch.bfloat16)
    a, out, r = torch.randn(i, device="cuda"), torch.zeros(i, device="cuda"), torch.zeros(h, device="cuda")
    over = Config(warps=args.warps, wks=args.wks)
    for w in gate_up:
        if args.stream:
            fp8_stream_rmsnorm_gate_up_silu(x, nw, 1e-6, w.q, w.scale, w.offset, out, config=over)
        else:
            fp8_cuda_rmsnorm_gate_up_silu(x, nw, 1e-6, w.q, w.scale, w.offset, out)
    for w in down:
        if args.stream:
            fp8_stream_gemv_residual(a, w.q, w.scale, w.offset, r, config=Config(warps=args.warps))
        else:
            fp8_cuda_gemv_residual(a, w.q, w.scale, w.offset, r)
    torch.cuda.synchronize()
    print("launched 3 gate/up, 3 down", "(streamed)" if args.stream else "")


if __name__ == "__main__":
    main()
