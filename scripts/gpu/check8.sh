#!/usr/bin/env bash
# Issue 25: the speculative gpu tests on this tree (verify buckets 2, 4, 8), then where 16 columns break a verify
# step's bits (scripts/gpu/wide8.sh: one edit output of 8 differed, a 1.5B verify step's logits too): the verify
# attention and the Triton column kernels at 16 columns, and the 1.5B bit-for-bit test with a bucket of 16 (on a
# copy of the tree with those widths edited in). No model needed.
# Usage: OUT=... BUDGET=400 bash scripts/gpu/check8.sh   logs: $OUT/check8/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window check8
step tests 240 "${now[@]}" python3 -m pytest "${PYTEST[@]}" tests/inference/test_speculative_gpu.py
W=/tmp/wide16; rm -rf "$W"; mkdir -p "$W"; cp -r inference kernels tests pyproject.toml "$W"/
sed -i 's/else \[1, 8\]$/else [1, 8, 16]/' "$W/tests/kernels/test_decode_attention_cols.py" "$W/tests/kernels/test_cols_kernels.py"
sed -i 's/^BUCKETS = (2, 4, 8)$/BUCKETS = (2, 4, 8, 16)/' "$W/inference/speculative/fast_verify.py"
grep -n "^WIDTHS\|^BUCKETS" "$W/tests/kernels/test_decode_attention_cols.py" "$W/tests/kernels/test_cols_kernels.py" "$W/inference/speculative/fast_verify.py"
wide=(env -C "$W" PYTHONPATH="$W${PYTHONPATH:+:$PYTHONPATH}")
step attention16 90 "${wide[@]}" python3 -m pytest "${PYTEST[@]}" -rf tests/kernels/test_decode_attention_cols.py
step triton16 90 "${wide[@]}" python3 -m pytest "${PYTEST[@]}" -rf tests/kernels/test_cols_kernels.py
step bits16 120 "${wide[@]}" python3 -m pytest "${PYTEST[@]}" -rf tests/inference/test_speculative_gpu.py -k "bit_for_bit"
tar -czf "$OUT/logs.tgz" -C "$OUT" check8
summary
for f in tests attention16 triton16 bits16; do echo "== $f"; grep -hE "^FAILED|^E  .*(differ|column|rows)" "$LOG/$f.log" | head -12; done
true
