#!/usr/bin/env bash
#
# XLM on WMT16 English-German: unsupervised MT initialised with a cross-lingual MLM (Lample &
# Conneau 2019, Table 2: en->de 26.4, de->en 34.3 BLEU). Run from anywhere; see --help and
# recipes/README.md.
#
#   recipes/wmt16_en_de.sh --dry-run                  # list every command
#   recipes/wmt16_en_de.sh --gpus 8 --fp16            # the whole recipe
#   recipes/wmt16_en_de.sh --init released --stage 1  # start from XLM's released mlm_ende_1024.pth
set -euo pipefail

RECIPE=wmt16_en_de.sh
PAIR=en-de
LANGS=de,en
OTHER=de
DEFAULT_WORK=./work/wmt16_en_de

# News Crawl 2007 + 2008, the years XLM's get-data-nmt.sh downloads for de-en
declare -A MONO_URLS=(
  [en]="https://www.statmt.org/wmt14/training-monolingual-news-crawl/news.2007.en.shuffled.gz
        https://www.statmt.org/wmt14/training-monolingual-news-crawl/news.2008.en.shuffled.gz"
  [de]="https://www.statmt.org/wmt14/training-monolingual-news-crawl/news.2007.de.shuffled.gz
        https://www.statmt.org/wmt14/training-monolingual-news-crawl/news.2008.de.shuffled.gz"
)
# validation and test sets from sacrebleu (-t, its cache and MD5 digests): valid newstest2013, test
# newstest2016; each language from the reference side of the direction into it (de from en-de, en
# from de-en; both directions hold the same sentences)
VALID_TESTSET=wmt13
TEST_TESTSET=wmt16
# XLM's released MLM for en-de, with the BPE codes and vocabulary its data was encoded with
RELEASED_URL=https://dl.fbaipublicfiles.com/XLM
RELEASED_MODEL=mlm_ende_1024.pth
RELEASED_CODES=codes_ende
RELEASED_VOCAB=vocab_ende
PARA_URLS=""
# the paper's BLEU (Table 2, unsupervised, MLM initialisation; tokenised, multi-bleu.perl)
PAPER_BLEU_UNSUP='{"en-de": 26.4, "de-en": 34.3}'
PAPER_BLEU_SUP='{}'
PAPER_BLEU_SUP_NO_BT='{}'
ALLOW_SUPERVISED=0
USAGE_PAIR=""

# shellcheck source-path=SCRIPTDIR source=wmt16/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/wmt16/common.sh"
wmt16_main "$@"
