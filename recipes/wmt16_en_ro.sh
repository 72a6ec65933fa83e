#!/usr/bin/env bash
#
# XLM on WMT16 English-Romanian: unsupervised MT initialised with a cross-lingual MLM (Lample &
# Conneau 2019, Table 2: en->ro 33.3, ro->en 31.8 BLEU), or with --supervised the supervised
# setting of Table 3 (ro->en 38.5 with back-translation). Run from anywhere; see --help and
# recipes/README.md.
#
#   recipes/wmt16_en_ro.sh --dry-run                   # list every command
#   recipes/wmt16_en_ro.sh --gpus 8 --fp16             # unsupervised
#   recipes/wmt16_en_ro.sh --gpus 8 --fp16 --supervised
set -euo pipefail

RECIPE=wmt16_en_ro.sh
PAIR=en-ro
LANGS=en,ro
OTHER=ro
DEFAULT_WORK=./work/wmt16_en_ro

# News Crawl as XLM's get-data-nmt.sh downloads it for en-ro: English 2007 + 2008, Romanian 2015
declare -A MONO_URLS=(
  [en]="https://www.statmt.org/wmt14/training-monolingual-news-crawl/news.2007.en.shuffled.gz
        https://www.statmt.org/wmt14/training-monolingual-news-crawl/news.2008.en.shuffled.gz"
  [ro]="https://data.statmt.org/wmt16/translation-task/news.2015.ro.shuffled.gz"
)
# validation and test sets from sacrebleu (-t, its cache and MD5 digests): valid newsdev2016, test
# newstest2016; each language from the reference side of the direction into it
VALID_TESTSET=wmt16/dev
TEST_TESTSET=wmt16
# WMT16 en-ro parallel training data (--supervised): Europarl v8 and SETimes2
PARA_URLS="https://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz
           https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses/en-ro.txt.zip"
# XLM's released MLM for en-ro, with the BPE codes and vocabulary its data was encoded with
RELEASED_URL=https://dl.fbaipublicfiles.com/XLM
RELEASED_MODEL=mlm_enro_1024.pth
RELEASED_CODES=codes_enro
RELEASED_VOCAB=vocab_enro
# the paper's BLEU (tokenised, multi-bleu.perl): Table 2 (unsupervised, MLM init) and Table 3
# (supervised ro<->en with back-translation, MLM init; Table 3 reports ro->en only)
PAPER_BLEU_UNSUP='{"en-ro": 33.3, "ro-en": 31.8}'
PAPER_BLEU_SUP='{"ro-en": 38.5}'
PAPER_BLEU_SUP_NO_BT='{}'
ALLOW_SUPERVISED=1
USAGE_PAIR="
English-Romanian only:
  --supervised           also supervised MT on the WMT16 en-ro parallel data (Europarl v8 +
                         SETimes2): adds --mt-steps en-ro,ro-en to AE + back-translation (the
                         paper's Table 3 setting ro<->en + BT)
  --no-bt                with --supervised: supervised MT only, no auto-encoding or
                         back-translation (Table 3's ro<->en row)
"

# shellcheck source-path=SCRIPTDIR source=wmt16/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/wmt16/common.sh"
wmt16_main "$@"
