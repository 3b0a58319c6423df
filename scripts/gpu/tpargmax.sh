#!/usr/bin/env bash
# Issue 28, thirteenth session: the greedy TP step's distributed argmax (kernels/csrc/flag_reduce.cu flag_argmax)
# with its loads batched, in one call on 2 GPUs: its gpu test (ranks simulated on one GPU) and the TP=2 fused test,
# then benches (random weights, batch 1, ctx 512, 256 tokens, one run each) at TP=2 fused with this tree and with
# $BEFORE's, per shape, and rank 0's kernels of the 1.5B's TP=2 fused step (lab.profile_step --tp 2 --ranks).
# Usage: OUT=... BEFORE=.before BUDGET=330 bash scripts/gpu/tpargmax.sh   logs: $OUT/tpargmax/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
tp_window tpargmax
T=(python3 -m pytest -q -x -s -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=90)
step kernel-tests 90 "${T[@]}" -m gpu tests/kernels/test_flag_reduce.py
if ! grep -q " passed" "$LOG/kernel-tests.log" || grep -q " failed" "$LOG/kernel-tests.log"; then
  summary; tail -30 "$LOG/kernel-tests.log"; tar -czf "$OUT/logs.tgz" -C "$OUT" tpargmax; exit 0
fi
F="tests/inference/test_parallel.py::test_fast_ranks_decode_in_one_graph_like_their_kernels_and_the_one_gpu_fast_path"
step test-fused-tp2 90 "${T[@]}" "$F[qwen2.5-coder-1.5b-fused-2]"
bench() {  # bench NAME SHAPE [PREFIX...]
  local name=$1 shape=$2; shift 2
  step "bench-$name" 60 "$@" python3 -m inference.bench --shape "$shape" --tp 2 --tp-reduce fused \
    --tokens 256 --repeats 1 --json "$LOG/bench-$name.json"
}
for shape in ${SHAPES:-qwen2.5-coder-1.5b qwen2.5-coder-3b}; do
  bench "$shape-before" "$shape" "${before[@]}"; bench "$shape" "$shape"
done
step prof-1.5b-tp2-fused 120 python3 -m lab.profile_step qwen2.5-coder-1.5b --tp 2 --ranks --reduce fused --no-floor
tar -czf "$OUT/logs.tgz" -C "$OUT" tpargmax
summary
for f in "$LOG"/bench-*.log; do echo "$(basename "$f" .log): $(grep -E "^\| bfloat16" "$f" | cut -d'|' -f5,6) $(grep -E "compute" "$f" | sed 's/.*compute/compute/')"; done
grep -A16 "^\[" "$LOG/prof-1.5b-tp2-fused.log" | grep -v "^  kernel"
true
