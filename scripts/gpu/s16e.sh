#!/usr/bin/env bash
# Sixteenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b): what
# slows the speculative loop's plain steps, if anything? The edit workload (speculation off and on, best of 3 per
# prompt) as the tree runs it ("now") and with each of VARIANTS, patches for the measurement, not settings: "spin"
# every plain token of the loop read by a busy poll instead of the sleep(0) poll, "freeze" gc.freeze() after the
# engine loads (the loaded objects leave the collector's generations), "nogc" the collector off; ROUNDS times in turn
# on the same machine. (The session's spin/ logs: VARIANTS=spin; gc/: the default.)
# Usage: OUT=... BUDGET=450 [ROUNDS=2] [VARIANTS="freeze nogc"] bash scripts/gpu/s16e.sh
#   logs: $OUT/s16e/ (and $OUT/logs.tgz)
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
patch() {  # patch VARIANT: its python
  case $1 in
    spin) echo 'import inference.engine as E
def _spin(token, last_on=None):
    if token.device.type != "cpu":
        return int(token.item())
    view = token.numpy()
    while view[0] < 0:
        pass
    return int(view[0])
E._read_token = _spin' ;;
    freeze) after_load 'gc.collect(); gc.freeze()' ;;
    nogc) after_load 'gc.collect(); gc.disable()' ;;
    *) echo "raise SystemExit('unknown variant $1')" ;;
  esac
}
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
for r in $(seq 1 "${ROUNDS:-2}"); do
  step "edit-now-$r" 100 python3 -m inference.bench "${EDIT[@]}"
  for v in ${VARIANTS-freeze nogc}; do
    step_patched "edit-$v-$r" 100 "$(patch "$v")" inference.bench "${EDIT[@]}"
  done
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s16e
summary
for f in "$LOG"/edit-*.log; do echo "== $(basename "$f" .log)"; grep -E "\(all\)|^\| new2" "$f"; done
true
