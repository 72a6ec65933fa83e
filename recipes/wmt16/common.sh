# shellcheck shell=bash
# (shellcheck finds the parts in this directory, or in SCRIPTDIR/wmt16 when it checks a recipe)
# shellcheck source-path=SCRIPTDIR source-path=SCRIPTDIR/wmt16
#
# The code shared by recipes/wmt16_en_de.sh and recipes/wmt16_en_ro.sh (sourced, not run): their
# entry point, wmt16_main.
#
# The recipe script sets the pair's data before calling `wmt16_main "$@"`:
#   RECIPE         its name, for messages (wmt16_en_de.sh)
#   PAIR           the pair as XLM names it (en-de, en-ro)
#   LANGS          fairseq --langs: both languages, alphabetically (de,en / en,ro)
#   OTHER          the language that is not English (de / ro)
#   DEFAULT_WORK   default --work-dir
#   MONO_URLS      associative array: language -> space-separated News Crawl URLs (concatenated in
#                  this order, then cut to --mono-sentences lines)
#   VALID_TESTSET, TEST_TESTSET  sacrebleu test sets (-t) for validation and test
#   RELEASED_URL   base URL of XLM's released files; RELEASED_MODEL, RELEASED_CODES, RELEASED_VOCAB
#   PARA_URLS      (en-ro) space-separated parallel training corpora for --supervised
#   PAPER_BLEU_UNSUP, PAPER_BLEU_SUP, PAPER_BLEU_SUP_NO_BT  JSON {direction: BLEU} for the summary
#   ALLOW_SUPERVISED  1 if --supervised / --no-bt are options of this recipe
#   USAGE_PAIR     the pair-specific part of --help
#
# The parts, each sourced here: recipes/train/stages.sh (the bash side of the recipes' stage engine,
# recipes/train/stages.py: errors, notes, commands and --dry-run listings, stage markers),
# recipes/train/optim.sh (the shared optimiser flags), and beside this file options.sh (--help, options,
# layout, stage keys), download.sh (stage 1), train_eval.sh (stages 2-5).

# shellcheck source=../train/stages.sh
source "$(dirname "${BASH_SOURCE[0]}")/../train/stages.sh"
# shellcheck source=../train/optim.sh
source "$(dirname "${BASH_SOURCE[0]}")/../train/optim.sh"
# shellcheck source=options.sh
source "$(dirname "${BASH_SOURCE[0]}")/options.sh"
# shellcheck source=download.sh
source "$(dirname "${BASH_SOURCE[0]}")/download.sh"
# shellcheck source=train_eval.sh
source "$(dirname "${BASH_SOURCE[0]}")/train_eval.sh"

STAGE_IDS=(1 2 3 4 5)
STAGE_NAMES=("" download preprocess pretrain train evaluate)
STAGE_STEPS=("" stage_download stage_preprocess stage_pretrain stage_train stage_evaluate)

wmt16_main() {
  parse_options "$@"
  setup_paths
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  if [[ $DRY_RUN == 1 ]]; then
    note "dry run of $RECIPE: nothing is run or written; work dir $WORK"
    printf 'export PYTHONPATH=%s\n' "$(quote_cmd "$PYTHONPATH")"
  fi
  STAGE_CHECKPOINTS=([4]="$MT_DIR")
  [[ $INIT == pretrain ]] && STAGE_CHECKPOINTS[3]=$PRETRAIN_DIR
  require_finished_before "$STAGE"
  local n name
  for ((n = STAGE; n <= STOP_STAGE; n++)); do
    name=${STAGE_NAMES[$n]}
    [[ $n == 3 && $INIT == released ]] && name="convert (released $RELEASED_MODEL)"
    run_stage "$n" "stage $n: $name" "" "${STAGE_STEPS[$n]}"
  done
}
