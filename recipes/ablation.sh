#!/usr/bin/env bash
# What pretraining buys, at equal CPU budgets on real held-out documents: UNMT from random / MLM /
# MLM+TLM init, supervised MT from random / MLM init, both optimiser loops, and fairseq's own
# transformer as the calibration peer. Details and options: bash recipes/ablation.sh --help (python -m recipes.experiments.ablation).
#   bash recipes/ablation.sh            # about 110 minutes on 2 cores
#   bash recipes/ablation.sh --quick    # a few minutes: tiny data, model and budgets
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python}"
command -v fairseq-train >/dev/null || { echo "ablation: error: fairseq-train not on PATH; run: bash scripts/setup.sh && PATH=\$PWD/.venv/bin:\$PATH bash recipes/ablation.sh" >&2; exit 1; }
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m recipes.experiments.ablation "$@"
