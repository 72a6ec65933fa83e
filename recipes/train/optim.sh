# shellcheck shell=bash
#
# The shared optimiser flags (recipes/train/optim.flags) for the bash recipes (sourced, not run), read
# by recipes/train/optim.py, their one reader. Needs PYTHONPATH=REPO (the recipes export it) and, for
# its error line, RECIPE.

# optim_flags ARRAY [--OPTION VALUE]...: ARRAY=(the shared flags, each OPTION given here with its VALUE
# instead, those the file does not set added)
optim_flags() {
  local -n _optim=$1
  local words
  shift
  words=$("${PYTHON:-python}" -m recipes.train.optim "$@") \
    || { printf '%s: error: cannot read the shared optimiser flags (recipes/train/optim.flags)\n' "$RECIPE" >&2; exit 1; }
  mapfile -t _optim <<< "$words"
}
