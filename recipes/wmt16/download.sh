# shellcheck shell=bash
#
# Stage 1 of the WMT16 recipes (sourced by recipes/wmt16/common.sh): every file fetched (or taken
# from --data-dir) and checked against its SHA-256, then the text extracted into WORK/raw; the
# validation and test sets come from sacrebleu (-t), which checks them against its own digests.

verify_cmd() {
  local file=$1 name=$2
  local cmd=("$PYTHON" "${TOOLS[@]}" verify --name "$name" --checksums "$CHECKSUMS" --lock "$LOCK")
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
    run "$PYTHON" "${TOOLS[@]}" head-gz --lines "$MONO_SENTENCES" --out "$RAW/mono.$lang" "${files[@]}"
  done
  # each language from the reference side of the direction into it (what sacrebleu -l X-Y --echo ref prints)
  local other offline=()
  [[ -n $DATA_DIR ]] && offline=(--offline)
  for lang in "$LANG_A" "$LANG_B"; do
    other=$LANG_A; [[ $lang == "$LANG_A" ]] && other=$LANG_B
    run "$PYTHON" "${TOOLS[@]}" testset "$VALID_TESTSET" "$other-$lang" "$RAW/valid.$PAIR_SORTED.$lang" "${offline[@]}"
    run "$PYTHON" "${TOOLS[@]}" testset "$TEST_TESTSET" "$other-$lang" "$RAW/test.$PAIR_SORTED.$lang" "${offline[@]}"
  done
  if [[ $SUPERVISED == 1 ]]; then
    files=()
    for url in "${para_urls[@]}"; do files+=("$DOWNLOADS/${url##*/}"); done
    run "$PYTHON" "${TOOLS[@]}" extract-para --langs "$PAIR_SORTED" --out-prefix "$RAW/train.$PAIR_SORTED" "${files[@]}"
  fi
}
