#!/usr/bin/env bash
# Seventeenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b and
# .before = `git archive <rev> inference kernels lab`): an A/B of a change to the Triton decode attention (run for
# its first tile loaded before the PDL wait, not kept, and for column 0 skipping the window block). Its outputs
# before / now on fixed inputs (scripts/gpu/attn_bits.py: must be the same bits), its kernel tests, then the default
# model's plain decode, the edit workload and the verify step before / now, ROUNDS times in turn.
# Usage: OUT=... BUDGET=560 [ROUNDS=2] [CHECKS=1] bash scripts/gpu/s17c.sh     logs: $OUT/s17c/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s17c
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
ab_setup
if [ "${CHECKS:-1}" = 1 ]; then
step bits-before 90 "${before[@]}" python3 "$PWD/scripts/gpu/attn_bits.py" save "$LOG/bits-before.pt"
step bits-now 90 "${now[@]}" python3 scripts/gpu/attn_bits.py save "$LOG/bits-now.pt"
step bits 30 python3 scripts/gpu/attn_bits.py compare "$LOG/bits-before.pt" "$LOG/bits-now.pt"
rm -f "$LOG"/bits-*.pt
step attn-tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x tests/kernels/test_decode_attention.py \
  tests/kernels/test_decode_attention_cols.py
fi
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in before now; do
    if [ "$t" = before ]; then tree=("${before[@]}"); else tree=("${now[@]}"); fi
    step "decode-$t-$r" 60 "${tree[@]}" python3 -m inference.bench --model "$MODEL" --tokens 256 --contexts 4096
    step "edit-$t-$r" 100 "${tree[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 \
      --repeats 3
  done
done
step verify-before 60 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --families cols
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --families cols
tar -czf "$OUT/logs.tgz" -C "$OUT" s17c
summary
[ -f "$LOG/bits.log" ] && tail -1 "$LOG/bits.log"
for f in "$LOG"/decode-*.log; do echo "== $(basename "$f"): $(grep -E "^\| [a-z0-9]+ \| [0-9]+ \|" "$f" | tr -s ' ')"; done
for f in "$LOG"/edit-*.log; do echo "== $(basename "$f"): $(grep -E "\(all\)" "$f" | tr -s ' ' | tr '\n' ' ')"; done
for f in "$LOG"/verify-*.log; do echo "== $(basename "$f")"; tail -4 "$f"; done
true
