#!/usr/bin/env bash
# test_fast_path.py's graph-vs-eager tests on the GPU, twice on this tree and twice on $BEFORE's inference / kernels
# (.before: `git archive REV inference kernels`) with this tree's tests: whether a failure is new and repeatable.
# Usage (repo root, .gpu/b carried for the gguf wheel): bash scripts/gpu/fastpath10.sh
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/b/gguf-*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
T='tests/inference/test_fast_path.py'
K='graph_replay or ring_tokens'
for i in 1 2; do echo "== now $i"; PYTHONPATH=$PWD:/tmp/site python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu $T -k "$K" 2>&1 | grep -E "passed|failed|diff:"; done
rm -rf /tmp/bt && mkdir -p /tmp/bt && cp -r .before/inference .before/kernels tests pyproject.toml /tmp/bt/
for i in 1 2; do echo "== before $i"; (cd /tmp/bt && PYTHONPATH=/tmp/bt:/tmp/site python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu $T -k "$K" 2>&1 | grep -E "passed|failed|diff:"); done
