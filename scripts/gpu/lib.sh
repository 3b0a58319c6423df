# Sourced by the device-window scripts (scripts/gpu/*.sh): `step` runs one step of a window with its log in
# $LOG/NAME.log under a time limit, never past BUDGET seconds of the script (when BUDGET is set), and keeps a
# summary line (exit status, seconds, pytest's counts); `summary` prints those lines. Set LOG first.
summary_lines=()

step() {  # step NAME SECONDS CMD...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  if [ -n "${BUDGET:-}" ]; then
    local left=$((BUDGET - SECONDS))
    if [ "$left" -lt 5 ]; then summary_lines+=("$(printf '%-26s skipped (no time left)' "$name")"); return; fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  echo "=== $name: $*"
  timeout -s INT -k 5 "$limit" "$@" > "$LOG/$name.log" 2>&1
  local rc=$?
  tail -6 "$LOG/$name.log"
  summary_lines+=("$(printf '%-26s rc=%-3s %4ss  %s' "$name" "$rc" $((SECONDS - t0)) \
    "$(grep -E '[0-9]+ (passed|failed)' "$LOG/$name.log" | tail -1)")")
}

summary() {
  echo "=== summary"
  printf '%s\n' "${summary_lines[@]}"
}

# window NAME: a device window's start (after `cd` to the repo root and sourcing this file): LOG=$OUT/NAME (made),
# MODEL (default /tmp/smollm2.gguf), unbuffered python, the A/B prefixes (ab_setup), the GPU's name.
window() {
  OUT=${OUT:-out}; LOG=$(realpath -m "$OUT/$1"); mkdir -p "$LOG"
  export PYTHONUNBUFFERED=1
  MODEL=${MODEL:-/tmp/smollm2.gguf}
  ab_setup
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true
}

# tp_window NAME: window NAME for a tensor-parallel script: this tree on PYTHONPATH, NVLink multicast off (as
# inference.parallel.launch sets it for its ranks), NCCL's warnings only.
tp_window() {
  window "$1"
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONFAULTHANDLER=1
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
}

# A/B scripts: `before` / `now` command prefixes that run python from the tree in $BEFORE (`git archive <rev>
# inference kernels`, default .before) and from this one, each from inside itself (python -m puts the working
# directory first; `step` runs its command under timeout, so no shell functions). Also PYTEST's quiet options.
ab_setup() {
  local extra=${PYTHONPATH:+:$PYTHONPATH}
  BEFORE=$(realpath -m "${BEFORE:-.before}")
  now=(env -C "$PWD" PYTHONPATH="$PWD$extra")
  before=(env -C "$BEFORE" PYTHONPATH="$BEFORE$extra")
  PYTEST=(-q -p no:cacheprovider -p no:randomly -o addopts="")
}

# step_patched NAME SECONDS "PYTHON" MODULE ARGS...: `python -m MODULE ARGS` after running PYTHON (a patch for an
# A/B in one call: a measurement, not a setting).
step_patched() {
  local name=$1 limit=$2 patch=$3 mod=$4; shift 4
  step "$name" "$limit" python3 -c "$patch
import runpy, sys; sys.argv = ['$mod'] + sys.argv[1:]; runpy.run_module('$mod', run_name='__main__')" "$@"
}

# draft_cfg FIELD=VALUE...: python that patches DraftConfig's defaults (integers; 0 / 1 for booleans), for
# step_patched: a drafter variant measured in the same call, not a setting.
draft_cfg() {
  echo "import dataclasses; from inference.speculative.drafter import DraftConfig as C; f = C.__init__
names = [x.name for x in dataclasses.fields(C)]; d = list(f.__defaults__)
for kv in '$*'.split(): k, v = kv.split('='); d[names.index(k)] = int(v)
f.__defaults__ = tuple(d)"
}
