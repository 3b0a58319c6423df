#!/usr/bin/env bash
# The last session's final device call (rerunnable): GPU tests of the kernels and the engine, the step
# with Triton vs overlap GEMVs, the 1.5B per-CTA trace, the streamed gate/up with dynamic tiles (and
# tensor-map copies) against the runner's GEMVs, then the three benchmarks.
# Usage (repo root, on the device): bash scripts/session_run.sh ; logs under $OUT, a table last.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/scripts:$PWD
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/gpu.txt"
timeout 500 python3 -m pytest -m gpu tests/kernels tests/inference -q -p no:cacheprovider -o addopts="" > "$OUT/gpu-tests.log" 2>&1
tail -3 "$OUT/gpu-tests.log"
timeout 300 python3 scripts/probe_step_mix.py --variants triton,overlap > "$OUT/ab-gemv-512.log" 2>&1
timeout 100 python3 scripts/trace_step_ctas.py qwen2.5-coder-1.5b > "$OUT/trace-ctas-1.5b.log" 2>&1
R=qkv64+aE+o80S+gu164+C
timeout 300 python3 scripts/probe_overlap.py qwen2.5-coder-1.5b $R+k32_16,$R+D,$R+D+TM > "$OUT/ab-dynamic-1.5b.log" 2>&1
timeout 300 python3 scripts/probe_overlap.py qwen2.5-coder-3b aE+o80,aE+o80S+gu144+C+D,aE+o80S+gu144+C+D+TM > "$OUT/ab-dynamic-3b.log" 2>&1
timeout 300 python3 -m inference.bench --shape qwen2.5-coder-1.5b --contexts 4096,16384 --vs hf --json "$OUT/bench-qwen2.5-coder-1.5b.json" > "$OUT/bench-1.5b.log" 2>&1
timeout 200 python3 -m inference.bench --shape qwen3-1.7b --contexts 4096,16384 --json "$OUT/bench-qwen3-1.7b.json" > "$OUT/bench-qwen3.log" 2>&1
timeout 200 python3 -m inference.bench --shape qwen2.5-coder-3b --contexts 4096,16384 --json "$OUT/bench-qwen2.5-coder-3b.json" > "$OUT/bench-3b.log" 2>&1
sed -n '/^| shape/,$p' "$OUT/ab-gemv-512.log" "$OUT"/ab-dynamic-*.log
for f in "$OUT"/bench-*.log; do echo "--- $f"; sed -n '/^| context/,$p' "$f" | tail -8; done
