#!/usr/bin/env bash
# The tensor-parallel reduction fused into the streamed GEMVs (issue 28; --tp-reduce fused) against the flag
# reduction, in one call: the kernels' gpu tests (one device, ranks simulated), the TP gpu tests with fused
# (graph = eager, teacher-forced vs the one-GPU fast path), then per shape the bench at TP=N with flag and
# fused (and TP=1), random weights, ctx 512; FUSED_BUDGETS="65536 ..." also benches fused at those down_proj
# ring budgets, PATCHES="gate_up_budget=98304 ..." at those values of any int or bool field of kernels/tuning.py's
# row (each patched in this copy of the tree and put back after: measurements, not settings). SKIP_KERNELS=1 skips
# the kernels' tests; QWEN3="flag fused" (default fused, "" none) runs the Qwen3-shape TP=2 test with each reduction.
# Usage: OUT=... TP="4" TESTS_TP="2 4" SHAPES="qwen2.5-coder-1.5b qwen2.5-coder-3b" BUDGET=500 bash scripts/gpu/tpfused.sh
# logs: $OUT/tpfused/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$(realpath -m "$OUT/tpfused"); mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# NVLink multicast stays off (inference.parallel.launch sets the same before starting ranks).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
SHAPES=${SHAPES:-"qwen2.5-coder-1.5b qwen2.5-coder-3b"}; TOKENS=${TOKENS:-256}; TP=${TP:-4}; TESTS_TP=${TESTS_TP:-$TP}
NGPU=$(nvidia-smi -L | wc -l)
source scripts/gpu/lib.sh
{ nvidia-smi --query-gpu=name,memory.total --format=csv; nvidia-smi topo -m; } > "$LOG/gpu.txt" 2>&1
T=(python3 -m pytest -q -x -s -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=90)
if [ "${SKIP_KERNELS:-0}" != 1 ]; then
  step kernel-tests 150 "${T[@]}" -m gpu tests/kernels/test_fused_reduce.py tests/kernels/test_flag_reduce.py \
    tests/kernels/test_stream_gemv.py
  if [ "${KERNELS_ONLY:-0}" = 1 ] || ! grep -q " passed" "$LOG/kernel-tests.log" || grep -q " failed" "$LOG/kernel-tests.log"; then
    summary; tail -30 "$LOG/kernel-tests.log"; tar -czf "$OUT/logs.tgz" -C "$OUT" tpfused; exit 0
  fi
fi
F="tests/inference/test_parallel.py::test_fast_ranks_decode_in_one_graph_like_their_kernels_and_the_one_gpu_fast_path"
for tp in $TESTS_TP; do
  [ "$NGPU" -ge "$tp" ] && step "test-fused-tp$tp" 120 "${T[@]}" "$F[qwen2.5-coder-1.5b-fused-$tp]"
done
[ "$NGPU" -ge 2 ] && for r in ${QWEN3-fused}; do step "test-$r-qwen3" 120 "${T[@]}" "$F[qwen3-1.7b-$r-2]"; done
bench() {  # bench SHAPE TP REDUCE [NAME]
  step "bench-${4:-$1-tp$2-$3}" 60 python3 -m inference.bench --shape "$1" --tp "$2" --tp-reduce "$3" \
    --tokens "$TOKENS" --repeats 1 --json "$LOG/bench-${4:-$1-tp$2-$3}.json"
}
for shape in $SHAPES; do
  for tp in $TP; do
    [ "$NGPU" -ge "$tp" ] || continue
    bench "$shape" "$tp" flag; bench "$shape" "$tp" fused
  done
done
for b in ${FUSED_BUDGETS:-}; do PATCHES="${PATCHES:-} fused_down_budget=$b"; done
for patch in ${PATCHES:-}; do  # FIELD=VALUE: the tuning row's default of FIELD (an int or bool knob) set to VALUE
  field=${patch%%=*}; value=${patch#*=}
  cp kernels/tuning.py /tmp/tuning.py.orig
  sed -i -E "s/$field: (int|bool) = knob\([^,]*,/$field: \1 = knob($value,/" kernels/tuning.py
  grep -qE "$field: (int|bool) = knob\($value," kernels/tuning.py && for tp in $TP; do
    for shape in $SHAPES; do bench "$shape" "$tp" fused "$shape-tp$tp-fused-$field-$value"; done
  done
  cp /tmp/tuning.py.orig kernels/tuning.py
done
[ "${TP1:-1}" = 1 ] && for shape in $SHAPES; do bench "$shape" 1 auto; done
tar -czf "$OUT/logs.tgz" -C "$OUT" tpfused
summary
for f in "$LOG"/bench-*.log; do echo "$(basename "$f" .log): $(grep -E "^\| bfloat16" "$f" | cut -d'|' -f5,6) $(grep -E "compute" "$f" | sed 's/.*compute/compute/')"; done
grep -h "fast ranks\|fused" "$LOG"/test-*.log | grep -v "^tests\|PASSED\|passed" | cut -c1-240
true
