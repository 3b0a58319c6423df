#!/usr/bin/env bash
# The last session's final device calls (rerunnable), in two parts that each fit one 10-minute call:
#   bash lab/session_run.sh check   GPU tests of the kernels and the engine; the step with Triton vs
#                                       overlap GEMVs (and overlap without the Triton GEMVs' lookahead,
#                                       or without down_proj's L2 prefetch);
#                                       the LM head launch alone by config vs a pure read;
#                                       the engine's decode vs the same graph replayed back to back
#   bash lab/session_run.sh bench   the three benchmarks
# Run from the repo root on the device; logs under $OUT (also packed into $OUT/logs-PART.tgz), a table last.
set -uo pipefail
PART=${1:-check}
OUT=${OUT:-out}; mkdir -p "$OUT/$PART"
L=$OUT/$PART
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv > "$L/gpu.txt"
if [ "$PART" = check ]; then
  timeout 330 python3 -m pytest -m gpu tests/kernels tests/inference -q -p no:cacheprovider -o addopts="" \
    > "$L/gpu-tests.log" 2>&1
  tail -3 "$L/gpu-tests.log"
  timeout 200 python3 -m lab.probe_step_mix --variants triton,overlap,overlap/0,overlap/n \
    > "$L/ab-gemv-512.log" 2>&1
  timeout 40 python3 -m lab.probe_lm_head --configs 16_256_4_1,32_128_4_1 > "$L/lm-head.log" 2>&1
  timeout 100 python3 -m lab.probe_pacing qwen2.5-coder-1.5b,qwen2.5-coder-3b --lags 8 > "$L/pacing.log" 2>&1
  sed -n '/^| shape/,$p' "$L/ab-gemv-512.log" "$L/lm-head.log" "$L/pacing.log"
else
  timeout 260 python3 -m inference.bench --shape qwen2.5-coder-1.5b --contexts 4096,16384 --vs hf \
    --json "$L/bench-qwen2.5-coder-1.5b.json" > "$L/bench-1.5b.log" 2>&1
  timeout 150 python3 -m inference.bench --shape qwen3-1.7b --contexts 4096,16384 \
    --json "$L/bench-qwen3-1.7b.json" > "$L/bench-qwen3.log" 2>&1
  timeout 150 python3 -m inference.bench --shape qwen2.5-coder-3b --contexts 4096,16384 \
    --json "$L/bench-qwen2.5-coder-3b.json" > "$L/bench-3b.log" 2>&1
  for f in "$L"/bench-*.log; do echo "--- $f"; sed -n '/^| context/,$p' "$f" | tail -8; done
fi
tar czf "$OUT/logs-$PART.tgz" -C "$OUT" "$PART" && rm -rf "$L"
