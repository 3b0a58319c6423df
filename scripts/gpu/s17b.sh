#!/usr/bin/env bash
# Seventeenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b):
# where the default model's verify step goes now (`lab.profile_verify`, cols family, 1 / 8 / 16 columns), then the
# edit workload as the tree runs it and with the widest same-bits configs past 8 columns (a patch of config_for:
# gate/up 4 row pairs a warp, down_proj 8 rows and 4 columns per CTA; a measurement, not a setting), ROUNDS in turn.
# Usage: OUT=... BUDGET=400 [ROUNDS=2] bash scripts/gpu/s17b.sh     logs: $OUT/s17b/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s17b
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
step profile 90 python3 -m lab.profile_verify --model "$MODEL" --families cols --widths 8,16
WIDE="import dataclasses, kernels.cols_gemv as m
base = m.config_for
def wide(mode, n, k, ncols=1):
    c = base(mode, n, k, ncols)
    if ncols > 8 and mode == 'gate_up' and c.CG == 8: return dataclasses.replace(c, R=4)
    if ncols > 8 and mode == 'residual' and c.R == 4 and c.CG == 2: return dataclasses.replace(c, R=8, CG=4)
    return c
m.config_for = wide"
for r in $(seq 1 "${ROUNDS:-2}"); do
  step "edit-now-$r" 100 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 3
  step_patched "edit-wide-$r" 100 "$WIDE" inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 3
done
step_patched verify-wide 60 "$WIDE" inference.bench --workload verify --model "$MODEL" --families cols
tar -czf "$OUT/logs.tgz" -C "$OUT" s17b
summary
grep -E "^\|" "$LOG/profile.log" | head -12
for f in "$LOG"/edit-*.log; do echo "== $(basename "$f"): $(grep -E "\(all\)" "$f" | tr -s ' ' | tr '\n' ' ')"; done
tail -6 "$LOG/verify-wide.log"
true
