"""Lab: the 135M model's layer GEMVs as CUDA column GEMVs (kernels.cols_gemv) at a few column counts, launched for
Nsight Compute (GPU only; why a column costs what it costs: warp stalls, issue, shared memory):

    ncu -k regex:cols_ --launch-skip 2 --launch-count 4 --section SpeedOfLight --section Occupancy \\
        --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis \\
        python -m lab.ncu_cols [--mma] [--op down|gate_up] [--columns 1,8]

Launches: three at each column count (in order), each on its own weight copy, with the launch config the verify
step of that many columns uses (kernels.cols_gemv.config_for); --mma: the tensor-core kernel
(kernels.cols_gemv.mma_config_for; down only). --op: down_proj (576 x 1536, default) or gate/up (2 x 1536 x 576,
with its RMSNorm). Not a test.
"""
import argparse

import torch

from kernels.cols_gemv import cols_gemv_residual, cols_rmsnorm_gate_up_silu, config_for, mma_config_for

H, I = 576, 1536  # the 135M model's hidden and intermediate sizes


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mma", action="store_true")
    p.add_argument("--op", choices=["down", "gate_up"], default="down")
    p.add_argument("--columns", default="1,8")
    args = p.parse_args()
    counts = [int(c) for c in args.columns.split(",")]
    if args.op == "down":
        ws = [torch.randn(H, I, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(3)]
    else:
        ws = [torch.randn(2 * I, H, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(3)]
        norm_w = torch.ones(H, device="cuda", dtype=torch.bfloat16)
    for n in counts:
        if args.op == "down":
            cfg = (mma_config_for if args.mma else config_for)("residual", H, I, n)
            a, x = torch.randn(n, I, device="cuda"), torch.zeros(n, H, device="cuda")
            for w in ws:
                cols_gemv_residual(a, w, x, config=cfg)
        else:
            cfg = config_for("gate_up", I, H, n)
            x, out = torch.randn(n, H, device="cuda"), torch.empty(n, I, device="cuda")
            for w in ws:
                cols_rmsnorm_gate_up_silu(x, norm_w, 1e-5, w, out, config=cfg)
        print(f"launched 3 {args.op} at {n} columns ({cfg})")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
