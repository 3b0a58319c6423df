#!/usr/bin/env bash
# One GPU after the fused tensor-parallel reduction landed in kernels/stream_gemv (its FUSE 0 variants are the
# one-GPU path's): every GPU test (scripts/gpu/check.sh), then the 1.5B and 3B decode bench from the $BEFORE tree
# and from this one, alternating, in one call. Usage: OUT=... BEFORE=.before bash scripts/gpu/fused1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window fused1
OUT=$LOG LIMIT_TESTS=330 bash scripts/gpu/check.sh > "$LOG/check.txt" 2>&1
for shape in qwen2.5-coder-1.5b qwen2.5-coder-3b; do
  for tree in before now; do
    if [ $tree = before ]; then pre=("${before[@]}"); else pre=("${now[@]}"); fi
    step "bench-$shape-$tree" 60 "${pre[@]}" python3 -m inference.bench --shape "$shape" --tokens 256 --repeats 3
  done
done
tar -czf "$OUT/logs.tgz" -C "$OUT" fused1
summary
tail -4 "$LOG/check.txt"
for f in "$LOG"/bench-*.log; do echo "$(basename "$f" .log): $(grep -E "^\| bfloat16" "$f" | cut -d'|' -f5,6)"; done
