#!/usr/bin/env bash
# FP8 weights on the GPU (issue 24): the FP8 GPU tests, the quality gate on the real model at $MODEL (fast path,
# FP8 and bf16 against the float32 reference: FP8 perplexity within 1% of bf16's, top-1 agreement >= 97%), and
# the bench with FP8 and bf16 in one call per shape (1.5B, Llama-3.2-1B, 3B shapes: tok/s, MBU from the bytes
# read incl. scales, the read / rest split). ~4 minutes on an H100.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf bash scripts/gpu/fp8.sh     logs: $OUT/fp8/, a table last
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/fp8; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
SHAPES="qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b"
summary=()
step() {  # step NAME CMD...: run with its log in $LOG/NAME.log, remember the exit status
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $*"
  "$@" > "$LOG/$name.log" 2>&1
  local rc=$?
  tail -4 "$LOG/$name.log"
  summary+=("$(printf '%-30s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt" 2>&1
step gpu-tests timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" \
  tests/kernels/test_fp8_gemv.py tests/inference/test_fp8_fast_path.py
if [ -f "$MODEL" ]; then
  for w in fp8 bf16; do
    step "quality-$w" timeout 90 python3 -m inference.quality --model "$MODEL" --device cuda --weights "$w" \
      --tokens 2048 --window 512 --json "$LOG/quality-$w.json"
  done
else
  echo "quality: skipped ($MODEL missing)"
fi
for shape in $SHAPES; do
  step "bench-$shape" timeout 100 python3 -m inference.bench --shape "$shape" --weights fp8,bf16 --ttft 128 \
    --tokens 256 --json "$LOG/bench-$shape.json"
done
echo "=== summary"; printf '%s\n' "${summary[@]}"
echo "=== FP8 vs bf16: quality gate (real model, fast path) and decode, batch 1, ctx 512 ($(tail -1 "$LOG/gpu.txt"))"
python3 - "$LOG" $SHAPES <<'EOF'
import json, sys
from pathlib import Path

log, shapes = Path(sys.argv[1]), sys.argv[2:]
q = {w: json.loads(p.read_text())["test"] for w in ("fp8", "bf16") if (p := log / f"quality-{w}.json").exists()}
if q:
    print("| weights | tokens | perplexity | top-1 agreement vs float32 | logits rel. err |")
    print("|---|---:|---:|---:|---:|")
    for w, t in q.items():
        print(f"| {w} | {t['tokens']} | {t['perplexity']:.3f} | {100 * t['top1_agreement']:.2f}% | {t['logits_rel_err']:.2e} |")
    if len(q) == 2:
        d = q["fp8"]["perplexity"] / q["bf16"]["perplexity"] - 1
        ok = d <= 0.01 and q["fp8"]["top1_agreement"] >= 0.97
        print(f"gate: FP8 perplexity {100 * d:+.2f}% vs bf16 (<= 1%), agreement "
              f"{100 * q['fp8']['top1_agreement']:.2f}% (>= 97%): {'PASS' if ok else 'FAIL'}")
else:
    print("quality: no results")
EOF
echo
python3 scripts/gpu/fp8_table.py "$LOG" $SHAPES
