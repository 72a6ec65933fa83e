#!/usr/bin/env bash
# One-shot, idempotent set-up: .venv with torch 2.13.0, fairseq, and this package (editable, test and
# figures extras). TORCH_BUILD picks torch's build explicitly: cpu (default, PyTorch's CPU index: the
# +cpu wheel), cuda (PyPI's Linux wheel, which brings its CUDA libraries) or cuXYZ (PyTorch's index for
# that CUDA version, e.g. cu126).
# fairseq-fixed is built from source once (its build needs torch, hence --no-build-isolation) and the
# wheel is cached in $XLM_FAIRSEQ_WHEELS (default ~/.cache/xlm-fairseq/wheels).
# --extras A,B installs those extras of setup.py too (serve, hf, ctranslate2, zh, ja, th, ...): pip alone
# would put back torchaudio (below), which breaks transformers and the test suite.
# Every pip install here keeps to scripts/constraints.txt.
set -euo pipefail
EXTRAS=test,figures
while [ $# -gt 0 ]; do
  case "$1" in
    --extras) [ $# -ge 2 ] || { echo "setup: error: --extras needs a value, e.g. --extras serve,hf" >&2; exit 2; }
      EXTRAS="$EXTRAS,$2"; shift 2 ;;
    --extras=*) EXTRAS="$EXTRAS,${1#--extras=}"; shift ;;
    -h|--help) echo "usage: [TORCH_BUILD=cpu|cuda|cuXYZ] bash scripts/setup.sh [--extras serve,hf,...]"; exit 0 ;;
    *) echo "setup: error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$EXTRAS" =~ ^[a-z0-9,]+$ ]]; then
  echo "setup: error: --extras takes names of setup.py's extras, comma-separated (got ${EXTRAS#test,figures,})" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
WHEELS=${XLM_FAIRSEQ_WHEELS:-$HOME/.cache/xlm-fairseq/wheels}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
TORCH_BUILD=${TORCH_BUILD:-cpu}
case "$TORCH_BUILD" in
  cpu|cu[0-9]*) torch_req="torch==$TORCH_VERSION+$TORCH_BUILD"
    torch_index=(--extra-index-url "https://download.pytorch.org/whl/$TORCH_BUILD") ;;
  cuda) torch_req="torch==$TORCH_VERSION"; torch_index=() ;;
  *) echo "setup: error: TORCH_BUILD=$TORCH_BUILD is not cpu, cuda or cuXYZ (e.g. cu126)" >&2; exit 1 ;;
esac
stamp="$VENV/.xlm-fairseq-setup"
want="$(cat setup.py scripts/setup.sh scripts/constraints.txt | sha256sum | cut -c1-16) $TORCH_BUILD $EXTRAS"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import fairseq, xlm_fairseq" 2>/dev/null; then
  echo "setup: $VENV is up to date"
  exit 0
fi
command -v "$PYTHON" >/dev/null || { echo "setup: error: $PYTHON not found (need Python >= 3.8)" >&2; exit 1; }
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
export PIP_CONSTRAINT="$PWD/scripts/constraints.txt"
pip() { "$VENV/bin/python" -m pip "$@"; }
pip install -q --upgrade pip wheel cython numpy
# torch alone from its index, then its dependencies from the usual ones: an index that is unreachable (or
# slow) is asked once, not once per dependency
pip install -q --no-deps "$torch_req" "${torch_index[@]}"
pip install -q "$torch_req"
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
pip install -q -e ".[$EXTRAS]"
# fairseq-fixed requires torchaudio (for its speech tasks, which this plugin does not use), but no
# torchaudio release pairs with torch 2.13 (the newest, 2.11.1, is linked to PyPI's CUDA torch of its own
# version): it fails to load, and transformers imports it whenever it is installed, so it is removed
pip uninstall -q -y torchaudio 2>/dev/null || true
echo "$want" > "$stamp"
echo "setup: done in $(( $(date +%s) - start ))s ($VENV)"
