#!/usr/bin/env bash
# Tensor-parallel measurements for a machine with 2 or 4 GPUs of one host (NVLink); not for one GPU.
# In one call: the multi-GPU tests (NCCL vs the single-GPU paths), the all-reduce latency at decode
# sizes (NCCL eager / in a CUDA graph / symmetric-memory one-shot), and inference.bench on the 1.5B
# and 3B shapes at TP=1 (the single-GPU fast path) and TP=2, 4 (the fast ranks for greedy decode,
# with their per-token compute vs sync split). Logs and JSON under $OUT/tp/, a table last.
# Usage: bash scripts/tp_bench.sh        env: OUT (default out), TOKENS (256), SHAPES, TPS
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}/tp; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/site ] && export PYTHONPATH=$PYTHONPATH:/tmp/site
# NVLink multicast stays off (inference.parallel.launch sets the same before starting ranks).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NGPU=$(python -c "import torch; print(torch.cuda.device_count())")
TOKENS=${TOKENS:-256}
SHAPES=${SHAPES:-"qwen2.5-coder-1.5b qwen2.5-coder-3b"}
TPS=${TPS:-"1 2 4"}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
echo "GPUs: $NGPU"
[ "$NGPU" -ge 2 ] || { echo "needs at least 2 GPUs"; exit 2; }

python -m pytest -q -m gpu -p no:randomly tests/inference/test_parallel.py -s > "$OUT/tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tests.log")"

for tp in 2 4; do
  [ "$tp" -le "$NGPU" ] || continue
  timeout 300 python -m inference.parallel.allreduce_bench --tp "$tp" --symm-mem --json "$OUT/allreduce_tp$tp.json" \
    > "$OUT/allreduce_tp$tp.log" 2>&1 || echo "allreduce tp $tp failed: $(tail -1 "$OUT/allreduce_tp$tp.log")"
done

for shape in $SHAPES; do
  for tp in $TPS; do
    [ "$tp" -le "$NGPU" ] || continue
    for reduce in $([ "$tp" -gt 1 ] && echo "nccl symm" || echo nccl); do
      name=bench_${shape}_tp$tp$([ "$tp" -gt 1 ] && echo "_$reduce")
      timeout 400 python -m inference.bench --shape "$shape" --tp "$tp" --tp-reduce "$reduce" --tokens "$TOKENS" \
        --repeats 2 --ttft 128 --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1 \
        || echo "bench $shape tp $tp $reduce failed: $(tail -1 "$OUT/$name.log")"
    done
  done
done

python - "$OUT" <<'EOF'
import glob, json, sys
out = sys.argv[1]
print("\n| shape | TP | path | tok/s | ms/token | compute ms | sync ms | us/collective |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for f in sorted(glob.glob(f"{out}/bench_*.json")):
    r = json.load(open(f)); d = r["runs"][0]["decode"][0]; tp = r.get("tp", 1)
    cell = lambda k, p: f"{d[k]:.{p}f}" if k in d else "-"
    run = r["runs"][0]
    print(f"| {r['shape']} | {tp} | {run.get('runner', '-')} {run.get('tp_reduce') or ''} | {d['tok_s']:.0f} "
          f"| {d['ms_per_token']:.3f} | {cell('compute_ms_per_token', 3)} | {cell('sync_ms_per_token', 3)} "
          f"| {cell('sync_us_per_collective', 1)} |")
print("\n| all-reduce | bytes | NCCL eager us | NCCL graph us | symm-mem one-shot graph us |")
print("|---|---:|---:|---:|---:|")
for f in sorted(glob.glob(f"{out}/allreduce_tp*.json")):
    r = json.load(open(f))
    for row in r["rows"]:
        cell = lambda k: f"{row[k]:.1f}" if isinstance(row.get(k), float) else str(row.get(k, "-"))[:40]
        print(f"| tp {r['tp']} | {row['bytes']} | {cell('eager_us')} | {cell('graph_us')} | {cell('symm_mem_one_shot_graph_us')} |")
EOF
