# shellcheck shell=bash
#
# The bash side of the recipes' stage engine (sourced, not run), shared by recipes/quickstart.sh,
# the WMT16 recipes (recipes/wmt16/common.sh) and recipes/xnli.sh. The engine itself is
# recipes/train/stages.py, the one implementation the Python drivers use too: stage markers and their
# keys, skipped and forgotten stages, stale checkpoints set aside, --stage N's prerequisites,
# commands run into logs (their tail on failure) and outputs written whole. What stays here is what
# bash must do itself: running the recipe's stage functions, the --dry-run listing of commands, and
# the error lines of a recipe that has not yet found a working Python.
#
# The recipe sets, before calling these functions:
#   RECIPE        its name, the prefix of every message (quickstart, wmt16_en_de.sh)
#   PYTHON        the interpreter (default: python); the recipe exports PYTHONPATH=REPO first
#   MARKERS       the directory of the stage markers (WORK/.stages)
#   WORK          the work directory (named in messages)
#   STAGE_IDS     array: the stage ids in order; when a stage runs, the markers of later ones go
#   stage_key     a function: `stage_key ID` prints, on one line, the options stage ID's result
#                 depends on (with those of the stages before it)
#   DRY_RUN       1: commands are listed, one a line, and nothing is run or written (default 0)
#   STAGE_BANNER  1: stage headers are banners `== [Ns] ...` on stdout with the seconds since
#                 stage_clock_start (the quickstart); 0 (default): notes, as the WMT recipes print
#   STAGE_REDO    how to redo a stage finished with other options (default: delete its marker)
#   STAGE_CHECKPOINTS  associative array (declare -A): stage id -> the directory its fairseq-train
#                 saves to and resumes from (stages without one are left out)

DRY_RUN=0
STAGE_BANNER=0
declare -A STAGE_CHECKPOINTS=()
STAGE_START=$(date +%s)

# ------------------------------------------------------------------------------------------------
# messages
# ------------------------------------------------------------------------------------------------

# die MSG...: one line `RECIPE: error: MSG` on stderr, exit status 2 (a bad option, input or file)
die() {
  printf '%s: error: %s\n' "$RECIPE" "$*" >&2
  exit 2
}

# fail MSG...: the same line, exit status 1 (a tool is missing or a step failed)
fail() {
  printf '%s: error: %s\n' "$RECIPE" "$*" >&2
  exit 1
}

# note MSG...: a progress/comment line: part of the listing in a dry run, on stderr in a real run
note() {
  if [[ $DRY_RUN == 1 ]]; then
    printf '# %s\n' "$*"
  else
    printf '[%s] %s\n' "$RECIPE" "$*" >&2
  fi
}

stage_clock_start() {
  STAGE_START=$(date +%s)
}

# seconds since stage_clock_start (or since this file was sourced)
stage_elapsed() {
  printf '%s\n' "$(($(date +%s) - STAGE_START))"
}

# stage_header TEXT: announce a stage (a banner or a note, see STAGE_BANNER)
stage_header() {
  if [[ $STAGE_BANNER == 1 ]]; then
    printf '\n== [%ss] %s\n' "$(stage_elapsed)" "$*"
  else
    note "$*"
  fi
}

# ------------------------------------------------------------------------------------------------
# commands
# ------------------------------------------------------------------------------------------------

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

# engine COMMAND ARGS...: python -m recipes.train.stages --recipe RECIPE [--dry-run] COMMAND ARGS...
engine() {
  local -a common=(--recipe "$RECIPE")
  [[ $DRY_RUN == 1 ]] && common+=(--dry-run)
  "${PYTHON:-python}" -m recipes.train.stages "${common[@]}" "$@"
}

# run CMD...: print it (on stderr, `+ CMD`); run it unless a dry run (which lists it on stdout)
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
    engine write-output "$out" "$@"
  fi
}

# run_logged LOG CMD...: run CMD quietly, stdout and stderr into LOG; on failure one error line, the
# log's last lines (warnings left out), and exit 1
run_logged() {
  local log=$1
  shift
  if [[ $DRY_RUN == 1 ]]; then
    printf '%s > %s 2>&1\n' "$(quote_cmd "$@")" "$(quote_cmd "$log")"
  else
    engine run-logged "$log" "$@"
  fi
}

# run_training TRAIN_LOG BUDGET_HOURS METRIC LOG CMD...: run_logged, printing about once a minute the
# update, the minutes left of BUDGET_HOURS and the last validation's METRIC keys from fairseq's
# --log-file TRAIN_LOG (recipes/train/progress.py)
run_training() {
  local train_log=$1 hours=$2 metric=$3 log=$4
  shift 4
  if [[ $DRY_RUN == 1 ]]; then
    run_logged "$log" "$@"
  else
    engine run-logged --progress "$train_log" --budget-hours "$hours" --metric "$metric" "$log" "$@"
  fi
}

# ------------------------------------------------------------------------------------------------
# stages (the markers: recipes/train/stages.py)
# ------------------------------------------------------------------------------------------------

# stages COMMAND ID: the engine's stage COMMAND (check, start, finish, require) on stage ID, given
# every stage's id, key and checkpoint directory
stages() {
  local -a args=(--work "$WORK" --markers "$MARKERS" --ids "$(IFS=,; printf '%s' "${STAGE_IDS[*]}")")
  local id
  for id in "${STAGE_IDS[@]}"; do
    args+=(--key "$id=$(stage_key "$id")")
  done
  for id in "${!STAGE_CHECKPOINTS[@]}"; do
    args+=(--checkpoints "$id=${STAGE_CHECKPOINTS[$id]}")
  done
  [[ -n ${STAGE_REDO:-} ]] && args+=(--redo "$STAGE_REDO")
  engine "${args[@]}" "$@"
}

# stage_done ID: 0 if stage ID finished before with the same key, 1 if not; exits (2) if it finished
# with another key
stage_done() {
  local status=0
  stages check "$1" || status=$?
  case $status in
    0) return 0 ;;
    3) return 1 ;;
    *) exit "$status" ;;
  esac
}

# require_finished_before FIRST: a run that starts at stage FIRST (--stage) needs every stage before
# it finished with the same options; a dry run notes what a real run would refuse
require_finished_before() {
  stages require "$1"
}

# run_stage ID TITLE DETAIL CMD...: stage ID, unless its marker says it finished before (then the
# header `TITLE: done before (MARKER), skipped`); else the header `TITLE[: DETAIL]`, the markers of
# the later stages forgotten, stale checkpoints set aside, CMD run and the stage marked done
run_stage() {
  local id=$1 title=$2 detail=$3
  shift 3
  if stage_done "$id"; then
    stage_header "$title: done before ($MARKERS/$id.done), skipped"
    return 0
  fi
  stage_header "$title${detail:+: $detail}"
  stages start "$id"
  "$@"
  stages finish "$id"
}
