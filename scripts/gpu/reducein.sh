#!/usr/bin/env bash
# Issue 28, twelfth session: the fused reduction's reduce-in issuing every slot load before checking any epoch,
# in one call on 4 GPUs: the kernels' gpu tests, lab.probe_reduce_in (one GPU: what the reduce-in and the push add
# to a launch), the TP=4 fused test, then benches (random weights, batch 1, ctx 512, 256 tokens, one run each):
# TP=4 fused and flag per shape, TP=2 fused per shape, TP=1 with this tree and with $BEFORE's (the one-GPU streamed
# GEMVs' staging code moved into the same helper).
# Usage: OUT=... BEFORE=.before BUDGET=370 bash scripts/gpu/reducein.sh   (.before: `git archive <rev> inference
# kernels`) logs: $OUT/reducein/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window reducein
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONFAULTHANDLER=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
T=(python3 -m pytest -q -x -s -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=90)
step kernel-tests 120 "${T[@]}" -m gpu tests/kernels/test_fused_reduce.py tests/kernels/test_stream_gemv.py
if ! grep -q " passed" "$LOG/kernel-tests.log" || grep -q " failed" "$LOG/kernel-tests.log"; then
  summary; tail -30 "$LOG/kernel-tests.log"; tar -czf "$OUT/logs.tgz" -C "$OUT" reducein; exit 0
fi
step probe 60 python3 -m lab.probe_reduce_in
F="tests/inference/test_parallel.py::test_fast_ranks_decode_in_one_graph_like_their_kernels_and_the_one_gpu_fast_path"
step test-fused-tp4 90 "${T[@]}" "$F[qwen2.5-coder-1.5b-fused-4]"
bench() {  # bench NAME SHAPE TP REDUCE [PREFIX...]
  local name=$1 shape=$2 tp=$3 reduce=$4; shift 4
  step "bench-$name" 60 "$@" python3 -m inference.bench --shape "$shape" --tp "$tp" --tp-reduce "$reduce" \
    --tokens 256 --repeats 1 --json "$LOG/bench-$name.json"
}
for shape in qwen2.5-coder-1.5b qwen2.5-coder-3b; do
  bench "$shape-tp4-fused" "$shape" 4 fused; bench "$shape-tp4-flag" "$shape" 4 flag
done
for shape in qwen2.5-coder-1.5b qwen2.5-coder-3b; do bench "$shape-tp2-fused" "$shape" 2 fused; done
for shape in qwen2.5-coder-1.5b qwen2.5-coder-3b; do bench "$shape-tp1" "$shape" 1 auto; done
bench "qwen2.5-coder-1.5b-tp1-before" qwen2.5-coder-1.5b 1 auto "${before[@]}"
tar -czf "$OUT/logs.tgz" -C "$OUT" reducein
summary
grep -E "^\|" "$LOG/probe.log"
for f in "$LOG"/bench-*.log; do echo "$(basename "$f" .log): $(grep -E "^\| bfloat16" "$f" | cut -d'|' -f5,6) $(grep -E "compute" "$f" | sed 's/.*compute/compute/')"; done
grep -h "fast ranks" "$LOG"/test-*.log | grep -v "^tests\|PASSED\|passed" | cut -c1-240
true
