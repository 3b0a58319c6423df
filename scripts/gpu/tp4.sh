#!/usr/bin/env bash
# Tensor parallel over 4 GPUs of one host (issue 28), flag all-reduce, in one call of about 200-260 s: the bench
# per shape at TP=4, TP=2 and TP=1 on the same machine (random weights, ctx 512), the TP=4 correctness test
# (graph = eager, teacher-forced vs the one-GPU fast path), the all-reduce latency at 4 ranks.
# Usage: OUT=... SHAPES="qwen2.5-coder-1.5b qwen2.5-coder-3b" BUDGET=260 bash scripts/gpu/tp4.sh  logs: $OUT/tp4/
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$(realpath -m "$OUT/tp4"); mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# NVLink multicast stays off (inference.parallel.launch sets the same before starting ranks).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
SHAPES=${SHAPES:-"qwen2.5-coder-1.5b qwen2.5-coder-3b"}; TOKENS=${TOKENS:-256}
source scripts/gpu/lib.sh
{ nvidia-smi --query-gpu=name,memory.total --format=csv; nvidia-smi topo -m; } > "$LOG/gpu.txt" 2>&1
bench() {  # bench SHAPE TP
  step "bench-$1-tp$2" 50 python3 -m inference.bench --shape "$1" --tp "$2" --tp-reduce flag --tokens "$TOKENS" \
    --repeats 1 --ttft 128 --json "$LOG/bench-$1-tp$2.json"
}
for shape in $SHAPES; do bench "$shape" 4; done
for shape in $SHAPES; do bench "$shape" 1; bench "$shape" 2; done
step test-tp4 80 python3 -m pytest -q -x -s -p no:randomly -o addopts="" -o faulthandler_timeout=60 \
  "tests/inference/test_parallel.py::test_fast_ranks_decode_in_one_graph_like_their_kernels_and_the_one_gpu_fast_path[qwen2.5-coder-1.5b-flag-4]"
step allreduce 40 python3 -m inference.parallel.allreduce_bench --tp 4 --sizes 1536,2048 --iters 200 --flag
tar -czf "$OUT/logs.tgz" -C "$OUT" tp4
summary
for f in "$LOG"/bench-*.log; do echo "$(basename "$f"):"; grep -E "^\| bf16|compute" "$f"; done
grep -h "fast ranks" "$LOG/test-tp4.log" | cut -c1-240
grep -A6 "^all-reduce" "$LOG/allreduce.log"
true
