"""A new language into a trained LM: the subword vocabulary grows by pieces learnt on the new text (every
existing id unchanged; the old pieces' merges keep priority, and a new piece that would change how the
old languages' text segments is left out when that text is given), the embeddings and the output layer
get a row per new piece, the language embeddings a row for the language. OUT_DIR is a model dir
(``model.pt``, ``dict.txt``, the extended subword model, ``text_pipeline.json``) to continue pretraining
from with ``--pretrained-xlm-checkpoint OUT_DIR/model.pt`` over the old languages and the new one."""

import dataclasses
import json
import os
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from fairseq.checkpoint_utils import torch_persistent_save

from preprocess.files import check_out_dir, file_sha256, staged_out_dir
from preprocess.inputs import read_lines
from preprocess.langs import parse_langs
from preprocess.layout import DICT_FILE, MODEL_FILE
from preprocess.pipeline import TextPipeline, subword_model_state, write_settings
from preprocess.segment import default_segmenter
from preprocess.vocab import extend_spm_model, train_spm_bpe
from xlm_fairseq.assets import PretrainedCheckpoint
from xlm_fairseq.data.dictionary import dictionary_digest, dictionary_to_state
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.base import DECODER_PREFIX, LM_PREFIX

REPORT_FILE = "added_language.json"
PIECE_INITS = ("pieces", "random")  # a new piece's rows: the mean of its old pieces', or XLM's N(0, dim^-1/2)


def _unprefixed(piece_model: bytes):
    """A processor of the old model that segments a piece's text as it stands: no dummy ``▁`` before it
    and no whitespace stripped, so that a word-inner piece splits into word-inner pieces."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    m = sentencepiece_model_pb2.ModelProto()
    m.ParseFromString(piece_model)
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    return spm.SentencePieceProcessor(model_proto=m.SerializeToString())


def _new_rows(
    weight: torch.Tensor, bias: torch.Tensor, parts: List[List[int]], init: str
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Embedding rows and output biases of the new pieces. ``pieces``: the mean of the rows of the old
    pieces each one splits into (all rows' mean when it splits into unknown characters only)."""
    dim = weight.shape[1]
    if init == "random":
        generator = torch.Generator().manual_seed(0)
        rows = torch.randn(len(parts), dim, generator=generator) * dim**-0.5
        return rows.to(weight.dtype), torch.zeros(len(parts), dtype=bias.dtype)
    rows, biases = [], []
    for ids in parts:
        if ids:
            rows.append(weight[ids].float().mean(0))
            biases.append(bias[ids].float().mean())
        else:
            rows.append(weight.float().mean(0))
            biases.append(bias.float().mean())
    return torch.stack(rows).to(weight.dtype), torch.stack(biases).to(bias.dtype)


