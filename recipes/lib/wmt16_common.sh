# shellcheck shell=bash
#
# The code shared by recipes/wmt16_en_de.sh and recipes/wmt16_en_ro.sh (sourced, not run).
#
# The recipe script sets the pair's data before calling `wmt16_main "$@"`:
#   RECIPE         its name, for messages (wmt16_en_de.sh)
#   PAIR           the pair as XLM names it (en-de, en-ro)
#   LANGS          fairseq --langs: both languages, alphabetically (de,en / en,ro)
#   OTHER          the language that is not English (de / ro)
#   DEFAULT_WORK   default --work-dir
#   MONO_URLS      associative array: language -> space-separated News Crawl URLs (concatenated in
#                  this order, then cut to --mono-sentences lines)
#   DEV_URL        the WMT dev/test tarball (SGML)
#   VALID_SGM, TEST_SGM  associative arrays: language -> member of the dev tarball
#   RELEASED_URL   base URL of XLM's released files; RELEASED_MODEL, RELEASED_CODES, RELEASED_VOCAB
#   PARA_URLS      (en-ro) space-separated parallel training corpora for --supervised
#   PAPER_BLEU_UNSUP, PAPER_BLEU_SUP, PAPER_BLEU_SUP_NO_BT  JSON {direction: BLEU} for the summary
#   ALLOW_SUPERVISED  1 if --supervised / --no-bt are options of this recipe
#   USAGE_PAIR     the pair-specific part of --help

# ------------------------------------------------------------------------------------------------
# small helpers
# ------------------------------------------------------------------------------------------------

die() {
  printf '%s: error: %s\n' "$RECIPE" "$*" >&2
  exit 2
}

note() {
  # progress/comment lines: part of the --dry-run listing, on stderr in a real run
  if [[ $DRY_RUN == 1 ]]; then
    printf '# %s\n' "$*"
  else
    printf '[%s] %s\n' "$RECIPE" "$*" >&2
  fi
}

# Print a command as one copy-pasteable line: plain words as they are, anything else single-quoted.
quote_cmd() {
  local out="" arg
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./:=,+@%^-]+$ ]]; then
      out+="$arg "
    else
      out+="'${arg//\'/\'\\\'\'}' "
    fi
  done
  printf '%s\n' "${out% }"
}

# run CMD...: print it; run it unless --dry-run
run() {
  if [[ $DRY_RUN == 1 ]]; then
    quote_cmd "$@"
  else
    printf '+ %s\n' "$(quote_cmd "$@")" >&2
    "$@"
  fi
}

# run_to FILE CMD...: run CMD with its stdout saved to FILE (written only if CMD succeeds) and shown
run_to() {
  local out=$1
  shift
  if [[ $DRY_RUN == 1 ]]; then
    printf '%s > %s\n' "$(quote_cmd "$@")" "$(quote_cmd "$out")"
  else
    printf '+ %s > %s\n' "$(quote_cmd "$@")" "$(quote_cmd "$out")" >&2
    "$@" > "$out.tmp"
    mv -f "$out.tmp" "$out"
    cat "$out"
  fi
}

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

  1 download   News Crawl monolingual text, the WMT dev/test sets (SGML -> text)${para_line}
               (--init released: also XLM's model, BPE codes and vocabulary)
  2 preprocess python -m preprocess.prepare: Moses normalisation + tokenisation,${ro_line}
               joint sentencepiece BPE (--vocab-size), binarisation
               (--init released: XLM's BPE codes and vocabulary instead of sentencepiece)
  3 pretrain   fairseq-train --task cross_lingual_lm (MLM, xlm_1024)
               (--init released: python -m xlm_fairseq.convert on XLM's released model)
  4 train      fairseq-train --task translation_lm (AE + online BT${mt_text})
  5 evaluate   fairseq-generate both directions on newstest2016; sacreBLEU on detokenised output
               against the raw reference, and tokenised BLEU (the paper's kind)

Options:
  --stage N              first stage to run (default 1)
  --stop-stage M         last stage to run (default 5)
  --work-dir DIR         everything goes here (default $DEFAULT_WORK)
  --data-dir DIR         take the downloads from DIR (same file names as the URLs) instead of
                         fetching them; they are checked like downloads
  --accept-new-checksums accept (and record) files that have no published SHA-256, see below
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
  --dry-run              print every command, one a line, and run nothing (creates no file)
  -h, --help             this text
$USAGE_PAIR
Re-runs: a finished stage leaves WORK/.stages/N.done (with the options it ran with) and is
skipped next time; a stage done with other options is refused (use another --work-dir, or delete
the marker). fairseq-train resumes from its checkpoint_last.pt.

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
  MONO_SENTENCES=5000000
  VOCAB_SIZE=60000
  SPM_SENTENCES=1000000
  INIT=pretrain
  MAX_UPDATE=""
  GPUS=1
  FP16=0
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
      --mono-sentences) need_value "$@"; MONO_SENTENCES=$2; shift 2 ;;
      --vocab-size) need_value "$@"; VOCAB_SIZE=$2; shift 2 ;;
      --spm-sentences-per-lang) need_value "$@"; SPM_SENTENCES=$2; shift 2 ;;
      --init) need_value "$@"; INIT=$2; shift 2 ;;
      --max-update) need_value "$@"; MAX_UPDATE=$2; shift 2 ;;
      --gpus) need_value "$@"; GPUS=$2; shift 2 ;;
      --fp16) FP16=1; shift ;;
      --dry-run) DRY_RUN=1; shift ;;
      --supervised | --no-bt)
        [[ $ALLOW_SUPERVISED == 1 ]] || die "unknown option '$opt' (see --help; it belongs to wmt16_en_ro.sh)"
        if [[ $opt == --supervised ]]; then SUPERVISED=1; else NO_BT=1; fi
        shift ;;
      *) die "unknown option '$opt' (see --help)" ;;
    esac
  done

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
  return 0
}

