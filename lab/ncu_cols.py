"""Lab: the 135M model's down_proj (576 x 1536) as a CUDA column GEMV (kernels.cols_gemv) at 1 and at 8 columns,
launched for Nsight Compute (GPU only; why a column costs what it costs: warp stalls, issue, shared memory):

    ncu -k regex:cols_gemv_residual --launch-skip 2 --launch-count 4 --section SpeedOfLight --section Occupancy \
        --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis \
        python -m lab.ncu_cols [--mma]

Launches: three at 1 column, then three at 8; each on its own weight copy; --mma: the tensor-core kernel
(kernels.cols_gemv.mma_config_for). Not a test.
"""
import sys

import torch

from kernels.cols_gemv import cols_gemv_residual, config_for, mma_config_for


def main() -> None:
    h, i = 576, 1536
    cfg = (mma_config_for if "--mma" in sys.argv else config_for)("residual", h, i)
    down = [torch.randn(h, i, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(3)]
    for n in (1, 8):
        a, x = torch.randn(n, i, device="cuda"), torch.zeros(n, h, device="cuda")
        for w in down:
            cols_gemv_residual(a, w, x, config=cfg)
    torch.cuda.synchronize()
    print(f"launched 3 down_proj at 1 column, 3 at 8 ({cfg})")


if __name__ == "__main__":
    main()
