#!/usr/bin/env bash
# One GPU: the streamed gate/up prefetching its layer's down_proj into L2 (tuning knob gate_up_down_l2_prefetch;
# nineteenth session). The 1.5B shape (random weights, ctx 512) with the tuning rows patched to each of VARIANTS
# (bytes; a measurement, not a setting), ROUNDS times in turn: `inference.bench --workload verify --families
# overlap` (the default one-token step, the speculating plain step and its verify steps, all with the streamed
# gate/up). TESTS=1 (default): the fast path's CUDA-GEMV gpu tests with the rows patched to the largest variant.
# Usage: OUT=... BUDGET=400 [TESTS=0] [ROUNDS=2] [VARIANTS="0 4194304 ..."] bash scripts/gpu/s19b.sh   logs: $OUT/s19b/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s19b
VARIANTS=${VARIANTS:-0 4194304 12582912 29360128}
row() {  # python: every tuning row with gate_up_down_l2_prefetch=$1
  echo "import dataclasses, kernels.tuning as T; T.ROWS = tuple((n, dataclasses.replace(r, gate_up_down_l2_prefetch=$1)) for n, r in T.ROWS)"
}
if [ "${TESTS:-1}" = 1 ]; then
  last=${VARIANTS##* }
  step fast-tests 120 python3 -c "$(row "$last")
import sys, pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:randomly', '-p', 'no:cacheprovider', '-o', 'addopts=',
  'tests/inference/test_fast_path.py', '-k', 'cuda_gemvs']))"
fi
for r in $(seq 1 "${ROUNDS:-2}"); do
  for v in $VARIANTS; do
    step_patched "verify-$v-$r" 90 "$(row "$v")" inference.bench --workload verify --shape qwen2.5-coder-1.5b \
      --context 512 --families overlap
  done
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s19b
summary
for f in "$LOG"/verify-*.log; do echo "== $(basename "$f" .log)"; grep -E "^\| overlap .* 8 \||default kernels" "$f"; done
true
