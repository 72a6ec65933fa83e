#!/usr/bin/env bash
#
# XLM on XNLI (Lample & Conneau 2019, Table 1): fine-tune the MLM+TLM XNLI-15 model on English
# MultiNLI, test in the 15 XNLI languages with no training data in 14 of them (paper: en 85.0,
# de 77.8, average 75.1 %). Run from anywhere; see --help and recipes/README.md.
#
#   recipes/xnli.sh --dry-run             # list every command
#   recipes/xnli.sh --gpus 1 --fp16       # the whole recipe
set -euo pipefail

RECIPE=xnli.sh
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=train/stages.sh
source "$REPO/recipes/train/stages.sh"
# shellcheck source-path=SCRIPTDIR source=train/optim.sh
source "$REPO/recipes/train/optim.sh"
# shellcheck source-path=SCRIPTDIR source=wmt16/download.sh
source "$REPO/recipes/wmt16/download.sh"

XNLI_URL=https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip
MNLI_URL=https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip
XNLI_LANGS=ar,bg,de,el,en,es,fr,hi,ru,sw,th,tr,ur,vi,zh
DEFAULT_MODEL=FacebookAI/xlm-mlm-tlm-xnli15-1024  # XLM's mlm_tlm_xnli15_1024.pth: 1024 dims, 12 layers

usage() {
  cat <<EOF
Usage: recipes/$RECIPE [options]

XNLI with xlm-fairseq, XLM's way: fine-tune a pretrained XLM on the English MultiNLI training set
(--task xlm_classification, sentence pairs, XLM's head on the first position), validate and test
in all 15 XNLI languages. Stages:

  1 download   XNLI-1.0.zip (dev and test sets) and multinli_1.0.zip (English training set),
               checked against recipes/checksums.sha256, unpacked with python -m zipfile
  2 data       xlm-fairseq-xnli: {train.en,valid.LANG,test.LANG}.tsv (raw text; the
               model's own pipeline tokenises, lowercases and strips accents)
  3 model      xlm-fairseq-convert MODEL (default $DEFAULT_MODEL,
               XLM's released MLM+TLM model, through huggingface_hub); an existing directory or
               checkpoint is used as it is
  4 finetune   fairseq-train --task xlm_classification, XLM's hyper-parameters: Adam lr 2.5e-5,
               random batches of 8 pairs, training sentences cut to 254 subwords (--max_len 256
               counts their two </s>), dropout 0.1 in the encoder and 0 before the classifier
               (XLM's --dropout), all layers fine-tuned, validation every 20,000 pairs (XLM's
               epoch), the checkpoint of best mean accuracy
  5 test       xlm-fairseq-classify on test.LANG.tsv: accuracy per language
               and average

Options:
  --stage N              first stage to run (default 1)
  --stop-stage M         last stage to run (default 5)
  --work-dir DIR         everything goes here (default ./work/xnli)
  --data-dir DIR         take XNLI-1.0.zip and multinli_1.0.zip from DIR instead of downloading
                         them; they are checked the same way
  --checksums FILE       check them against FILE (sha256sum format) instead of
                         recipes/checksums.sha256 (e.g. the digests of your own mirror)
  --langs L1,L2,...      validate and test in these XNLI languages only (default all 15; a model
                         that knows fewer languages)
  --model NAME|DIR       the pretrained model: a Hugging Face id (converted) or a model directory /
                         checkpoint of ours (default $DEFAULT_MODEL)
  --arch-args "ARGS"     the model's architecture for fairseq-train
                         (default "--arch xlm_1024 --encoder-layers 12", the XNLI-15 model's)
  --lr LR                fine-tuning learning rate (default 2.5e-5; XLM: sweep 5e-6, 2.5e-5, 1.25e-4)
  --batch-size N         pairs per batch and GPU (default 8; XLM: 4 or 8)
  --max-update N         updates of the fine-tuning (default 625000: XLM's 250 epochs of 20,000 pairs)
  --gpus N               GPUs (--distributed-world-size N); 0: --cpu (default 1)
  --fp16                 mixed precision
  --smoke                a tiny run of every stage on the CPU, a pipeline check of a few minutes
                         (what the tests run; give --data-dir small stand-ins of the archives and
                         --model a small model of ours): unless given --arch-args "--arch xlm_tiny"
                         --max-update 20 --gpus 0
  --dry-run              print every command, one a line, and run nothing (creates no file)
  -h, --help             this text

Re-runs: a finished stage leaves WORK/.stages/N.done and is skipped next time; --stage N needs
stages 1..N-1 finished. An interrupted fairseq-train resumes from its checkpoint_last.pt; checkpoints
of an earlier run of a stage it depends on are moved aside (DIR.stale-TIME). The two archives' SHA-256 digests in recipes/checksums.sha256 are the
ones Hugging Face's datasets library records for them; a file that differs is refused.
EOF
}

STAGE=1 STOP_STAGE=5 WORK_DIR=./work/xnli DATA_DIR="" MODEL=$DEFAULT_MODEL CHECKSUMS_FILE="" LANGS=$XNLI_LANGS
ARCH_ARGS="" LR=2.5e-5 BATCH=8 MAX_UPDATE="" GPUS="" FP16=0 ACCEPT_NEW=0 SMOKE=0
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --stage | --stop-stage | --work-dir | --data-dir | --checksums | --langs | --model | --arch-args | --lr | \
      --batch-size | --max-update | --gpus)
      [[ $# -ge 2 && -n $2 && $2 != --* ]] || die "option $1 needs a value (see --help)"
      case $1 in
        --stage) STAGE=$2 ;; --stop-stage) STOP_STAGE=$2 ;; --work-dir) WORK_DIR=$2 ;; --data-dir) DATA_DIR=$2 ;;
        --checksums) CHECKSUMS_FILE=$2 ;; --langs) LANGS=$2 ;; --model) MODEL=$2 ;; --arch-args) ARCH_ARGS=$2 ;;
        --lr) LR=$2 ;; --batch-size) BATCH=$2 ;; --max-update) MAX_UPDATE=$2 ;; --gpus) GPUS=$2 ;;
      esac
      shift 2 ;;
    --fp16) FP16=1; shift ;;
    --smoke) SMOKE=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
