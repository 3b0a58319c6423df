#!/usr/bin/env bash
# README's figures of the default model (issue 25), before (the tree in $BEFORE: inference/ + kernels/ of an
# older commit, run from inside it) and now, one H200, the default model in $MODEL: the decode bench, the
# edit workload, the verify bench on the model, the quality gate of the default kernels.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=500 [NAME=final6] bash scripts/gpu/final6.sh
#   (SKIP_NOW=1: before only)   logs: $OUT/$NAME/ (and $OUT/logs.tgz), a table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; NAME=${NAME:-final6}; LOG=$(realpath -m "$OUT/$NAME"); mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
BEFORE=${BEFORE:-.before}
source scripts/gpu/lib.sh
DECODE=(-m inference.bench --model "$MODEL" --context 512 --contexts 4096 --ttft 128,1024 --tokens 256)
EDIT=(-m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1)
# the older tree's modules, run from inside it (python -m puts the working directory first)
BEFORE_RUN=(env -C "$BEFORE" PYTHONPATH="$(realpath "$BEFORE"):${PYTHONPATH#*:}" python3)
step decode-before 60 "${BEFORE_RUN[@]}" "${DECODE[@]}" --json "$LOG/decode-before.json"
[ -n "${SKIP_NOW:-}" ] || step decode-now 60 python3 "${DECODE[@]}" --json "$LOG/decode-now.json"
step edit-before 60 "${BEFORE_RUN[@]}" "${EDIT[@]}" --json "$LOG/edit-before.json"
[ -n "${SKIP_NOW:-}" ] || step edit-now 60 python3 "${EDIT[@]}" --json "$LOG/edit-now.json"
[ -n "${SKIP_NOW:-}" ] || step verify-model 90 python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-model.json"
[ -n "${SKIP_NOW:-}" ] || step quality 90 python3 -m inference.quality --model "$MODEL" --device cuda --json "$LOG/quality.json"
tar -czf "$OUT/logs.tgz" -C "$OUT" "$NAME"
summary
for f in decode-before decode-now; do echo "$f:"; grep -E "^\| bf16|TTFT" "$LOG/$f.log"; done
for f in edit-before edit-now; do echo "$f:"; grep -E "\(all\)" "$LOG/$f.log"; done
grep -E "^\|" "$LOG/verify-model.log" | tail -9
tail -3 "$LOG/quality.log"
true
