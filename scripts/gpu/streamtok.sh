#!/usr/bin/env bash
# Issue 25, thirteenth session: the streamed GEMVs over several tokens a launch (kernels/csrc/stream_gemv.cu NTOK),
# in one call on one GPU: the kernels' gpu tests (every token's bits = its one-token launch's; the one-token
# kernels against their references; the fused variants), lab.probe_stream_tokens (us per launch at 1..8 tokens vs
# the Triton column twins), then the 1.5B's one-GPU step with this tree and with $BEFORE's (the one-token kernels
# rebuilt from the token-generic code: speed unchanged?), random weights, ctx 512, 256 tokens, one run each.
# Usage: OUT=... BEFORE=.before BUDGET=400 bash scripts/gpu/streamtok.sh   logs: $OUT/streamtok/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window streamtok
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONFAULTHANDLER=1
T=(python3 -m pytest -q -x -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=90)
step kernel-tests 200 "${T[@]}" -m gpu tests/kernels/test_stream_gemv.py tests/kernels/test_fused_reduce.py
if ! grep -q " passed" "$LOG/kernel-tests.log" || grep -q " failed" "$LOG/kernel-tests.log"; then
  summary; tail -40 "$LOG/kernel-tests.log"; tar -czf "$OUT/logs.tgz" -C "$OUT" streamtok; exit 0
fi
step probe 120 python3 -m lab.probe_stream_tokens ${PROBE_ARGS:-}
bench() {  # bench NAME [PREFIX...]
  local name=$1; shift
  step "bench-$name" 60 "$@" python3 -m inference.bench --shape qwen2.5-coder-1.5b --tokens 256 --repeats 1 \
    --json "$LOG/bench-$name.json"
}
bench 1.5b-before "${before[@]}"; bench 1.5b
tar -czf "$OUT/logs.tgz" -C "$OUT" streamtok
summary
grep -E "^\|" "$LOG/probe.log"
for f in "$LOG"/bench-*.log; do echo "$(basename "$f" .log): $(grep -E "^\| bfloat16" "$f" | cut -d'|' -f5,6)"; done
true