# ------------------------------------------------------------------------------------------------
# layout, stage markers
# ------------------------------------------------------------------------------------------------

setup_paths() {
  REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  TOOLS=$REPO/recipes/lib/wmt16_tools.py
  CHECKSUMS=$REPO/recipes/checksums.sha256
  USER_DIR=$REPO/xlm_fairseq
  PYTHON=${PYTHON:-python}
  WORK=$(abspath "$WORK_DIR")
  [[ -z $DATA_DIR ]] || DATA_DIR=$(abspath "$DATA_DIR")
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
  # the non-English language sorted with English, as data-bin names pairs (de-en, en-ro)
  PAIR_SORTED=${LANGS/,/-}
  IFS=, read -r LANG_A LANG_B <<< "$LANGS"
}

# The options a stage's result depends on (with those of the stages before it).
stage_key() {
  local key="recipe=$RECIPE init=$INIT mono=$MONO_SENTENCES supervised=$SUPERVISED"
  (($1 >= 2)) && [[ $INIT == pretrain ]] && key+=" vocab=$VOCAB_SIZE spm_sentences=$SPM_SENTENCES"
  (($1 >= 3)) && [[ $INIT == pretrain ]] && key+=" pretrain_max_update=${MAX_UPDATE:-none}"
  (($1 >= 4)) && key+=" no_bt=$NO_BT max_update=${MAX_UPDATE:-none}"
  printf '%s\n' "$key"
}

# stage_done N: 0 if stage N finished before with the same options; dies if with other options
stage_done() {
  local marker=$MARKERS/$1.done key
  [[ -f $marker ]] || return 1
  key=$(stage_key "$1")
  if [[ $(< "$marker") != "$key" ]]; then
    die "stage $1 was completed with other options ($(< "$marker")); now: $key. Use another --work-dir, or delete $marker (and the stages after it) to redo it"
  fi
  return 0
}

mark_done() {
  local n=$1
  if [[ $DRY_RUN == 1 ]]; then
    note "stage $n done: $MARKERS/$n.done"
    return 0
  fi
  mkdir -p "$MARKERS"
  stage_key "$n" > "$MARKERS/$n.done"
}

# a stage that runs again makes the results of the stages after it stale
forget_later_stages() {
  local n=$1 later
  for ((later = n + 1; later <= 5; later++)); do
    if [[ -f $MARKERS/$later.done ]]; then
      if [[ $DRY_RUN == 1 ]]; then
        note "would forget stage $later (its input is redone): rm $MARKERS/$later.done"
      else
        rm -f "$MARKERS/$later.done"
      fi
    fi
  done
}

# ------------------------------------------------------------------------------------------------
# stage 1: download
# ------------------------------------------------------------------------------------------------

verify_cmd() {
  local file=$1 name=$2
  local cmd=("$PYTHON" "$TOOLS" verify --name "$name" --checksums "$CHECKSUMS" --lock "$LOCK")
  [[ $ACCEPT_NEW == 1 ]] && cmd+=(--accept-new-checksums)
  cmd+=("$file")
  if ! run "${cmd[@]}"; then
    if [[ -n $DATA_DIR ]]; then
      die "refusing $file from --data-dir (see the line above)"
    fi
    die "refusing $file (see the line above); delete it to download it again"
  fi
}

