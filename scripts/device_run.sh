#!/usr/bin/env bash
# One call on the GPU machine: GPU tests, kernel micro-benchmarks, decode benchmarks.
# Usage (from the repo root on the device): bash scripts/device_run.sh [quick|tests|bench|all|sweep|attention|gemv]
# (sweep: the in-step GEMV config sweep of kernels/sweep_gemv.py for each shape, ~1 min each;
#  attention: the CUDA cluster attention's GPU tests, then the step with it vs the Triton kernel,
#  then its in-step %globaltimer trace;
#  gemv: the CUDA GEMVs of kernels/stream_gemv.py: their GPU tests, the engine test against the
#  Triton GEMVs, the per-op / traced probe of scripts/probe_stream_gemv.py, then the step with
#  each use_gemv mode)
# Logs go to $OUT (or ./out); a short summary table is printed last.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
what=${1:-all}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
summary=()
step() {  # step NAME CMD... : run, log to $OUT/NAME.log, remember the exit status
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-28s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
}
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"

if [[ $what == quick || $what == tests || $what == all ]]; then
  step gpu-tests python3 -m pytest -m gpu tests/kernels tests/inference -q -p no:cacheprovider -o addopts="" -s
fi
if [[ $what == quick ]]; then
  step kernels-bench python3 -m kernels.bench_kernels
  step bench-quick python3 -m inference.bench --shape qwen2.5-coder-1.5b --tokens 256 --repeats 2 --ttft 128,1024 --json "$OUT/bench-quick.json"
fi
if [[ $what == bench || $what == all ]]; then
  step kernels-bench python3 -m kernels.bench_kernels
  step bench-1.5b python3 -m inference.bench --shape qwen2.5-coder-1.5b --contexts 4096,16384 --vs hf --json "$OUT/bench-qwen2.5-coder-1.5b.json"
  step bench-qwen3 python3 -m inference.bench --shape qwen3-1.7b --contexts 4096,16384 --json "$OUT/bench-qwen3-1.7b.json"
  step bench-3b python3 -m inference.bench --shape qwen2.5-coder-3b --contexts 4096,16384 --json "$OUT/bench-qwen2.5-coder-3b.json"
fi
if [[ $what == attention ]]; then
  step cluster-tests python3 -m pytest -m gpu tests/kernels/test_cluster_attention.py -x -q -p no:cacheprovider -o addopts=""
  step inference-gpu-tests python3 -m pytest -m gpu tests/inference -q -p no:cacheprovider -o addopts=""
  step ab-attention python3 scripts/ab_step.py --what attention
  step trace-attention timeout 120 python3 scripts/trace_cluster_attention.py
fi
if [[ $what == gemv ]]; then
  step stream-tests timeout 300 python3 -m pytest -m gpu tests/kernels/test_stream_gemv.py -x -q -p no:cacheprovider -o addopts=""
  step engine-gemv-tests timeout 300 python3 -m pytest -m gpu tests/inference/test_fast_path.py -k gemv -x -q -p no:cacheprovider -o addopts=""
  step probe-gemv timeout 300 python3 scripts/probe_stream_gemv.py
  step ab-gemv timeout 400 python3 scripts/probe_step_mix.py
fi
if [[ $what == sweep ]]; then
  for shape in qwen2.5-coder-1.5b qwen3-1.7b qwen2.5-coder-3b; do
    step "sweep-$shape" python3 -m kernels.sweep_gemv --shape "$shape"
  done
fi
echo; echo "=== summary"; printf '%s\n' "${summary[@]}"
for f in "$OUT"/ab-*.log; do [ -f "$f" ] && sed -n '/^| shape/,$p' "$f"; done
for f in "$OUT"/bench-*.log; do [ -f "$f" ] && { echo "--- $f"; sed -n '/^| context/,$p' "$f" | tail -12; }; done