def add_language(
    src: str,
    out: str,
    lang: str,
    texts: Sequence[str],
    keep: Sequence[str] = (),
    pieces: int = 2000,
    init: str = "pieces",
    lang_init: Optional[str] = None,
    force: bool = False,
) -> str:
    """Write OUT_DIR: the LM at ``src`` (a checkpoint or model dir) with ``lang`` added, its pieces learnt
    on ``texts`` (raw text, one sentence a line); ``keep`` are ``LANG=FILE`` texts of the old languages
    whose segmentation must not change; ``lang_init`` the language whose embedding row the new one starts
    from (default: the mean of all rows). Returns OUT_DIR."""
    check_out_dir(out, force, src)
    (lang,) = parse_langs(lang, "--add-lang")
    ckpt = PretrainedCheckpoint(src)
    model = ckpt.state["model"]
    if any(k.startswith(DECODER_PREFIX) for k in model) or LM_PREFIX + "pred_layer.proj.bias" not in model:
        raise XLMUserError(f"{ckpt.path}: --add-lang takes a pretrained LM (cross_lingual_lm), not this model")
    langs = ckpt.langs
    if lang in langs:
        raise XLMUserError(f"--add-lang {lang}: {ckpt.path} has it already ({','.join(langs)})")
    if lang_init is not None and lang_init not in langs:
        raise XLMUserError(f"--lang-init {lang_init}: not a language of {ckpt.path} ({','.join(langs)})")
    if init not in PIECE_INITS:
        raise XLMUserError(f"--init {init}: one of {', '.join(PIECE_INITS)}")
    settings = ckpt.assets.pipeline_settings()
    dictionary, _ = ckpt.assets.dictionary()
    if settings is None or dictionary is None:
        raise XLMUserError(f"{ckpt.path}: no text pipeline or dictionary in it or beside it")
    if settings.subwords != "sentencepiece":
        raise XLMUserError(f"{ckpt.path}: --add-lang extends sentencepiece vocabularies, not {settings.subwords}")
    pipeline = ckpt.assets.pipeline()
    segmenters = dict(settings.segmenters)
    if default_segmenter(lang) and lang not in segmenters:
        segmenters[lang] = default_segmenter(lang)
    settings = dataclasses.replace(settings, segmenters=segmenters)
    words = TextPipeline(settings, pipeline.model_path)

    def tokenised(path: str, what: str, language: str) -> List[str]:
        if not os.path.isfile(path):
            raise XLMUserError(f"{what} {path}: no such file")
        return [words.tokenize(line, language) for line in read_lines(path) if line.strip()]

    new_text = [line for path in texts for line in tokenised(path, "--text", lang)]
    if not new_text:
        raise XLMUserError(f"--text: no {lang} text in {', '.join(texts) or '(none given)'}")
    keep_text = []
    for value in keep:
        keep_lang, sep, path = value.partition("=")
        if not sep or keep_lang not in langs:
            raise XLMUserError(f"--keep-text {value!r}: expected LANG=FILE with LANG one of {','.join(langs)}")
        keep_text += tokenised(path, "--keep-text", keep_lang)

    with open(pipeline.model_path, "rb") as f:
        old_model = f.read()
    learnt = train_spm_bpe(new_text, pieces)
    model_bytes, added, dropped = extend_spm_model(old_model, learnt, keep_text)
    added = [p for p in added if p not in dictionary.indices]

    import sentencepiece as spm

    extended = spm.SentencePieceProcessor(model_proto=model_bytes)
    old_sp = spm.SentencePieceProcessor(model_proto=old_model)
    new_ids, old_ids = extended.encode(new_text), old_sp.encode(new_text)  # the new text, once per model
    counts = Counter(extended.id_to_piece(i) for ids in new_ids for i in ids)
    unprefixed = _unprefixed(old_model)
    parts = []
    for piece in added:
        text = piece.replace("\u2581", " ")
        parts.append([dictionary.index(p) for p in unprefixed.encode_as_pieces(text) if p in dictionary.indices])
    n_old = len(dictionary)
    for piece in added:
        dictionary.add_symbol(piece, n=counts.get(piece, 0))

    params: Dict[str, torch.Tensor] = dict(model)
    emb_key, out_key, bias_key = (
        LM_PREFIX + k for k in ("embeddings.weight", "pred_layer.proj.weight", "pred_layer.proj.bias")
    )
    rows, biases = _new_rows(params[emb_key][:n_old], params[bias_key][:n_old], parts, init)
    params[emb_key] = torch.cat([params[emb_key], rows])
    if out_key in params:  # tied to the embeddings: the same rows
        params[out_key] = params[emb_key].clone()
    params[bias_key] = torch.cat([params[bias_key], biases])
    lang_key = LM_PREFIX + "lang_embeddings.weight"
    if lang_key in params:
        table = params[lang_key]
        row = table[langs.index(lang_init)] if lang_init else table.float().mean(0).to(table.dtype)
        params[lang_key] = torch.cat([table, row[None]])
    new_langs = [*langs, lang]
    params.pop("_extra_state", None)  # a list written before it moved to task_state: now the old one

    out = os.path.abspath(out)
    spm_name = settings.subword_model
    with staged_out_dir(out, force) as tmp:
        with open(os.path.join(tmp, spm_name), "wb") as f:
            f.write(model_bytes)
        settings = dataclasses.replace(settings, subword_sha256=file_sha256(os.path.join(tmp, spm_name)))
        write_settings(tmp, settings)
        dictionary.save(os.path.join(tmp, DICT_FILE))
        cfg = dict(ckpt.state.get("cfg") or {})
        cfg["task"] = dict(cfg.get("task") or {}, langs=",".join(new_langs), data=out)
        task_state = dict(
            ckpt.task_state,
            langs=new_langs,
            text_pipeline=settings.to_dict(),
            dictionary=dictionary_to_state(dictionary),
            dictionary_sha256=dictionary_digest(dictionary),
            subword_model=subword_model_state(TextPipeline(settings, os.path.join(tmp, spm_name))),
        )
        state = dict(ckpt.state, model=params, cfg=cfg, task_state=task_state, last_optimizer_state=None)
        torch_persistent_save(state, os.path.join(tmp, MODEL_FILE))
        before, after = sum(map(len, old_ids)), sum(map(len, new_ids))
        n_words = sum(len(line.split()) for line in new_text)
        report = {
            "from": ckpt.path,
            "langs": new_langs,
            "added_pieces": len(added),
            "left_out": {"would change the old languages' text": len(dropped), "checked on lines": len(keep_text)},
            "vocabulary": [n_old, len(dictionary)],
            "pieces_per_word": {"before": round(before / n_words, 3), "after": round(after / n_words, 3)},
            "unknown_pieces": {
                "before": sum(ids.count(old_sp.unk_id()) for ids in old_ids),
                "after": sum(ids.count(extended.unk_id()) for ids in new_ids),
            },
            "init": {"pieces": init, "language": lang_init or "mean"},
        }
        with open(os.path.join(tmp, REPORT_FILE), "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    return out
