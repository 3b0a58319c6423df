#!/usr/bin/env bash
# Tensor parallel on a 2-GPU machine (NVLink), in about 5 minutes: the gpu tests of
# tests/inference/test_parallel.py (each alone, under a hard timeout, with faulthandler tracebacks
# if it hangs), the all-reduce latency at decode sizes, and inference.bench on the 1.5B and 3B
# shapes at TP=1 (one-GPU fast path) and TP=2 (fast ranks: greedy decode in one CUDA graph per
# rank with NCCL or symmetric-memory all-reduces; the split into compute and sync). Steps run in
# priority order and are skipped (said so in the table) once the time budget is spent. On one GPU
# the TP=2 steps skip.
# $MODEL is not needed (random weights of each shape). Logs under $OUT/tp/, a table last.
# env: OUT (default out), BUDGET (seconds, default 270; up to ~570 in a call of its own), TOKENS (bench tokens, default 256)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}/tp; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/site ] && export PYTHONPATH=$PYTHONPATH:/tmp/site
# NVLink multicast stays off (inference.parallel.launch sets the same before starting ranks).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
BUDGET=${BUDGET:-270}; TOKENS=${TOKENS:-256}
NGPU=$(python -c "import torch; print(torch.cuda.device_count())")
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvidia-smi topo -m; } > "$OUT/gpu.txt" 2>&1
: > "$OUT/table.md"

# step NAME LIMIT_S MIN_GPUS CMD...: run CMD under a hard timeout (SIGINT, so pytest and faulthandler
# print where it hung) unless the budget is spent or the GPUs are too few; one table row.
step() {
  local name=$1 limit=$2 gpus=$3; shift 3
  local left=$((BUDGET - SECONDS))
  if [ "$NGPU" -lt "$gpus" ]; then echo "| $name | skipped: needs $gpus GPUs |" >> "$OUT/table.md"; return; fi
  if [ "$left" -lt 40 ]; then echo "| $name | skipped: time budget spent |" >> "$OUT/table.md"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout -s INT -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local last; last=$(grep -E "passed|failed|skipped|error|Error" "$OUT/$name.log" | tail -1 | cut -c1-110)
  echo "| $name | rc=$rc in $((SECONDS - t0)) s${last:+: $last} |" >> "$OUT/table.md"
  echo "$name rc=$rc $((SECONDS - t0)) s"
}
T="python -m pytest -q -x -s -p no:randomly -o faulthandler_timeout=150 tests/inference/test_parallel.py::"
bench() {  # bench SHAPE TP [REDUCE]
  step "bench-$1-tp$2${3:+-$3}" 100 "$2" python -m inference.bench --shape "$1" --tp "$2" --tp-reduce "${3:-nccl}" \
    --tokens "$TOKENS" --repeats 2 --ttft 128 --json "$OUT/bench-$1-tp$2${3:+-$3}.json"
}
F=test_fast_ranks_decode_in_one_graph_like_their_kernels_and_the_one_gpu_fast_path

step test-fast-1.5b-nccl 170 2 $T"$F[qwen2.5-coder-1.5b-nccl-2]"
bench qwen2.5-coder-1.5b 2 nccl
bench qwen2.5-coder-3b 1
bench qwen2.5-coder-3b 2 nccl
step test-fast-qwen3 150 2 $T"$F[qwen3-1.7b-nccl-2]"
bench qwen2.5-coder-1.5b 1
step test-fast-1.5b-symm 150 2 $T"$F[qwen2.5-coder-1.5b-symm-2]"
bench qwen2.5-coder-1.5b 2 symm
step test-reference-1.5b 150 2 $T"test_nccl_tp_matches_the_single_gpu_paths[2-qwen2.5-coder-1.5b]"
step allreduce 60 2 python -m inference.parallel.allreduce_bench --tp 2 --sizes 1536,2048 --iters 200 --symm-mem
step test-one-rank 100 1 $T"test_a_one_rank_nccl_group_on_one_gpu_generates_the_reference_tokens"
step bench-qwen2.5-coder-1.5b-tp2-nccl-nopdl 100 2 python -m inference.bench --shape qwen2.5-coder-1.5b --tp 2 \
  --no-pdl --tokens "$TOKENS" --repeats 2 --ttft 128 --json "$OUT/bench-qwen2.5-coder-1.5b-tp2-nccl-nopdl.json"

grep -h "tp=2 fast ranks\|teacher-forced" "$OUT"/test-*.log 2>/dev/null | cut -c1-240
grep -h -A4 "^all-reduce" "$OUT/allreduce.log" 2>/dev/null
python - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
rows = []
for f in sorted(Path(sys.argv[1]).glob("bench-*.json")):
    r = json.loads(f.read_text())
    run = r["runs"][0]
    d = run["decode"][0]
    split = (f"{d['compute_ms_per_token']:.3f} / {d['sync_ms_per_token']:.3f} ({d['sync_us_per_collective']:.1f} us x "
             f"{d['collectives_per_token']})" if "sync_ms_per_token" in d else "-")
    ranks = run["runner"] + (f" ({run['tp_reduce']})" if run.get("tp_reduce") else "") + ("" if run["pdl"] else ", no PDL")
    rows.append(f"| {r['shape']} | {r['tp']} | {ranks} | {d['tok_s']:.0f} | {d['ms_per_token']:.3f} | {split} | "
                f"{run['sampled_decode']['tok_s']:.0f} | {r['gpu']} |")
print("\n| shape | tp | ranks | greedy tok/s @512 | ms/token | compute / sync ms/token | sampled tok/s | GPU |")
print("|---|---:|---|---:|---:|---|---:|---|")
print("\n".join(rows) or "| (no bench ran) |")
EOF
echo
echo "| step | result |"
echo "|---|---|"
cat "$OUT/table.md"
