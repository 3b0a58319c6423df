#!/usr/bin/env bash
# Sixteenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b): does
# Python's cyclic garbage collector cost the speculative loop's plain steps (2 in flight near drafts) their device
# time? The edit workload (speculation off and on, best of 3 per prompt) as the tree runs it ("now"), with gc.freeze()
# after the engine loads ("freeze": the loaded objects leave the collector's generations) and with the collector
# off ("nogc"): patches for the measurement, not settings; ROUNDS times in turn on the same machine.
# Usage: OUT=... BUDGET=450 [ROUNDS=2] bash scripts/gpu/s16e.sh   logs: $OUT/s16e/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s16e
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
after_load() {  # python: run $1 right after Engine.from_pretrained returns
  echo "import gc
from inference.engine import Engine
_load = Engine.from_pretrained.__func__
def _patched(cls, *a, **k):
    e = _load(cls, *a, **k)
    $1
    return e
Engine.from_pretrained = classmethod(_patched)"
}
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
for r in $(seq 1 "${ROUNDS:-2}"); do
  step "edit-now-$r" 100 python3 -m inference.bench "${EDIT[@]}"
  step_patched "edit-freeze-$r" 100 "$(after_load 'gc.collect(); gc.freeze()')" inference.bench "${EDIT[@]}"
  step_patched "edit-nogc-$r" 100 "$(after_load 'gc.collect(); gc.disable()')" inference.bench "${EDIT[@]}"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s16e
summary
for f in "$LOG"/edit-*.log; do echo "== $(basename "$f" .log)"; grep -E "\(all\)|^\| new2" "$f"; done
true
