#!/usr/bin/env bash
# The lead's GPU checks for speculation on the real default model ($MODEL): the speculative GPU tests,
# the verify step's cost on SmolLM2-135M, the edit workload (off / on in one call), and the greedy outputs
# of the edit prompts for lab.probe_drafter (replayed on the CPU: --load). Logs under $OUT/lead/.
set -uo pipefail
cd "$(dirname "$0")/../.."
L=${OUT:-out}/lead; mkdir -p "$L"
MODEL=${MODEL:-/tmp/smollm2.gguf}
run() { local name=$1; shift; echo "=== $name: $*"; timeout "${STEP_LIMIT:-120}" "$@" > "$L/$name.log" 2>&1; echo "rc=$?"; tail -14 "$L/$name.log"; }
run spec-gpu-tests python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts= tests/inference/test_speculative_gpu.py
run verify-smollm2 python3 -m inference.bench --workload verify --model "$MODEL" --context 512 --json "$L/verify_smollm2.json"
run edit python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$L/edit.json"
run drafter python3 -m lab.probe_drafter --device cuda --model "$MODEL" --save "$L/drafter_runs.json"
