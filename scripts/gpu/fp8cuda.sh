#!/usr/bin/env bash
# The CUDA C FP8 GEMVs (kernels.fp8_cuda_gemv, issue 24) on the GPU: their tests (each op vs its reference at the
# 1.5B / Llama-1B / 3B / Qwen3-1.7B layer shapes; the FP8 fast path with them as the default), the per-launch
# timing of each CUDA FP8 GEMV vs the Triton FP8 one vs bf16 on the 1.5B shapes (lab.probe_fp8_cuda), then the
# 1.5B bench with FP8 and bf16 in one call, then where the Qwen3-1.7B shape's greedy tokens differ between graph
# and eager (scripts/gpu/fp8_graph_eager.py), as time allows. <= 150 s. Logs: $OUT/fp8cuda/, tables last.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf bash scripts/gpu/fp8cuda.sh     ($MODEL is not needed here)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/fp8cuda; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
summary=()
BUDGET=${BUDGET:-148}  # seconds for all steps (the window kills at 170 s; the tables come after)
step() {  # step NAME SECONDS CMD...: run with its log in $LOG/NAME.log under a timeout (at most what is left of
  # BUDGET), remember the exit status
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS left=$((BUDGET - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then summary+=("$(printf '%-22s skipped (no time left)' "$name")"); return; fi
  echo "=== $name: $*"
  timeout "$limit" "$@" > "$LOG/$name.log" 2>&1
  local rc=$?
  tail -5 "$LOG/$name.log"
  summary+=("$(printf '%-22s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt" 2>&1
PYTEST=(python3 -m pytest -m gpu -q -x -p no:cacheprovider -p no:randomly -o addopts="" -rfE)
step kernel-tests 50 "${PYTEST[@]}" tests/kernels/test_fp8_cuda_gemv.py
step bench-1.5b 45 python3 -m inference.bench --shape qwen2.5-coder-1.5b --weights fp8,bf16 --tokens 256 \
  --json "$LOG/bench.json"
step fast-path-tests 25 "${PYTEST[@]}" tests/inference/test_fp8_fast_path.py -k "qwen2.5-coder-1.5b and (runs or teacher_forced_match or default)"
step probe 40 python3 -m lab.probe_fp8_cuda --shapes qwen2.5-coder-1.5b
step qwen3-graph-eager 30 python3 scripts/gpu/fp8_graph_eager.py --shape qwen3-1.7b --layers 4 --tokens 64
echo "=== summary"; printf '%s\n' "${summary[@]}"
echo "=== qwen3-1.7b shape, FP8, greedy: graph vs eager"; grep -h "^attention" "$LOG/qwen3-graph-eager.log" 2>/dev/null
echo "=== CUDA FP8 GEMVs per launch (1.5B shapes, $(tail -1 "$LOG/gpu.txt"))"
if grep -q "^| shape | weight" "$LOG/probe.log"; then sed -n '/^| shape | weight/,$p' "$LOG/probe.log"
else grep -h "^  qwen" "$LOG/probe.log"; fi  # the probe was cut short: its lines so far
grep -h "^best cuda" "$LOG/probe.log"
echo "=== bench: qwen2.5-coder-1.5b, batch 1, ctx 512, FP8 and bf16 in one call"
python3 - "$LOG/bench.json" <<'EOF'
import json, sys
from pathlib import Path

p = Path(sys.argv[1])
if not p.exists():
    print("(no bench result)")
    sys.exit(0)
runs = {r["weights"]: r["decode"][0] for r in json.loads(p.read_text())["runs"]}
print("| weights | tok/s | ms/token | GB read/token | MBU | read at copy bw | rest |")
print("|---|---:|---:|---:|---:|---:|---:|")
for w, r in runs.items():
    print(f"| {w} | {r['tok_s']:.0f} | {r['ms_per_token']:.3f} | {r['bytes_per_token'] / 1e9:.3f} | "
          f"{100 * r['mbu']:.0f}% | {r['read_ms']:.3f} ms | {r['rest_ms']:.3f} ms |")
if {"fp8", "bfloat16"} <= runs.keys():
    print(f"FP8/bf16: {runs['fp8']['tok_s'] / runs['bfloat16']['tok_s']:.2f}x")
EOF
