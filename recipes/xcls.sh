#!/usr/bin/env bash
# Cross-lingual classification offline (XNLI-style zero-shot transfer): pretrain MLM(+TLM) on the
# shipped en-de sample, fine-tune on English package-description topics, predict English and German.
# Details and options: bash recipes/xcls.sh --help (python -m recipes.experiments.xcls).
#   bash recipes/xcls.sh               # about 10 minutes on 2 cores: random init vs MLM+TLM
#   bash recipes/xcls.sh --tiny        # a few minutes: tiny data, model and budgets (what CI runs)
#   bash recipes/xcls.sh --experiment  # ../shared/data, random / MLM / MLM+TLM, LMs of 15 and 30 CPU-minutes (~2 h)
#   bash recipes/xcls.sh --experiment --corpus shared+ddtp --lm-minutes 30  # and descriptions of non-topic packages
#   bash recipes/xcls.sh --experiment --inits mlm_tlm --lm-minutes 30 --self-train 1  # and unlabelled German rows
#   bash recipes/xcls.sh --experiment --device cuda --size 256x4 --pretrain-max-tokens 16384 \
#       --lm-minutes 3 --lm-clock time --jobs 3   # one GPU, the inits side by side (~10 min on an H100)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python}"
command -v fairseq-train >/dev/null || { echo "xcls: error: fairseq-train not on PATH; run: bash scripts/setup.sh && PATH=\$PWD/.venv/bin:\$PATH bash recipes/xcls.sh" >&2; exit 1; }
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m recipes.experiments.xcls "$@"
