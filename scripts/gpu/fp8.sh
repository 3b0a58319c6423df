#!/usr/bin/env bash
# FP8 weights on the GPU (issue 24): the FP8 GPU tests, the bench with FP8 and bf16 in one call per shape
# (1.5B, Llama-3.2-1B, 3B shapes: tok/s, MBU from bytes read, the read / rest split), and the quality gate on
# the real model at $MODEL (fast path, FP8 vs bf16) when inference.quality is there.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf bash scripts/gpu/fp8.sh     logs: $OUT/fp8/, a table last
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/fp8; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
summary=()
step() {  # step NAME CMD...: run with its log in $LOG/NAME.log, remember the exit status
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $*"
  "$@" > "$LOG/$name.log" 2>&1
  local rc=$?
  tail -4 "$LOG/$name.log"
  summary+=("$(printf '%-22s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
}
step gpu-tests python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -x \
  tests/kernels/test_fp8_gemv.py tests/inference/test_fp8_fast_path.py
for shape in qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b; do
  step "bench-$shape" python3 -m inference.bench --shape "$shape" --weights fp8,bf16 --ttft 128 \
    --json "$LOG/bench-$shape.json"
done
if python3 -c "import inference.quality" 2>/dev/null && [ -f "$MODEL" ]; then
  step quality-fp8 python3 -m inference.quality --model "$MODEL" --device cuda --weights fp8
  step quality-bf16 python3 -m inference.quality --model "$MODEL" --device cuda
else
  echo "quality: skipped (inference.quality or $MODEL missing)"
fi
echo "=== FP8 vs bf16, batch 1, ctx 512"
for shape in qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b; do
  grep -h "^| fp8 | 512 \|^| bfloat16 | 512 \|^speed-up" "$LOG/bench-$shape.log" 2>/dev/null | sed "s/^/$shape /"
done
for q in quality-fp8 quality-bf16; do [ -f "$LOG/$q.log" ] && echo "$q: $(tail -3 "$LOG/$q.log" | tr '\n' ' ')"; done
echo "=== summary"; printf '%s\n' "${summary[@]}"