# fetch NAME URL: DOWNLOADS/NAME, from --data-dir or the URL, checked against its SHA-256
fetch() {
  local name=$1 url=$2 dest=$DOWNLOADS/$1
  if [[ -n $DATA_DIR ]]; then
    if [[ $DRY_RUN == 0 && ! -f $DATA_DIR/$name ]]; then
      die "--data-dir $DATA_DIR has no $name (it comes from $url)"
    fi
    run ln -sfn "$DATA_DIR/$name" "$dest"
  elif [[ -f $dest ]]; then
    note "$name: already downloaded"
  else
    if [[ $DRY_RUN == 0 ]] && ! command -v curl > /dev/null; then
      die "curl is needed to download $url (or give --data-dir with local copies)"
    fi
    run curl -fL --retry 3 --retry-delay 10 -o "$dest.part" "$url"
    run mv -f "$dest.part" "$dest"
  fi
  verify_cmd "$dest" "$name"
}

stage_download() {
  local lang url name
  local -a urls files para_urls
  run mkdir -p "$DOWNLOADS" "$RAW"
  for lang in "$LANG_A" "$LANG_B"; do
    split_words urls "${MONO_URLS[$lang]}"
    for url in "${urls[@]}"; do
      fetch "${url##*/}" "$url"
    done
  done
  fetch "${DEV_URL##*/}" "$DEV_URL"
  split_words para_urls "${PARA_URLS:-}"
  if [[ $SUPERVISED == 1 ]]; then
    for url in "${para_urls[@]}"; do
      fetch "${url##*/}" "$url"
    done
  fi
  if [[ $INIT == released ]]; then
    for name in "$RELEASED_MODEL" "$RELEASED_CODES" "$RELEASED_VOCAB"; do
      fetch "$name" "$RELEASED_URL/$name"
    done
  fi

  # News Crawl: the years concatenated in order, the first --mono-sentences lines kept (as XLM)
  for lang in "$LANG_A" "$LANG_B"; do
    split_words urls "${MONO_URLS[$lang]}"
    files=()
    for url in "${urls[@]}"; do files+=("$DOWNLOADS/${url##*/}"); done
    run "$PYTHON" "$TOOLS" head-gz --lines "$MONO_SENTENCES" --out "$RAW/mono.$lang" "${files[@]}"
  done
  for lang in "$LANG_A" "$LANG_B"; do
    run "$PYTHON" "$TOOLS" sgm2txt --tar "$DOWNLOADS/${DEV_URL##*/}" "${VALID_SGM[$lang]}" "$RAW/valid.$PAIR_SORTED.$lang"
    run "$PYTHON" "$TOOLS" sgm2txt --tar "$DOWNLOADS/${DEV_URL##*/}" "${TEST_SGM[$lang]}" "$RAW/test.$PAIR_SORTED.$lang"
  done
  if [[ $SUPERVISED == 1 ]]; then
    files=()
    for url in "${para_urls[@]}"; do files+=("$DOWNLOADS/${url##*/}"); done
    run "$PYTHON" "$TOOLS" extract-para --langs "$PAIR_SORTED" --out-prefix "$RAW/train.$PAIR_SORTED" "${files[@]}"
  fi
}

# ------------------------------------------------------------------------------------------------
# stage 2: preprocess
# ------------------------------------------------------------------------------------------------

stage_preprocess() {
  local lang
  local -a cmd
  cmd=("$PYTHON" -m preprocess.prepare "$DATA_BIN" --langs "$LANGS")
  for lang in "$LANG_A" "$LANG_B"; do
    cmd+=(--mono "train:$lang=$RAW/mono.$lang")
  done
  # monolingual valid/test sets: the sides of the parallel ones (as XLM links them), for MLM validation
  for lang in "$LANG_A" "$LANG_B"; do
    cmd+=(--mono "valid:$lang=$RAW/valid.$PAIR_SORTED.$lang" --mono "test:$lang=$RAW/test.$PAIR_SORTED.$lang")
  done
  cmd+=(--para "valid:$PAIR_SORTED=$RAW/valid.$PAIR_SORTED" --para "test:$PAIR_SORTED=$RAW/test.$PAIR_SORTED")
  [[ $SUPERVISED == 1 ]] && cmd+=(--para "train:$PAIR_SORTED=$RAW/train.$PAIR_SORTED")
  [[ $OTHER == ro ]] && cmd+=(--ro-remove-diacritics)
  if [[ $INIT == released ]]; then
    run "$PYTHON" "$TOOLS" vocab-to-dict "$DOWNLOADS/$RELEASED_VOCAB" "$XLM_VOCAB_DICT"
    cmd+=(--bpe-codes "$DOWNLOADS/$RELEASED_CODES" --dict "$XLM_VOCAB_DICT")
  else
    cmd+=(--vocab-size "$VOCAB_SIZE" --spm-sentences-per-lang "$SPM_SENTENCES")
  fi
  run "${cmd[@]}"
}

