#!/usr/bin/env bash
# One device call that runs every GPU check and benchmark of scripts/gpu/<name>.sh (or the names given),
# each under its own time limit, logs under $OUT/<name>.log, a table last.
# Needs the real default model at $MODEL (default /tmp/smollm2.gguf): the device has no package
# registry, and the GGUF (98 MB) is over one call's 64 MiB, so it travels in two halves:
#   call 1 (carry .gpu/a):  bash scripts/gpu/model.sh stash
#   call 2 (carry .gpu/b, within ~30 s):  bash scripts/gpu/model.sh join && bash scripts/gpu/all.sh
# (.gpu/a, .gpu/b: `split -b 50000000` of the GGUF; .gpu/b also holds the gguf wheel.)
# Usage: bash scripts/gpu/all.sh [name ...]   env: OUT (logs), MODEL, LIMIT (seconds per script, 300)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export OUT PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/site ] && export PYTHONPATH=$PYTHONPATH:/tmp/site
export MODEL=${MODEL:-/tmp/smollm2.gguf}
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
if [ $# -gt 0 ]; then names=("$@"); else
  names=(); for f in scripts/gpu/*.sh; do n=$(basename "$f" .sh); [[ $n == all || $n == model ]] || names+=("$n"); done
fi
summary=()
for n in "${names[@]}"; do
  t0=$SECONDS
  echo "=== $n"
  timeout "${LIMIT:-300}" bash "scripts/gpu/$n.sh" > "$OUT/$n.log" 2>&1
  rc=$?
  summary+=("$(printf '%-14s rc=%-4s %4ss' "$n" "$rc" $((SECONDS - t0)))")
  tail -25 "$OUT/$n.log"
done
echo "=== summary"; printf '%s\n' "${summary[@]}"
