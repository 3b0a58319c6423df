#!/usr/bin/env bash
# Tensor parallel on one GPU (the lead's single-H200 run; the 2-4 GPU measurements are
# scripts/tp_bench.sh): the gpu-marked tests of tests/inference/test_parallel.py. On one GPU that
# is the one-rank NCCL group against the reference runner (the multi-GPU tests skip themselves).
# $MODEL is not needed. Logs under $OUT/tp/, a summary last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}/tp; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python -m pytest -q -m gpu -p no:randomly -rA tests/inference/test_parallel.py > "$OUT/tests.log" 2>&1
rc=$?
grep -E "^(PASSED|FAILED|SKIPPED|ERROR)" "$OUT/tests.log"
echo "| tp tests | $(tail -1 "$OUT/tests.log") |"
exit $rc
