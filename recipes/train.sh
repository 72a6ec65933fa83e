#!/usr/bin/env bash
# One command for any languages: raw text files -> held-out splits -> preprocessing -> XLM pretraining ->
# translation -> every direction scored beside copying the source -> an exported translator (fairseq, hub,
# CTranslate2), a figure and a report. The engine is recipes/train/cli.py (--help lists the options);
# recipes/quickstart.sh is this command on the bundled en-de sample.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RECIPE=${XLM_FAIRSEQ_RECIPE:-train}
PY="${PYTHON:-python}"
SETUP="run: bash scripts/setup.sh, then put .venv/bin on PATH (PATH=\$PWD/.venv/bin:\$PATH)"
fail() { printf '%s: error: %s\n' "$RECIPE" "$*" >&2; exit 1; }
command -v "$PY" >/dev/null || fail "'$PY' not found; $SETUP"
for tool in fairseq-train fairseq-generate; do
  command -v "$tool" >/dev/null || fail "'$tool' not on PATH; $SETUP"
done
"$PY" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))" \
  fairseq sentencepiece sacremoses sacrebleu 2>/dev/null \
  || fail "fairseq/sentencepiece/sacremoses/sacrebleu not importable by $PY; $SETUP"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m recipes.train --recipe "$RECIPE" "$@"
