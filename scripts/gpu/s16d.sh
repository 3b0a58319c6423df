#!/usr/bin/env bash
# Sixteenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b): is
# the speculative loop's plain decode with 2 steps in flight host-bound because of how its tokens are read? The edit
# workload (speculation off and on, best of 3 per prompt) as the tree runs it ("now") and with every plain token of
# the loop read by a busy poll instead of the sleep(0) poll ("spin": a patch for the measurement, not a setting),
# ROUNDS times in turn on the same machine.
# Usage: OUT=... BUDGET=400 [ROUNDS=2] bash scripts/gpu/s16d.sh   logs: $OUT/s16d/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s16d
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
SPIN='import inference.engine as E, numpy as np
def _spin(token, last_on=None):
    if token.device.type != "cpu":
        return int(token.item())
    view = token.numpy()
    while view[0] < 0:
        pass
    return int(view[0])
E._read_token = _spin'
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
for r in $(seq 1 "${ROUNDS:-2}"); do
  step "edit-now-$r" 100 python3 -m inference.bench "${EDIT[@]}"
  step_patched "edit-spin-$r" 100 "$SPIN" inference.bench "${EDIT[@]}"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s16d
summary
for f in "$LOG"/edit-*.log; do echo "== $(basename "$f" .log)"; grep -E "\(all\)|^\| new2" "$f"; done
true
