#!/usr/bin/env bash
# One-shot, idempotent set-up: .venv with torch 2.13.0 (CPU), fairseq, and this package (editable, test and
# figures extras).
# fairseq-fixed is built from source once (its build needs torch, hence --no-build-isolation) and the
# wheel is cached in $XLM_FAIRSEQ_WHEELS (default ~/.cache/xlm-fairseq/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
WHEELS=${XLM_FAIRSEQ_WHEELS:-$HOME/.cache/xlm-fairseq/wheels}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
stamp="$VENV/.xlm-fairseq-setup"
want="$(cat setup.py scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import fairseq, xlm_fairseq" 2>/dev/null; then
  echo "setup: $VENV is up to date"
  exit 0
fi
command -v "$PYTHON" >/dev/null || { echo "setup: error: $PYTHON not found (need Python >= 3.8)" >&2; exit 1; }
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip "$@"; }
pip install -q --upgrade pip wheel cython numpy
pip install -q "torch==$TORCH_VERSION"
if "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  fairseq_req="fairseq-fixed==0.12.3.1"; fairseq_glob="fairseq_fixed-0.12.3.1-*.whl"
else
  fairseq_req="fairseq==0.12.2"; fairseq_glob="fairseq-0.12.2-*.whl"
fi
mkdir -p "$WHEELS"
if ! ls "$WHEELS"/$fairseq_glob >/dev/null 2>&1; then
  echo "setup: building $fairseq_req once (about 2-3 minutes; cached in $WHEELS)"
  pip wheel -q --no-build-isolation --no-deps -w "$WHEELS" "$fairseq_req"
fi
pip install -q "$WHEELS"/$fairseq_glob
pip install -q -e ".[test,figures]"
echo "$want" > "$stamp"
echo "setup: done in $(( $(date +%s) - start ))s ($VENV)"
