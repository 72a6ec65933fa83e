#!/usr/bin/env bash
# The add-a-language experiment (recipes/README.md, "A new language into a trained LM"): Romanian added to
# the quickstart's de-en LM, against an en-ro LM from scratch, the same text and minutes on one machine.
#   1. needs the LM of `recipes/quickstart.sh` (runs/quickstart) and the en-ro text as a train.sh run split
#      it (SPLITS: the raw/ of `train.sh --pairs en-ro=...` on ../shared/data, recipes/README.md)
#   2. xlm-fairseq-convert --add-lang ro, three ways of starting the new rows
#   3. train.sh --lm from the default start (de kept in pretraining), then train.sh from scratch, the same
#      text, held-out sets and --minutes; then each start continued for INIT_UPDATES updates: which is best
#   4. de and en MLM perplexity of the LM before and after, ro of both arms' LMs, on the same held-out text
# Writes runs/addlang/ (OUT=...): the runs, eval/*.log and results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/addlang}
QS=${QS:-runs/quickstart}
SPLITS=${SPLITS:-runs/enro-semi/raw}
SCRATCH=$OUT/enro-scratch
MINUTES=${MINUTES:-30}
INIT_UPDATES=${INIT_UPDATES:-1500}
BIN=$(dirname "$(command -v python)")
R=$SPLITS
Q=$QS/raw
LM=$QS/checkpoints/pretrain/checkpoint_best.pt
for f in "$LM" "$R/train.en-ro.en" "$R/train.ro" "$R/valid.en-ro.ro" "$R/test.en-ro.ro" "$Q/train.de"; do
  [ -e "$f" ] || { echo "add_language: error: $f missing; run recipes/quickstart.sh and train.sh for en-ro first" >&2; exit 2; }
done
mkdir -p "$OUT/eval"

# 2. three starts of the new rows
for start in "pieces mean" "random mean" "pieces en"; do
  read -r init lang <<<"$start"
  name="lm-ro-$init-$lang"
  extra=(); [ "$lang" = mean ] || extra=(--lang-init "$lang")
  [ -f "$OUT/$name/model.pt" ] || xlm-fairseq-convert "$LM" "$OUT/$name" --add-lang ro --text "$R/train.ro" \
    --text "$R/train.en-ro.ro" --init "$init" "${extra[@]}"
done
[ -e "$OUT/lm-ro" ] || ln -s lm-ro-pieces-mean "$OUT/lm-ro"

# 3. en-ro from the extended LM, the from-scratch run's text, held-out sets and minutes; de kept in pretraining
bash recipes/train.sh --lm "$OUT/lm-ro" --pairs en-ro="$R/train.en-ro" --mono en="$R/train.en" --mono ro="$R/train.ro" \
  --mono de="$Q/train.de" --valid en-ro="$R/valid.en-ro" --test en-ro="$R/test.en-ro" --minutes "$MINUTES" \
  --work-dir "$OUT/enro-from-deen"
bash recipes/train.sh --pairs en-ro="$R/train.en-ro" --mono en="$R/train.en" --mono ro="$R/train.ro" \
  --valid en-ro="$R/valid.en-ro" --test en-ro="$R/test.en-ro" --minutes "$MINUTES" --work-dir "$SCRATCH"
DATA=$OUT/enro-from-deen/data-bin
mapfile -t OPTIM < <(python -m recipes.train.optim --lr 0.001 --warmup-updates 1000)
for start in "pieces mean" "random mean" "pieces en"; do
  read -r init lang <<<"$start"
  name="lm-ro-$init-$lang"
  [ -f "$OUT/init/$name/checkpoint_last.pt" ] && continue
  # train.sh's pretraining (recipes/train/training_run.py), for INIT_UPDATES updates
  "$BIN/fairseq-train" "$DATA" --user-dir xlm_fairseq --cpu --num-workers 0 --seed 1 --log-interval 100 \
    --no-epoch-checkpoints --step-per-objective --langs en,ro,de --pretrained-xlm-checkpoint "$OUT/$name/model.pt" \
    --task cross_lingual_lm --mlm-steps en,ro,de,en-ro --arch xlm_tiny --encoder-embed-dim 128 --encoder-layers 3 \
    --encoder-attention-heads 4 --decoder-embed-dim 128 --decoder-layers 3 --decoder-attention-heads 4 \
    --tokens-per-sample 64 --dropout 0 --attention-dropout 0 --bf16 --max-tokens 2048 \
    "${OPTIM[@]}" --max-update "$INIT_UPDATES" \
    --disable-validation --save-dir "$OUT/init/$name" > "$OUT/eval/init-$name.log" 2>&1
done

# 4. MLM perplexity on the same held-out text: de, en (the quickstart's valid sides), ro (the en-ro valid side)
prepare() {  # DEST LANGS SPM_DIR
  local args=()
  for lang in ${2//,/ }; do
    case $lang in ro) text=$R/valid.ro ;; *) text=$Q/valid.$lang ;; esac
    args+=(--mono "train:$lang=$text" --mono "valid:$lang=$text")
  done
  [ -f "$1/valid.${2##*,}.bin" ] || xlm-fairseq-prepare "$1" --langs "$2" --spm-model "$3/spm.model" \
    --dict "$3/dict.txt" --quiet --force "${args[@]}"
}
prepare "$OUT/eval/bin-old" de,en "$QS/data-bin"
prepare "$OUT/eval/bin-new" en,ro,de "$OUT/lm-ro"
prepare "$OUT/eval/bin-scratch" en,ro "$SCRATCH/data-bin"
validate() {  # NAME DATA LANGS STEPS CHECKPOINT
  "$BIN/fairseq-validate" "$2" --user-dir xlm_fairseq --task cross_lingual_lm --langs "$3" --mlm-steps "$4" \
    --tokens-per-sample 64 --max-tokens 2048 --path "$5" --cpu --valid-subset valid --log-format json \
    > "$OUT/eval/$1.log" 2>&1
}
validate before "$OUT/eval/bin-old" de,en de,en "$LM"
validate after "$OUT/eval/bin-new" en,ro,de en,ro,de "$OUT/enro-from-deen/checkpoints/pretrain/checkpoint_best.pt"
validate scratch "$OUT/eval/bin-scratch" en,ro en,ro "$SCRATCH/checkpoints/pretrain/checkpoint_best.pt"
for start in "pieces mean" "random mean" "pieces en"; do
  read -r init lang <<<"$start"
  validate "init-lm-ro-$init-$lang-valid" "$OUT/eval/bin-new" en,ro,de en,ro,de "$OUT/init/lm-ro-$init-$lang/checkpoint_last.pt"
done
python -m recipes.experiments.add_language_results "$OUT" "$SCRATCH" "$R" > "$OUT/results.json"
cat "$OUT/results.json"
