# shellcheck shell=bash
#
# The stage library of the recipes (sourced, not run), shared by recipes/quickstart.sh and the WMT16
# recipes (recipes/lib/wmt16_common.sh): one-line errors, progress notes and stage headers, commands
# run (or only listed, with a dry run) and stage markers that remember which stages finished.
#
# The recipe sets, before calling these functions:
#   RECIPE        its name, the prefix of every message (quickstart, wmt16_en_de.sh)
#   MARKERS       the directory of the stage markers (WORK/.stages): ID.done holds the key of a
#                 finished stage, ID.started that of a stage running or interrupted
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
    "$@" > "$out.tmp"
    mv -f "$out.tmp" "$out"
    cat "$out"
  fi
}

# run_logged LOG CMD...: run CMD quietly, stdout and stderr into LOG; on failure show the log's last
# lines (warnings left out) after one error line, and exit 1
run_logged() {
  local log=$1
  shift
  if [[ $DRY_RUN == 1 ]]; then
    printf '%s > %s 2>&1\n' "$(quote_cmd "$@")" "$(quote_cmd "$log")"
    return 0
  fi
  if ! "$@" > "$log" 2>&1; then
    printf "%s: error: '%s' failed; last lines of %s:\n" "$RECIPE" "$1" "$log" >&2
    grep -vE "Warning|warn\(|deprecat" "$log" | tail -n 15 >&2
    exit 1
  fi
}

# ------------------------------------------------------------------------------------------------
# stage markers
# ------------------------------------------------------------------------------------------------

# stage_done ID: 0 if stage ID finished before with the same key; dies if with another key
stage_done() {
  local marker=$MARKERS/$1.done key
  [[ -f $marker ]] || return 1
  key=$(stage_key "$1")
  if [[ $(< "$marker") != "$key" ]]; then
    die "stage $1 was completed with other options ($(< "$marker")); now: $key. Use another --work-dir, or ${STAGE_REDO:-delete $marker (and the stages after it)} to redo it"
  fi
  return 0
}

# mark_done ID: stage ID finished; its marker holds its key
mark_done() {
  if [[ $DRY_RUN == 1 ]]; then
    note "stage $1 done: $MARKERS/$1.done"
    return 0
  fi
  mkdir -p "$MARKERS"
  # whole or absent: a marker cut short by a kill would read as "completed with other options"
  stage_key "$1" > "$MARKERS/$1.done.tmp"
  mv -f "$MARKERS/$1.done.tmp" "$MARKERS/$1.done"
  rm -f "$MARKERS/$1.started"  # its checkpoints now belong to a finished run
}

# forget_later_stages ID: a stage that runs again makes the results of the stages after it stale
forget_later_stages() {
  local id later after=0
  for id in "${STAGE_IDS[@]}"; do
    if [[ $after == 0 ]]; then
      [[ $id == "$1" ]] && after=1
      continue
    fi
    later=$MARKERS/$id.done
    [[ -f $later ]] || continue
    if [[ $DRY_RUN == 1 ]]; then
      note "would forget stage $id (its input is redone): rm $later"
    else
      rm -f "$later"
    fi
  done
}

# set_aside_stale_checkpoints ID: stage ID is about to run. fairseq-train resumes from any
# checkpoint_last.pt it finds, so a checkpoint directory is kept in place only for the run it belongs
# to: stage ID's own when its last start (ID.started) had the same key (an interrupted run resumes).
# The others -- ID's own from other options or from a finished run whose marker went, every later
# stage's (made from an earlier result of ID) -- are moved to DIR.stale-TIME, never deleted.
set_aside_stale_checkpoints() {
  local id=$1 key started=$MARKERS/$1.started after=0 s dir why stale n
  key=$(stage_key "$id")
  for s in "${STAGE_IDS[@]}"; do
    [[ $s == "$id" ]] && after=1
    [[ $after == 1 ]] || continue
    dir=${STAGE_CHECKPOINTS[$s]:-}
    [[ -n $dir && -d $dir ]] || continue
    if [[ $s != "$id" ]]; then
      why="made from an earlier result of stage $id"
    elif [[ ! -f $started ]]; then
      why="of a run that finished before"
    elif [[ $(< "$started") != "$key" ]]; then
      why="made with other options ($(< "$started"))"
    else
      continue
    fi
    stale=$dir.stale-$(date +%Y%m%d-%H%M%S) n=1
    while [[ -e $stale ]]; do stale=$dir.stale-$(date +%Y%m%d-%H%M%S).$((n++)); done  # mv onto a dir nests
    if [[ $DRY_RUN == 1 ]]; then
      note "would set aside stage $s's checkpoints ($why): mv $dir $stale"
    else
      mv "$dir" "$stale"
      note "stage $s's checkpoints were $why: moved to $stale; stage $s trains afresh"
    fi
  done
  if [[ $DRY_RUN == 0 && -n ${STAGE_CHECKPOINTS[$id]:-} ]]; then
    mkdir -p "$MARKERS"
    printf '%s\n' "$key" > "$started.tmp"
    mv -f "$started.tmp" "$started"
  fi
}

# require_finished_before FIRST: a run that starts at stage FIRST (--stage) needs every stage before
# it finished with the same options; a dry run notes what a real run would refuse
require_finished_before() {
  local id
  for id in "${STAGE_IDS[@]}"; do
    [[ $id == "$1" ]] && return 0
    stage_done "$id" && continue
    if [[ $DRY_RUN == 1 ]]; then
      note "--stage $1: stage $id has not finished in $WORK (no $MARKERS/$id.done): a real run stops here"
    else
      die "--stage $1: stage $id has not finished in $WORK (no $MARKERS/$id.done); run from --stage $id"
    fi
  done
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
  forget_later_stages "$id"
  set_aside_stale_checkpoints "$id"
  "$@"
  mark_done "$id"
}
