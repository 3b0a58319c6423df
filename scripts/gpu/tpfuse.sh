#!/usr/bin/env bash
# Tensor parallel with our flag all-reduce (--tp-reduce flag, kernels/flag_reduce.py) on a 2-GPU machine,
# in about 150 s: inference.bench per shape (TP=2 flag, TP=1, TP=2 NCCL, each TP=2 run with its
# compute/sync split) first, then the gpu tests of the flag path (the fast ranks' graph vs eager vs the
# one-GPU fast path; flag vs NCCL greedy tokens and close() within seconds), the all-reduce latency at
# decode sizes (NCCL / symmetric-memory one-shot / flag, each in a CUDA graph; the flag sums checked bit for
# bit; the distributed argmax). Steps run in priority order, each
# under its own timeout, and are skipped (said so in the table) once the budget is spent.
# $MODEL is not needed (random weights of the shape). Logs under $OUT/tpfuse/, a table last.
# env: OUT (default out), BUDGET (seconds, default 150), TOKENS (bench tokens, default 256),
#      SHAPES (bench shapes, default qwen2.5-coder-1.5b; the final window adds qwen2.5-coder-3b)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}/tpfuse; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/site ] && export PYTHONPATH=$PYTHONPATH:/tmp/site
# NVLink multicast stays off (inference.parallel.launch sets the same before starting ranks).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
BUDGET=${BUDGET:-150}; TOKENS=${TOKENS:-256}; SHAPES=${SHAPES:-qwen2.5-coder-1.5b}
NGPU=$(python -c "import torch; print(torch.cuda.device_count())")
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvidia-smi topo -m; } > "$OUT/gpu.txt" 2>&1
: > "$OUT/table.md"
echo "tpfuse: $NGPU GPUs, budget $BUDGET s"

# step NAME LIMIT_S MIN_GPUS CMD...: CMD under a hard timeout (SIGINT first, so pytest and faulthandler say
# where it hung) unless the budget is spent or the GPUs are too few; one table row; progress on stdout.
step() {
  local name=$1 limit=$2 gpus=$3; shift 3
  local left=$((BUDGET - SECONDS))
  if [ "$NGPU" -lt "$gpus" ]; then echo "| $name | skipped: needs $gpus GPUs |" >> "$OUT/table.md"; return; fi
  if [ "$left" -lt 20 ]; then echo "| $name | skipped: time budget spent |" >> "$OUT/table.md"; echo "$name skipped"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "$name: start at $SECONDS s (limit $limit s)"
  local t0=$SECONDS
  timeout -s INT -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local last; last=$(grep -E "passed|failed|skipped|rror|tok/s|close\(\)" "$OUT/$name.log" | tail -1 | cut -c1-110)
  echo "| $name | rc=$rc in $((SECONDS - t0)) s${last:+: $last} |" >> "$OUT/table.md"
  echo "$name rc=$rc $((SECONDS - t0)) s${last:+: $last}"
}
T="python -m pytest -q -x -s -p no:randomly -o faulthandler_timeout=60 tests/inference/test_parallel.py::"
bench() {  # bench SHAPE TP [REDUCE]
  step "bench-$1-tp$2${3:+-$3}" 45 "$2" python -m inference.bench --shape "$1" --tp "$2" --tp-reduce "${3:-nccl}" \
    --tokens "$TOKENS" --repeats 1 --ttft 128 --json "$OUT/bench-$1-tp$2${3:+-$3}.json"
}
F=test_fast_ranks_decode_in_one_graph_like_their_kernels_and_the_one_gpu_fast_path

for shape in $SHAPES; do  # the figures first (the final window has two shapes); the checks after
  bench "$shape" 2 flag
  bench "$shape" 1
  bench "$shape" 2 nccl
done
step test-fast-flag 60 2 $T"$F[qwen2.5-coder-1.5b-flag-2]"
grep -h "tp=2 fast ranks" "$OUT/test-fast-flag.log" 2>/dev/null | cut -c1-240
step allreduce 40 2 python -m inference.parallel.allreduce_bench --tp 2 --sizes 1536,2048 --iters 200 --symm-mem --flag
grep -A6 "^all-reduce" "$OUT/allreduce.log" 2>/dev/null
step test-flag-vs-nccl 60 2 $T"test_the_flag_reduction_decodes_the_greedy_tokens_of_nccl"

echo
grep -h "tp=2 fast ranks\|close() in" "$OUT"/test-*.log 2>/dev/null | cut -c1-240
grep -h -A6 "^all-reduce" "$OUT/allreduce.log" 2>/dev/null
python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
rows = []
for f in sorted(Path(sys.argv[1]).glob("bench-*.json")):
    r = json.loads(f.read_text())
    run = r["runs"][0]
    d = run["decode"][0]
    split = (f"{d['compute_ms_per_token']:.3f} / {d['sync_ms_per_token']:.3f} ({d['sync_us_per_collective']:.1f} us x "
             f"{d['collectives_per_token']})" if "sync_ms_per_token" in d else "-")
    ranks = run["runner"] + (f" ({run['tp_reduce']})" if run.get("tp_reduce") else "")
    rows.append(f"| {r['shape']} | {r['tp']} | {ranks} | {d['tok_s']:.0f} | {d['ms_per_token']:.3f} | {split} | {r['gpu']} |")
print("\n| shape | tp | ranks | greedy tok/s @512 | ms/token | compute / sync ms/token | GPU |")
print("|---|---:|---|---:|---:|---|---|")
print("\n".join(rows) or "| (no bench ran) |")
PY
echo
echo "| step | result |"
echo "|---|---|"
cat "$OUT/table.md"
