#!/usr/bin/env bash
# The GPU check: what to run where a GPU is lent, each step writing a record into OUT
# (default bench/results/gpu-check-DATE):
#   1. recipes/train.sh --tiny --device cuda on the bundled en-ro sample (the pipeline on a GPU; with two
#      or more GPUs also --processes 2);
#   2. recipes/train.sh --device cuda --minutes 10 on the quickstart's en-de sample (the plan's choice,
#      its updates and BLEU beside copying);
#   3. bench/run.py --device cuda --precision bf16 --quick at both sizes (ratios to fairseq's peers).
# Usage: bash bench/gpu_check.sh [OUT]   (with .venv/bin on PATH, as the README installs it)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
OUT=${1:-bench/results/gpu-check-$(date +%Y-%m-%d)}
WORK=${GPU_CHECK_WORK:-runs/gpu-check}
PY=${PYTHON:-python}
fail() { printf 'gpu_check: error: %s\n' "$*" >&2; exit 2; }
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)') \
  || fail "'$PY' cannot import torch; run: bash scripts/setup.sh, then put .venv/bin on PATH"
[ "$GPUS" -gt 0 ] || fail "torch sees no GPU here"
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpus.csv" 2>/dev/null || true
echo "== gpu_check: $GPUS GPU(s); records in $OUT, runs in $WORK"

# train.sh on cuda; its report.json (plan, updates, BLEU beside copying) becomes OUT/NAME.json
train() {
  local name=$1
  shift
  local started=$SECONDS
  bash recipes/train.sh "$@" --device cuda --fresh --work-dir "$WORK/$name" | tee "$OUT/$name.log"
  "$PY" - "$WORK/$name/report.json" "$OUT/$name.json" "$((SECONDS - started))" "$*" <<'EOF'
import json, subprocess, sys
report = json.load(open(sys.argv[1]))
report["wall_seconds"] = int(sys.argv[3])
report["command"] = "bash recipes/train.sh " + sys.argv[4] + " --device cuda"
report["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
json.dump(report, open(sys.argv[2], "w"), indent=1)
EOF
}

EN_RO=recipes/data/en-ro
train tiny-cuda --pairs "en-ro=$EN_RO/train.en-ro" --tiny
if [ "$GPUS" -ge 2 ]; then
  train tiny-cuda-2 --pairs "en-ro=$EN_RO/train.en-ro" --tiny --processes 2
fi
S=recipes/data/en-de-docs
train quickstart-10min-cuda --langs de,en --pairs "en-de=$S/train.en-de" --mono "en=$S/mono.en" \
  --mono "de=$S/mono.de" --valid "en-de=$S/valid.en-de" --test "en-de=$S/test.en-de" --minutes 10
"$PY" bench/run.py --device cuda --precision bf16 --quick --sizes recipes,256 --work-dir "$WORK/bench" \
  --out "$OUT/bench-bf16.json" | tee "$OUT/bench-bf16.log"
echo "== gpu_check: done; records in $OUT"