# ------------------------------------------------------------------------------------------------
# stage 3: pretrain (or convert the released model)
# ------------------------------------------------------------------------------------------------

device_args() {
  if ((GPUS == 0)); then
    printf '%s\n' --cpu
  else
    printf '%s\n' --distributed-world-size "$GPUS"
    ((FP16 == 1)) && printf '%s\n' --fp16
  fi
  return 0
}

# XLM counts an "epoch" as 200000 sentences, 32 per objective step; it validates once an epoch and
# stops after 10 validations without improvement. With --step-per-objective (XLM's loop: one
# optimiser step, --clip-norm 5 clip and LR step per objective) one fairseq update is one such step.
EPOCH_UPDATES=$(((200000 + 31) / 32))

stage_pretrain() {
  local interval
  local -a cmd device
  if [[ $INIT == released ]]; then
    run "$PYTHON" -m xlm_fairseq.convert "$DOWNLOADS/$RELEASED_MODEL" "$RELEASED_DIR" \
      --codes "$DOWNLOADS/$RELEASED_CODES" --lowercase no --force
    # the data must be numbered exactly as the model's vocabulary
    run "$PYTHON" "$TOOLS" same-dict "$RELEASED_DIR/dict.txt" "$DATA_BIN/dict.txt"
    return 0
  fi
  interval=$EPOCH_UPDATES
  mapfile -t device < <(device_args)
  cmd=(fairseq-train "$DATA_BIN" --user-dir "$USER_DIR"
    --task cross_lingual_lm --langs "$LANGS" --mlm-steps "en,$OTHER"
    --arch xlm_1024 --tokens-per-sample 256 --batch-size 32
    --mask-prob 0.15 --mask-keep-rand '0.8,0.1,0.1' --sample-alpha 0 --lg-sampling-factor -1
    --dropout 0.1 --attention-dropout 0.1
    --step-per-objective --clip-norm 5
    --optimizer adam --adam-betas '(0.9,0.999)' --lr 0.0001 --lr-scheduler fixed
    --validate-interval-updates "$interval" --save-interval-updates "$interval" --keep-interval-updates 1
    --no-epoch-checkpoints --best-checkpoint-metric ppl --patience 10
    --save-dir "$PRETRAIN_DIR" --log-format simple --log-interval 100
    "${device[@]}")
  [[ -n $MAX_UPDATE ]] && cmd+=(--max-update "$MAX_UPDATE")
  run "${cmd[@]}"
}

# ------------------------------------------------------------------------------------------------
# stage 4: UNMT / NMT
# ------------------------------------------------------------------------------------------------

init_checkpoint() {
  if [[ $INIT == released ]]; then
    printf '%s\n' "$RELEASED_DIR"
  else
    printf '%s\n' "$PRETRAIN_DIR/checkpoint_best.pt"
  fi
}

stage_train() {
  local interval
  local -a cmd device
  cmd=(fairseq-train "$DATA_BIN" --user-dir "$USER_DIR" --task translation_lm --langs "$LANGS")
  if [[ $NO_BT == 0 ]]; then
    cmd+=(--ae-steps "en,$OTHER" --bt-steps "en-$OTHER-en,$OTHER-en-$OTHER"
      --lambda-ae '0:1,100000:0.1,300000:0' --lambda-bt 1
      --word-shuffle 3 --word-dropout 0.1 --word-blank 0.1 --bt-max-len-a 1.3 --bt-max-len-b 5)
  fi
  if [[ $SUPERVISED == 1 ]]; then
    cmd+=(--mt-steps "en-$OTHER,$OTHER-en" --lambda-mt 1)
  fi
  interval=$EPOCH_UPDATES
  mapfile -t device < <(device_args)
  cmd+=(--pretrained-xlm-checkpoint "$(init_checkpoint)"
    --arch xlm_1024 --dropout 0.1 --attention-dropout 0.1 --max-tokens 2000
    --step-per-objective --clip-norm 5
    --optimizer adam --adam-betas '(0.9,0.98)' --lr 0.0001
    --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07
    --valid-lang-pairs "en-$OTHER,$OTHER-en" --best-checkpoint-metric "bleu_$OTHER-en" --maximize-best-checkpoint-metric
    --validate-interval-updates "$interval" --save-interval-updates "$interval" --keep-interval-updates 1
    --no-epoch-checkpoints --patience 10
    --save-dir "$MT_DIR" --log-format simple --log-interval 100
    "${device[@]}")
  [[ -n $MAX_UPDATE ]] && cmd+=(--max-update "$MAX_UPDATE")
  run "${cmd[@]}"
}