if [[ $SMOKE == 1 ]]; then
  : "${ARCH_ARGS:=--arch xlm_tiny}" "${MAX_UPDATE:=20}" "${GPUS:=0}"
fi
: "${ARCH_ARGS:=--arch xlm_1024 --encoder-layers 12}" "${MAX_UPDATE:=625000}" "${GPUS:=1}"
[[ $STAGE =~ ^[1-5]$ ]] || die "--stage must be 1..5, got '$STAGE'"
[[ $STOP_STAGE =~ ^[1-5]$ ]] || die "--stop-stage must be 1..5, got '$STOP_STAGE'"
((STAGE <= STOP_STAGE)) || die "--stage $STAGE comes after --stop-stage $STOP_STAGE"
[[ $GPUS =~ ^[0-9]+$ ]] || die "--gpus must be 0 or a positive integer, got '$GPUS'"
[[ $BATCH =~ ^[1-9][0-9]*$ ]] || die "--batch-size must be a positive integer, got '$BATCH'"
[[ $MAX_UPDATE =~ ^[1-9][0-9]*$ ]] || die "--max-update must be a positive integer, got '$MAX_UPDATE'"
[[ $LR =~ ^[0-9.]+([eE]-?[0-9]+)?$ ]] || die "--lr must be a number, got '$LR'"
((FP16 == 0 || GPUS > 0)) || die "--fp16 needs a GPU (--gpus 0 was given)"
[[ -z $DATA_DIR || $DRY_RUN == 1 || -d $DATA_DIR ]] || die "--data-dir $DATA_DIR is not a directory"
[[ -z $CHECKSUMS_FILE || $DRY_RUN == 1 || -f $CHECKSUMS_FILE ]] || die "--checksums $CHECKSUMS_FILE: no such file"
[[ $LANGS =~ ^[a-z]+(,[a-z]+)*$ ]] || die "--langs must be XNLI languages separated by commas, got '$LANGS'"
for lang in ${LANGS//,/ }; do
  [[ ,$XNLI_LANGS, == *",$lang,"* ]] || die "--langs: '$lang' is not an XNLI language ($XNLI_LANGS)"
done

case $WORK_DIR in /*) WORK=$WORK_DIR ;; *) WORK=$PWD/${WORK_DIR#./} ;; esac
[[ -z $DATA_DIR || $DATA_DIR == /* ]] || DATA_DIR=$PWD/${DATA_DIR#./}
[[ -z $CHECKSUMS_FILE || $CHECKSUMS_FILE == /* ]] || CHECKSUMS_FILE=$PWD/${CHECKSUMS_FILE#./}
PYTHON=${PYTHON:-python}
TOOLS=(-m recipes.wmt16.tools)
CHECKSUMS=${CHECKSUMS_FILE:-$REPO/recipes/checksums.sha256}
LOCK=$WORK/checksums.lock
DOWNLOADS=$WORK/downloads
RAW=$WORK/raw
DATA=$WORK/xnli
SAVE=$WORK/checkpoints/xnli
MARKERS=$WORK/.stages
STAGE_IDS=(1 2 3 4 5)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
stage_key() {
  local key="recipe=$RECIPE model=$MODEL lr=$LR batch=$BATCH max_update=$MAX_UPDATE"
  [[ $LANGS == "$XNLI_LANGS" ]] || key+=" langs=$LANGS"
  [[ $SMOKE == 0 ]] || key+=" smoke=1 arch=$ARCH_ARGS"
  printf '%s\n' "$key"
}

if [[ -e $MODEL || $MODEL == /* || $MODEL == ./* ]]; then PRETRAINED=$MODEL; else PRETRAINED=$WORK/model; fi

stage_download() {
  run mkdir -p "$DOWNLOADS"
  fetch XNLI-1.0.zip "$XNLI_URL"
  fetch multinli_1.0.zip "$MNLI_URL"
  # unpacked beside RAW and renamed: RAW is never a half-unpacked archive
  run rm -rf "$RAW.partial"
  run "$PYTHON" -m zipfile -e "$DOWNLOADS/XNLI-1.0.zip" "$RAW.partial"
  run "$PYTHON" -m zipfile -e "$DOWNLOADS/multinli_1.0.zip" "$RAW.partial"
  run rm -rf "$RAW"
  run mv "$RAW.partial" "$RAW"
}

stage_data() {
  local -a langs=()
  [[ $LANGS == "$XNLI_LANGS" ]] || langs=(--langs "$LANGS")
  run xlm-fairseq-xnli "$DATA" --xnli "$RAW/XNLI-1.0" --mnli "$RAW/multinli_1.0" "${langs[@]}" --force
}

stage_model() {
  if [[ $PRETRAINED == "$WORK/model" ]]; then
    run xlm-fairseq-convert "$MODEL" "$PRETRAINED" --force
  else
    note "model: $PRETRAINED as it is"
  fi
}

stage_finetune() {
  local -a arch optim device=()
  read -r -a arch <<< "$ARCH_ARGS"
  if ((GPUS == 0)); then device=(--cpu); else device=(--distributed-world-size "$GPUS"); fi
  ((FP16 == 1)) && device+=(--fp16)
  # the shared optimiser (recipes/train/optim.flags) as XLM's XNLI fine-tuning runs it: Adam (0.9,
  # 0.999) at a fixed rate, no clipping
  optim_flags optim --adam-betas '(0.9,0.999)' --lr-scheduler fixed --clip-norm 0 --lr "$LR"
  run fairseq-train "$DATA" --user-dir "$REPO/xlm_fairseq" --task xlm_classification \
    --pretrained-xlm-checkpoint "$PRETRAINED" "${arch[@]}" --train-langs en --valid-langs "$LANGS" \
    --truncate-len 256 --finetune-layers 0:_1 --dropout 0.1 --attention-dropout 0.1 --classifier-dropout 0 \
    --batch-size "$BATCH" "${optim[@]}" --max-update "$MAX_UPDATE" \
    --validate-interval-updates $((20000 / BATCH)) --save-interval-updates $((20000 / BATCH)) --keep-interval-updates 1 \
    --no-epoch-checkpoints --best-checkpoint-metric acc --maximize-best-checkpoint-metric \
    --num-workers 2 --seed 1 --log-format simple --log-interval 100 "${device[@]}" --save-dir "$SAVE"
}

stage_test() {
  local -a files=()
  local lang
  for lang in ${LANGS//,/ }; do files+=("$DATA/test.$lang.tsv"); done
  run xlm-fairseq-classify "$SAVE" "${files[@]}" --checkpoint-file checkpoint_best.pt \
    --out-dir "$WORK/predictions" --json "$WORK/test_accuracy.json"
  run "$PYTHON" -c "$SUMMARY" "$WORK/test_accuracy.json"
}

# the accuracies of stage 5 beside the paper's (Table 1, MLM+TLM: average 75.1, en 85.0, de 77.8)
SUMMARY='import json, sys; acc = {k.split(".")[1]: v["accuracy"] for k, v in json.load(open(sys.argv[1])).items()}; paper = [(k, acc[k], v) for k, v in (("en", 85.0), ("de", 77.8)) if k in acc]; print("average %.1f %% over %d languages (paper, MLM+TLM: 75.1)" % (sum(acc.values()) / len(acc), len(acc)) + "; " * bool(paper) + ", ".join("%s %.1f (%.1f)" % row for row in paper))'

if [[ $DRY_RUN == 1 ]]; then
  note "dry run of $RECIPE: nothing is run or written; work dir $WORK"
  printf 'export PYTHONPATH=%s\n' "$(quote_cmd "$PYTHONPATH")"
fi
STAGE_CHECKPOINTS=([4]="$SAVE")
require_finished_before "$STAGE"
STEPS=("" stage_download stage_data stage_model stage_finetune stage_test)
NAMES=("" download data model finetune test)
for ((n = STAGE; n <= STOP_STAGE; n++)); do
  run_stage "$n" "stage $n: ${NAMES[$n]}" "" "${STEPS[$n]}"
done
