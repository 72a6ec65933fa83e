# shellcheck shell=bash
# (what is set here is used by the other parts; shellcheck sees them together through common.sh)
# shellcheck disable=SC2034
#
# The WMT16 recipes' options (sourced by recipes/wmt16/common.sh): --help, option parsing and
# checks, the work directory's layout, and the key of each stage (the options its result depends
# on, kept in its marker; see recipes/train/stages.sh).

# split_words ARRAY STRING: ARRAY=(the whitespace-separated words of STRING, newlines included)
split_words() {
  local -n _words=$1
  read -r -d '' -a _words <<< "$2" || true
}

abspath() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$PWD/${1#./}" ;;
  esac
}

# in_range VALUE MIN [MAX]: VALUE is a decimal integer (at most 12 digits) within the bounds
in_range() {
  [[ $1 =~ ^[0-9]{1,12}$ ]] || return 1
  local v=$((10#$1))
  ((v >= $2)) || return 1
  [[ $# -lt 3 ]] || ((v <= $3))
}

# need_value OPTION "$@": the option's value (the next argument) must be there
need_value() {
  [[ $# -ge 2 && -n $2 && $2 != --* ]] || die "option $1 needs a value (see --help)"
}

# ------------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------------

usage() {
  local para_line="" ro_line="" mt_text=""
  if [[ $ALLOW_SUPERVISED == 1 ]]; then
    para_line=$'\n               with --supervised: the WMT16 en-ro parallel training data'
    mt_text="; --supervised: + MT"
  fi
  [[ $OTHER == ro ]] && ro_line=$'\n               Romanian normalisation + diacritics removal,'
  cat <<EOF
Usage: recipes/$RECIPE [options]

XLM (Lample & Conneau, 2019) on WMT16 $PAIR, end to end with xlm-fairseq: download, preprocess,
pretrain an MLM (or convert XLM's released one), train the translation model, evaluate on
newstest2016. Stages:

  1 download   News Crawl monolingual text; validation and test sets from sacrebleu -t${para_line}
               (--init released: also XLM's model, BPE codes and vocabulary)
  2 preprocess xlm-fairseq-prepare: Moses normalisation + tokenisation,${ro_line}
               joint sentencepiece BPE (--vocab-size), binarisation
               (--init released: XLM's BPE codes and vocabulary instead of sentencepiece)
  3 pretrain   fairseq-train --task cross_lingual_lm (MLM, xlm_1024)
               (--init released: xlm-fairseq-convert on XLM's released model)
  4 train      fairseq-train --task translation_lm (AE + online BT${mt_text})
  5 evaluate   fairseq-generate both directions on newstest2016; sacreBLEU -t $TEST_TESTSET on detokenised
               output, and tokenised BLEU (the paper's kind)

Options:
  --stage N              first stage to run (default 1)
  --stop-stage M         last stage to run (default 5)
  --work-dir DIR         everything goes here (default $DEFAULT_WORK)
  --data-dir DIR         take the downloads from DIR (same file names as the URLs) instead of
                         fetching them; they are checked like downloads. The test sets come from
                         DIR/sacrebleu, a copy of ~/.sacrebleu (SACREBLEU=DIR/sacrebleu; get it
                         with: sacrebleu -t wmt16 -l en-de --echo src > /dev/null, per set and pair)
  --accept-new-checksums accept (and record) files that have no published SHA-256, see below
  --checksums FILE       check the downloads against FILE (sha256sum format) instead of
                         recipes/checksums.sha256 (e.g. the digests of your own mirror)
  --mono-sentences N     monolingual sentences per language (default 5000000, as XLM's
                         get-data-nmt.sh)
  --vocab-size N         joint sentencepiece vocabulary (default 60000, XLM's 60k BPE)
  --spm-sentences-per-lang N  sentences per language sentencepiece learns from (default 1000000)
  --init pretrain|released
                         pretrain: our own MLM (stage 3, default); released: XLM's released
                         $RELEASED_MODEL, converted, data encoded with its codes/vocabulary
  --max-update N         stop each fairseq-train run after N updates (default: XLM's stopping
                         criterion, 10 validations without improvement)
  --gpus N               GPUs per fairseq-train run (--distributed-world-size N); 0: --cpu
                         (default 1)
  --fp16                 mixed precision
  --smoke                a tiny run of every stage on the CPU, a pipeline check of a few minutes
                         (what the tests run; give --data-dir small stand-ins of the downloads):
                         a 64-dim 2-layer model (xlm_tiny) instead of xlm_1024, and unless given
                         --mono-sentences 2000 --vocab-size 1000 --spm-sentences-per-lang 2000
                         --max-update 20 --gpus 0
  --dry-run              print every command, one a line, and run nothing (creates no file)
  -h, --help             this text
$USAGE_PAIR
Re-runs: a finished stage leaves WORK/.stages/N.done (with the options it ran with) and is
skipped next time; a stage done with other options is refused (use another --work-dir, or delete
the marker); --stage N needs stages 1..N-1 finished. An interrupted fairseq-train resumes from its
checkpoint_last.pt; checkpoints of an earlier result or other options are moved aside to
DIR.stale-TIME (a redone stage 3 sets aside stage 4's), never resumed from nor deleted.

Checksums: every download (and every --data-dir file) is checked against
recipes/checksums.sha256. No digest is published for these files by their providers, so the
entries there read UNVERIFIED: such a file is refused unless --accept-new-checksums is given,
and then its SHA-256 is recorded in WORK/checksums.lock, which every later run checks it against
(trust on first use: this detects later changes, not a bad first download). A file listed with a
real digest is refused whenever it differs. See recipes/README.md.
EOF
}

parse_options() {
  STAGE=1
  STOP_STAGE=5
  WORK_DIR=$DEFAULT_WORK
  DATA_DIR=""
  ACCEPT_NEW=0
  CHECKSUMS_FILE=""
  MONO_SENTENCES=""  # the defaults (below) depend on --smoke
  VOCAB_SIZE=""
  SPM_SENTENCES=""
  INIT=pretrain
  MAX_UPDATE=""
  GPUS=""
  FP16=0
  SMOKE=0
  DRY_RUN=0
  SUPERVISED=0
  NO_BT=0
  local opt value
  while [[ $# -gt 0 ]]; do
    opt=$1
    if [[ $opt == --*=* ]]; then  # --opt=value
      value=${opt#*=}
      opt=${opt%%=*}
      shift
      set -- "$opt" "$value" "$@"
    fi
    case $opt in
      -h | --help) usage; exit 0 ;;
      --stage) need_value "$@"; STAGE=$2; shift 2 ;;
      --stop-stage) need_value "$@"; STOP_STAGE=$2; shift 2 ;;
      --work-dir) need_value "$@"; WORK_DIR=$2; shift 2 ;;
      --data-dir) need_value "$@"; DATA_DIR=$2; shift 2 ;;
      --accept-new-checksums) ACCEPT_NEW=1; shift ;;
      --checksums) need_value "$@"; CHECKSUMS_FILE=$2; shift 2 ;;
      --mono-sentences) need_value "$@"; MONO_SENTENCES=$2; shift 2 ;;
      --vocab-size) need_value "$@"; VOCAB_SIZE=$2; shift 2 ;;
      --spm-sentences-per-lang) need_value "$@"; SPM_SENTENCES=$2; shift 2 ;;
      --init) need_value "$@"; INIT=$2; shift 2 ;;
      --max-update) need_value "$@"; MAX_UPDATE=$2; shift 2 ;;
      --gpus) need_value "$@"; GPUS=$2; shift 2 ;;
      --fp16) FP16=1; shift ;;
      --smoke) SMOKE=1; shift ;;
      --dry-run) DRY_RUN=1; shift ;;
      --supervised | --no-bt)
        [[ $ALLOW_SUPERVISED == 1 ]] || die "unknown option '$opt' (see --help; it belongs to wmt16_en_ro.sh)"
        if [[ $opt == --supervised ]]; then SUPERVISED=1; else NO_BT=1; fi
        shift ;;
      *) die "unknown option '$opt' (see --help)" ;;
    esac
  done

  if [[ $SMOKE == 1 ]]; then
    : "${MONO_SENTENCES:=2000}" "${VOCAB_SIZE:=1000}" "${SPM_SENTENCES:=2000}" "${MAX_UPDATE:=20}" "${GPUS:=0}"
  fi
  : "${MONO_SENTENCES:=5000000}" "${VOCAB_SIZE:=60000}" "${SPM_SENTENCES:=1000000}" "${GPUS:=1}"
  in_range "$STAGE" 1 5 || die "--stage must be 1..5, got '$STAGE'"
  in_range "$STOP_STAGE" 1 5 || die "--stop-stage must be 1..5, got '$STOP_STAGE'"
  in_range "$MONO_SENTENCES" 1 || die "--mono-sentences must be a positive integer, got '$MONO_SENTENCES'"
  in_range "$VOCAB_SIZE" 1 || die "--vocab-size must be a positive integer, got '$VOCAB_SIZE'"
  in_range "$SPM_SENTENCES" 1 || die "--spm-sentences-per-lang must be a positive integer, got '$SPM_SENTENCES'"
  in_range "$GPUS" 0 || die "--gpus must be 0 or a positive integer, got '$GPUS'"
  [[ -z $MAX_UPDATE ]] || in_range "$MAX_UPDATE" 1 || die "--max-update must be a positive integer, got '$MAX_UPDATE'"
  # canonical decimal (no leading zeros) from here on
  STAGE=$((10#$STAGE)) STOP_STAGE=$((10#$STOP_STAGE)) MONO_SENTENCES=$((10#$MONO_SENTENCES))
  VOCAB_SIZE=$((10#$VOCAB_SIZE)) SPM_SENTENCES=$((10#$SPM_SENTENCES)) GPUS=$((10#$GPUS))
  [[ -z $MAX_UPDATE ]] || MAX_UPDATE=$((10#$MAX_UPDATE))
  ((STAGE <= STOP_STAGE)) || die "--stage $STAGE comes after --stop-stage $STOP_STAGE"
  [[ $INIT == pretrain || $INIT == released ]] || die "--init must be pretrain or released, got '$INIT'"
  ((FP16 == 0 || GPUS > 0)) || die "--fp16 needs a GPU (--gpus 0 was given)"
  ((NO_BT == 0 || SUPERVISED == 1)) || die "--no-bt needs --supervised (without back-translation only supervised MT is left)"
  if [[ -n $DATA_DIR && $DRY_RUN == 0 && ! -d $DATA_DIR ]]; then
    die "--data-dir $DATA_DIR is not a directory"
  fi
  if [[ -n $CHECKSUMS_FILE && $DRY_RUN == 0 && ! -f $CHECKSUMS_FILE ]]; then
    die "--checksums $CHECKSUMS_FILE: no such file"
  fi
  return 0
}

# ------------------------------------------------------------------------------------------------
# layout, stage keys
# ------------------------------------------------------------------------------------------------

setup_paths() {
  REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  TOOLS=(-m recipes.wmt16.tools)  # run with PYTHONPATH=REPO (wmt16_main exports it)
  CHECKSUMS=$REPO/recipes/checksums.sha256
  [[ -z $CHECKSUMS_FILE ]] || CHECKSUMS=$(abspath "$CHECKSUMS_FILE")
  USER_DIR=$REPO/xlm_fairseq
  PYTHON=${PYTHON:-python}
  WORK=$(abspath "$WORK_DIR")
  [[ -z $DATA_DIR ]] || DATA_DIR=$(abspath "$DATA_DIR")
  # sacrebleu keeps its test sets here (a --data-dir is local copies only: no download)
  if [[ -n $DATA_DIR ]]; then export SACREBLEU=$DATA_DIR/sacrebleu; fi
  DOWNLOADS=$WORK/downloads
  RAW=$WORK/raw
  DATA_BIN=$WORK/data-bin
  XLM_VOCAB_DICT=$WORK/xlm-vocab/dict.txt
  RELEASED_DIR=$WORK/released
  PRETRAIN_DIR=$WORK/checkpoints/pretrain
  EVAL_DIR=$WORK/eval
  LOCK=$WORK/checksums.lock
  MARKERS=$WORK/.stages
  if [[ $SUPERVISED == 1 && $NO_BT == 1 ]]; then
    MT_DIR=$WORK/checkpoints/nmt
  elif [[ $SUPERVISED == 1 ]]; then
    MT_DIR=$WORK/checkpoints/nmt_bt
  else
    MT_DIR=$WORK/checkpoints/unmt
  fi
  # the model of stages 3 and 4: XLM's, or with --smoke a tiny one of the same kind
  if [[ $SMOKE == 1 ]]; then ARCH=(--arch xlm_tiny); else ARCH=(--arch xlm_1024); fi
  # the non-English language sorted with English, as data-bin names pairs (de-en, en-ro)
  PAIR_SORTED=${LANGS/,/-}
  IFS=, read -r LANG_A LANG_B <<< "$LANGS"
}

# stage_key N (the hook of stages.sh): the options stage N's result depends on (with those of the
# stages before it); a marker with another key makes the stage refuse to run.
stage_key() {
  local key="recipe=$RECIPE init=$INIT mono=$MONO_SENTENCES supervised=$SUPERVISED"
  [[ $SMOKE == 1 ]] && key+=" smoke=1"
  (($1 >= 2)) && [[ $INIT == pretrain ]] && key+=" vocab=$VOCAB_SIZE spm_sentences=$SPM_SENTENCES"
  (($1 >= 3)) && [[ $INIT == pretrain ]] && key+=" pretrain_max_update=${MAX_UPDATE:-none}"
  (($1 >= 4)) && key+=" no_bt=$NO_BT max_update=${MAX_UPDATE:-none}"
  printf '%s\n' "$key"
}
