#!/usr/bin/env bash
# Which model and settings learn most per CPU-minute on this machine: a scaling sweep of pretraining
# (size, vocabulary, streams, batch, learning rate) and of translation from its LMs, on real held-out
# documents. Details and options: bash recipes/scale.sh --help (python -m recipes.experiments.scale).
#   bash recipes/scale.sh                      # every run at its budgets (many hours on 2 cores)
#   bash recipes/scale.sh --phase pretrain --runs d128_l3,d256_l4 --budgets 15,60,240
#   bash recipes/scale.sh --quick              # tiny data, models and budgets: a pipeline check
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python}"
command -v fairseq-train >/dev/null || { echo "scale: error: fairseq-train not on PATH; run: bash scripts/setup.sh && PATH=\$PWD/.venv/bin:\$PATH bash recipes/scale.sh" >&2; exit 1; }
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m recipes.experiments.scale "$@"