# ------------------------------------------------------------------------------------------------
# stage 5: evaluate
# ------------------------------------------------------------------------------------------------

evaluate_direction() {
  local src=$1 tgt=$2 dir=$EVAL_DIR/$1-$2 ref=$RAW/test.$PAIR_SORTED.$2 remove_bpe
  local -a cmd
  if [[ $INIT == released ]]; then remove_bpe='@@ '; else remove_bpe=sentencepiece; fi
  run mkdir -p "$dir"
  cmd=(fairseq-generate "$DATA_BIN" --user-dir "$USER_DIR" --task translation_lm --langs "$LANGS"
    -s "$src" -t "$tgt" --gen-subset test --path "$MT_DIR/checkpoint_best.pt"
    --beam 5 --remove-bpe "$remove_bpe" --max-tokens 4000 --max-sentence-len 500
    --results-path "$dir")
  if ((GPUS == 0)); then cmd+=(--cpu); elif ((FP16 == 1)); then cmd+=(--fp16); fi
  run "${cmd[@]}"
  run "$PYTHON" "$TOOLS" hyps "$dir/generate-test.txt" --lang "$tgt" \
    --out-tok "$dir/hyp.tok" --out-detok "$dir/hyp.detok" --expect-lines-of "$ref"
  note "$src->$tgt: sacreBLEU, detokenised output against the raw newstest2016 reference"
  run_to "$dir/sacrebleu.txt" sacrebleu "$ref" -i "$dir/hyp.detok" -l "$src-$tgt" -m bleu -f text
  if [[ $tgt == ro ]]; then
    note "$src->$tgt: sacreBLEU against the reference without diacritics (the model writes none)"
    run "$PYTHON" "$TOOLS" strip-diacritics "$ref" "$dir/ref.nodiacritics"
    run_to "$dir/sacrebleu.nodiacritics.txt" sacrebleu "$dir/ref.nodiacritics" -i "$dir/hyp.detok" -l "$src-$tgt" -m bleu -f text
  fi
  note "$src->$tgt: tokenised BLEU (Moses-tokenised output and reference, as the paper's multi-bleu.perl)"
  if [[ $tgt == ro ]]; then
    run "$PYTHON" "$TOOLS" tokenize-ref "$ref" "$dir/ref.tok" --lang "$tgt" --ro-remove-diacritics
  else
    run "$PYTHON" "$TOOLS" tokenize-ref "$ref" "$dir/ref.tok" --lang "$tgt"
  fi
  run_to "$dir/tokenized_bleu.txt" sacrebleu "$dir/ref.tok" -i "$dir/hyp.tok" -l "$src-$tgt" -m bleu -f text --tokenize none
}

stage_evaluate() {
  local paper=$PAPER_BLEU_UNSUP
  if [[ $SUPERVISED == 1 && $NO_BT == 1 ]]; then
    paper=$PAPER_BLEU_SUP_NO_BT
  elif [[ $SUPERVISED == 1 ]]; then
    paper=$PAPER_BLEU_SUP
  fi
  evaluate_direction en "$OTHER"
  evaluate_direction "$OTHER" en
  run "$PYTHON" "$TOOLS" summary "$EVAL_DIR" "en-$OTHER" "$OTHER-en" --paper "$paper"
}

# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------

STAGE_NAMES=("" download preprocess pretrain train evaluate)

wmt16_main() {
  parse_options "$@"
  setup_paths
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  if [[ $DRY_RUN == 1 ]]; then
    note "dry run of $RECIPE: nothing is run or written; work dir $WORK"
    printf 'export PYTHONPATH=%s\n' "$(quote_cmd "$PYTHONPATH")"
  fi
  local n name
  for ((n = STAGE; n <= STOP_STAGE; n++)); do
    name=${STAGE_NAMES[$n]}
    [[ $n == 3 && $INIT == released ]] && name="convert (released $RELEASED_MODEL)"
    if stage_done "$n"; then
      note "stage $n: $name: done before ($MARKERS/$n.done), skipped"
      continue
    fi
    note "stage $n: $name"
    forget_later_stages "$n"
    case $n in
      1) stage_download ;;
      2) stage_preprocess ;;
      3) stage_pretrain ;;
      4) stage_train ;;
      5) stage_evaluate ;;
    esac
    mark_done "$n"
  done
}
