# shellcheck shell=bash
#
# Stages 2-5 of the WMT16 recipes (sourced by recipes/wmt16/common.sh): preprocess, pretrain (or
# convert the released model), train the translation model, evaluate.

# ------------------------------------------------------------------------------------------------
# stage 2: preprocess
# ------------------------------------------------------------------------------------------------

stage_preprocess() {
  local lang
  local -a cmd
  cmd=(xlm-fairseq-prepare "$DATA_BIN" --langs "$LANGS")
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
    run "$PYTHON" "${TOOLS[@]}" vocab-to-dict "$DOWNLOADS/$RELEASED_VOCAB" "$XLM_VOCAB_DICT"
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
# It selects and stops on its own metrics: pretraining on _valid_mlm_ppl (the mean full-mask
# perplexity of the languages: mlm_fullmask_ppl), translation on valid_en-XX_mt_bleu (multi-bleu on
# tokenised text: bleu_tok_en-XX); ours (ppl, sacreBLEU bleu_*) are logged beside them.
EPOCH_UPDATES=$(((200000 + 31) / 32))

stage_pretrain() {
  local interval
  local -a cmd device optim
  if [[ $INIT == released ]]; then
    run xlm-fairseq-convert "$DOWNLOADS/$RELEASED_MODEL" "$RELEASED_DIR" \
      --codes "$DOWNLOADS/$RELEASED_CODES" --lowercase no --force
    # the data must be numbered exactly as the model's vocabulary
    run "$PYTHON" "${TOOLS[@]}" same-dict "$RELEASED_DIR/dict.txt" "$DATA_BIN/dict.txt"
    return 0
  fi
  interval=$EPOCH_UPDATES
  mapfile -t device < <(device_args)
  # the shared optimiser and clip (recipes/train/optim.flags) with XLM's pretraining settings: Adam
  # (0.9, 0.999), lr 1e-4, no decay
  optim_flags optim --adam-betas '(0.9,0.999)' --lr-scheduler fixed --lr 0.0001
  cmd=(fairseq-train "$DATA_BIN" --user-dir "$USER_DIR"
    --task cross_lingual_lm --langs "$LANGS" --mlm-steps "en,$OTHER"
    "${ARCH[@]}" --tokens-per-sample 256 --batch-size 32
    --mask-prob 0.15 --mask-keep-rand '0.8,0.1,0.1' --sample-alpha 0 --lg-sampling-factor -1
    --dropout 0.1 --attention-dropout 0.1
    --step-per-objective "${optim[@]}"
    --validate-interval-updates "$interval" --save-interval-updates "$interval" --keep-interval-updates 1
    --no-epoch-checkpoints --best-checkpoint-metric mlm_fullmask_ppl --patience 10
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
  local -a cmd device optim
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
  # the shared optimiser (recipes/train/optim.flags) as XLM's adam_inverse_sqrt for MT: lr 1e-4 after
  # 4000 warm-up steps from 1e-7
  optim_flags optim --lr 0.0001 --warmup-updates 4000 --warmup-init-lr 1e-07
  cmd+=(--pretrained-xlm-checkpoint "$(init_checkpoint)"
    "${ARCH[@]}" --dropout 0.1 --attention-dropout 0.1 --max-tokens 2000
    --step-per-objective "${optim[@]}"
    --valid-lang-pairs "en-$OTHER,$OTHER-en" --best-checkpoint-metric "bleu_tok_en-$OTHER" --maximize-best-checkpoint-metric
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

# test BLEU greedy (what XLM's logs report: its evaluator decodes greedily) and at beam 5
evaluate_direction() {
  local src=$1 tgt=$2 beam=$3 dir=$EVAL_DIR/$1-$2/beam$3 ref=$RAW/test.$PAIR_SORTED.$2
  local -a cmd
  run mkdir -p "$dir"
  # no pipeline flags: D- lines are detokenised by the data-bin's own text pipeline
  cmd=(fairseq-generate "$DATA_BIN" --user-dir "$USER_DIR" --task translation_lm --langs "$LANGS"
    -s "$src" -t "$tgt" --gen-subset test --path "$MT_DIR/checkpoint_best.pt"
    --beam "$beam" --max-tokens 4000 --max-sentence-len 500
    --results-path "$dir")
  # XLM's evaluator: greedy, int(1.5 L + 10) tokens with both </s>, an empty translation allowed
  ((beam == 1)) && cmd+=(--max-len-a 1.5 --max-len-b 8 --min-len 0)
  if ((GPUS == 0)); then cmd+=(--cpu); elif ((FP16 == 1)); then cmd+=(--fp16); fi
  run "${cmd[@]}"
  run "$PYTHON" "${TOOLS[@]}" hyps "$dir/generate-test.txt" --lang "$tgt" --data "$DATA_BIN" \
    --out-tok "$dir/hyp.tok" --out-detok "$dir/hyp.detok" --expect-lines-of "$ref"
  # sacrebleu's own reference of the test set (since sacrebleu 2 its signature no longer names the set)
  note "$src->$tgt: sacreBLEU -t $TEST_TESTSET -l $src-$tgt (sacrebleu's own reference)"
  run_to "$dir/sacrebleu.txt" sacrebleu -t "$TEST_TESTSET" -l "$src-$tgt" -i "$dir/hyp.detok" -m bleu -f text
  if [[ $tgt == ro ]]; then
    note "$src->$tgt: sacreBLEU against the reference without diacritics (the model writes none)"
    run "$PYTHON" "${TOOLS[@]}" strip-diacritics "$ref" "$dir/ref.nodiacritics"
    run_to "$dir/sacrebleu.nodiacritics.txt" sacrebleu "$dir/ref.nodiacritics" -i "$dir/hyp.detok" -l "$src-$tgt" -m bleu -f text
  fi
  note "$src->$tgt: tokenised BLEU (Moses-tokenised output and reference, as the paper's multi-bleu.perl)"
  run "$PYTHON" "${TOOLS[@]}" tokenize-ref "$ref" "$dir/ref.tok" --lang "$tgt" --data "$DATA_BIN"
  run_to "$dir/tokenized_bleu.txt" sacrebleu "$dir/ref.tok" -i "$dir/hyp.tok" -l "$src-$tgt" -m bleu -f text --tokenize none
}

stage_evaluate() {
  local paper=$PAPER_BLEU_UNSUP
  if [[ $SUPERVISED == 1 && $NO_BT == 1 ]]; then
    paper=$PAPER_BLEU_SUP_NO_BT
  elif [[ $SUPERVISED == 1 ]]; then
    paper=$PAPER_BLEU_SUP
  fi
  local beam
  for beam in 1 5; do
    evaluate_direction en "$OTHER" "$beam"
    evaluate_direction "$OTHER" en "$beam"
  done
  run "$PYTHON" "${TOOLS[@]}" summary "$EVAL_DIR" "en-$OTHER" "$OTHER-en" --paper "$paper"
}
