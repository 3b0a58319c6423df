#!/usr/bin/env bash
# Diagnose the NCCL tensor-parallel tests on a 2-GPU machine: each gpu test alone, with a hard
# timeout, faulthandler tracebacks of hung processes and NCCL warnings, so a failure or a hang
# leaves its cause in $OUT/tp_diag/. A summary last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}/tp_diag; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt"; nvidia-smi topo -m >> "$OUT/gpu.txt" 2>&1
python -m pytest -q -m gpu --collect-only tests/inference/test_parallel.py | grep :: > "$OUT/ids.txt"
while read -r id; do
  name=$(echo "$id" | tr -c 'A-Za-z0-9_.-' _ | cut -c1-120)
  timeout -s INT ${T:-100} python -m pytest -q -x -s -p no:randomly -o faulthandler_timeout=80 "$id" > "$OUT/$name.log" 2>&1
  echo "rc=$? $id"
done < "$OUT/ids.txt" | tee "$OUT/summary.txt"
