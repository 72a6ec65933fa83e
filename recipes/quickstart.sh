#!/usr/bin/env bash
# Offline quickstart: recipes/train.sh (the one command for any languages) on the real en-de documentation
# sample shipped in recipes/data/en-de-docs, on CPU, in about 30 minutes on 2 cores:
#   preprocess -> MLM+TLM pretraining (cross_lingual_lm) -> translation initialised from it
#   (translation_lm: by default semi-supervised, MT on the 20,000 pairs + AE + back-translation on the
#   monolingual text, XLM's Table 3 setting; --unsupervised: no pair seen, MLM pretraining from piece
#   embeddings of a lexicon induced from the unpaired text, and AE + BT on that text) -> fairseq-generate
#   on the held-out test set, both directions -> sacreBLEU beside
#   the copy-the-source baseline -> an exported model directory that XLMModel.from_pretrained loads.
# Re-running skips finished stages; --fresh starts over.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bash recipes/quickstart.sh [--tiny] [--unsupervised [--lexicon USES]] [--test PREFIX] [--precision P] [--fresh] [--work-dir DIR]
                                  [--keep-checkpoints] [--help]

  --tiny          a reduced run (a few minutes; what CI runs): fewer updates, a smaller test set
  --unsupervised  pure unsupervised MT, no pair seen: MLM pretraining (no TLM) and AE + back-translation
                  on the monolingual text and one half of each side of the pairs, with no line left
                  whose translation is on the other side; the checkpoint is chosen by round trips of
                  held-out monolingual text, not by the valid pairs (default: semi-supervised,
                  MLM+TLM, then MT on the pairs added to AE + BT)
  --lexicon USES  with --unsupervised, what a bilingual lexicon induced from the unpaired text (seconds)
                  feeds (train.sh --lexicon): some of tlm, mt, cs, emb comma-separated, or none; default
                  train.sh's, emb: the LM's piece embeddings started from the lexicon's word vectors
                  (tlm: TLM on every unpaired line beside its word-by-word translation; mt: those pairs
                  as MT fading out; cs: code-switched copies for MLM; recipes/README.md compares them)
  --test PREFIX   also score raw PREFIX.de / PREFIX.en (line-aligned, your own held-out text), beside
                  copying its source; the shipped test set is scored in any case
  --precision P   pretraining's number format: auto (default: bf16 where the CPU multiplies bf16 in hardware,
                  with Intel AMX or AVX-512 BF16 (AMD Zen 4), which pretrains 1.3-1.9x faster at the same
                  perplexity; else fp32), fp32 or bf16; translation trains in fp32 (with
                  --unsupervised in P too: its back-translation runs 20 % faster in bf16)
  --fresh         delete the work directory's previous results first
  --work-dir DIR  where data-bin, checkpoints and outputs go (default: runs/quickstart[-tiny][-unsupervised[-lexicon-USES]])
  --keep-checkpoints  keep every checkpoint translation validates (train.sh --keep-checkpoints)

It runs: bash recipes/train.sh --langs de,en --pairs en-de=SAMPLE/train.en-de --mono en=SAMPLE/mono.en
--mono de=SAMPLE/mono.de --valid en-de=SAMPLE/valid.en-de --test en-de=SAMPLE/test.en-de --minutes 30
(SAMPLE: recipes/data/en-de-docs); the same command takes your own languages (docs/your-languages.md).
Re-running skips the stages that finished and resumes an interrupted one; a work directory made in
the other mode (--tiny or not) is refused: give another --work-dir, or --fresh. Checkpoints that a
redone stage makes stale are moved aside (checkpoints/NAME.stale-TIME), not resumed from.

Needs the install from the README (bash scripts/setup.sh); run with .venv/bin on PATH or from the
activated environment. Training stages are bounded in wall time (--stop-time-hours), so the final
BLEU depends a little on the machine's speed; the checkpoint of the best validation BLEU (the mean
of both directions) is the one scored and exported.
EOF
}

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
die() { printf 'quickstart: error: %s\n' "$*" >&2; exit 2; }

ARGS=(); WORK=""; SUFFIX=""; MODE=""; LEXICON=""; USES=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tiny) ARGS+=(--tiny); MODE=-tiny ;;
    --unsupervised) ARGS+=(--unsupervised); SUFFIX=-unsupervised ;;
    --lexicon)
      [ $# -ge 2 ] && [[ "$2" =~ ^(none|(tlm|mt|cs|emb)(,(tlm|mt|cs|emb))*)$ ]] \
        || die "--lexicon needs none or some of tlm, mt, cs, emb, comma-separated"
      USES="$2"; shift ;;
    --test) [ $# -ge 2 ] || die "--test needs a file prefix (PREFIX.de and PREFIX.en)"; ARGS+=(--score "yours:de-en=$2"); shift ;;
    --precision)
      [ $# -ge 2 ] && [[ "$2" =~ ^(auto|fp32|bf16)$ ]] || die "--precision needs auto, fp32 or bf16"
      ARGS+=(--precision "$2"); shift ;;
    --fresh) ARGS+=(--fresh) ;;
    --keep-checkpoints) ARGS+=(--keep-checkpoints) ;;
    --work-dir) [ $# -ge 2 ] || die "--work-dir needs a directory"; WORK="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done

if [ -n "$USES" ]; then
  [ "$SUFFIX" = -unsupervised ] || die "--lexicon goes with --unsupervised (with pairs, TLM reads the real ones)"
  LEXICON="-lexicon-${USES//,/-}"
  ARGS+=(--lexicon "$USES")
fi

SAMPLE="$ROOT/recipes/data/en-de-docs"
export XLM_FAIRSEQ_RECIPE=quickstart
exec bash "$ROOT/recipes/train.sh" --langs de,en --pairs "en-de=$SAMPLE/train.en-de" \
  --mono "en=$SAMPLE/mono.en" --mono "de=$SAMPLE/mono.de" \
  --valid "en-de=$SAMPLE/valid.en-de" --test "en-de=$SAMPLE/test.en-de" --minutes 30 \
  --work-dir "${WORK:-$ROOT/runs/quickstart$MODE$SUFFIX$LEXICON}" ${ARGS[@]+"${ARGS[@]}"}
