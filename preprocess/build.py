"""Building a data-bin into a new, empty directory (``prepare.py`` stages it and moves it into place):
every input tokenised, the vocabulary learnt or taken as given, the text pipeline recorded, everything
binarised, then the summary and the manifest (what the data-bin was made from)."""

import json
import os
import shutil
import time
from typing import Dict, List

from preprocess import layout
from preprocess.binarize import SentencePieceBinarizer, XLMBPEBinarizer, binarize_all, tokenize_all
from preprocess.files import file_sha256
from preprocess.inputs import Stream
from preprocess.manifest import summary_text, versions
from preprocess.pipeline import PipelineSettings, write_settings
from preprocess.vocab import (
    dict_pieces,
    load_bpe_codes,
    load_dictionary,
    load_spm_model,
    train_spm,
    write_dict,
    write_spm_vocab,
)


def build(args, streams: List[Stream], line_counts: Dict[str, int], dest: str, wanted: dict, log) -> dict:
    """Build the complete data-bin into the (new, empty) directory ``dest``."""
    started = time.time()
    tmp = os.path.join(dest, "tmp")
    os.makedirs(tmp)
    tok_paths = tokenize_all(streams, line_counts, tmp, args, log)

    import sentencepiece as spm

    pieces = None
    if args.bpe_codes:
        log(f"[2/3] using the given XLM BPE codes {args.bpe_codes} + {args.dict}")
        bpe = load_bpe_codes(args.bpe_codes)
        dictionary = load_dictionary(os.path.abspath(args.dict), "--dict")
        shutil.copyfile(args.dict, os.path.join(dest, layout.DICT_FILE))
        shutil.copyfile(args.bpe_codes, os.path.join(dest, layout.BPE_CODES_FILE))
        settings = PipelineSettings(
            subwords="xlm_bpe",
            subword_model=layout.BPE_CODES_FILE,
            subword_sha256=file_sha256(os.path.join(dest, layout.BPE_CODES_FILE)),
            ro_remove_diacritics=bool(args.ro_remove_diacritics),
            lowercase_and_remove_accent=bool(args.lowercase_and_remove_accent),
            segmenters=dict(args.segmenters),
        )
        binarizer = XLMBPEBinarizer(args.bpe_codes, dictionary)
        subwords = {"bpe_codes": len(bpe.ranks)}
    else:
        if args.spm_model:
            log(f"[2/3] using the given vocabulary {args.spm_model} + {args.dict}")
            model_proto, sp = load_spm_model(args.spm_model)
            dictionary = load_dictionary(os.path.abspath(args.dict), "--dict")
            shutil.copyfile(args.dict, os.path.join(dest, layout.DICT_FILE))
        else:
            model_proto = train_spm(streams, line_counts, tok_paths, args, args.vocab_size, log)
            sp = spm.SentencePieceProcessor(model_proto=model_proto)
            pieces = dict_pieces(sp, log)
            write_dict(os.path.join(dest, layout.DICT_FILE), pieces, {})
            dictionary = load_dictionary(os.path.join(dest, layout.DICT_FILE), "generated dictionary")
        with open(os.path.join(dest, layout.SPM_MODEL_FILE), "wb") as f:
            f.write(model_proto)
        write_spm_vocab(sp, os.path.join(dest, layout.SPM_VOCAB_FILE))
        settings = PipelineSettings(
            subwords="sentencepiece",
            subword_model=layout.SPM_MODEL_FILE,
            subword_sha256=file_sha256(os.path.join(dest, layout.SPM_MODEL_FILE)),
            ro_remove_diacritics=bool(args.ro_remove_diacritics),
            segmenters=dict(args.segmenters),
        )
        binarizer = SentencePieceBinarizer(model_proto, dictionary)
        subwords = {"spm_vocab_size": sp.get_piece_size()}

    write_settings(dest, settings)
    stats, counts = binarize_all(streams, line_counts, tok_paths, dest, binarizer, dictionary, args, log)
    if pieces is not None:  # the real counts of the train data
        write_dict(os.path.join(dest, layout.DICT_FILE), pieces, {p: int(counts[dictionary.index(p)]) for p in pieces})
    shutil.rmtree(tmp)

    n_symbols = sum(1 for _ in open(os.path.join(dest, layout.DICT_FILE), encoding="utf-8"))
    vocab = dict(subwords, dict_symbols=n_symbols, dict_size=len(dictionary))
    summary = {"vocab": vocab, "datasets": stats}
    with open(os.path.join(dest, layout.SUMMARY_JSON_FILE), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")
    text = summary_text(stats, vocab)
    with open(os.path.join(dest, layout.SUMMARY_TEXT_FILE), "w", encoding="utf-8") as f:
        f.write(text)

    manifest = dict(wanted)
    manifest["outputs"] = {name: os.path.getsize(os.path.join(dest, name)) for name in sorted(os.listdir(dest))}
    manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    manifest["seconds"] = round(time.time() - started, 1)
    manifest["workers"] = args.workers
    manifest["versions"] = versions()
    with open(os.path.join(dest, layout.MANIFEST_FILE), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return {"summary_text": text}
