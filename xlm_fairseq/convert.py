"""Convert pretrained XLM models to and from xlm_fairseq checkpoints.

::

    python -m xlm_fairseq.convert SRC OUT_DIR [--to fairseq|hf] [--langs en,de] [--codes FILE]
                                  [--lowercase yes|no] [--force]

``--to fairseq`` (default): SRC is an original XLM ``.pth`` (keys ``model``, ``params``,
``dico_id2word``, ``dico_word2id``, ``dico_counts``) or a Hugging Face XLM directory (``config.json``,
``model.safetensors`` or ``pytorch_model.bin``, ``vocab.json``, ``merges.txt``). OUT_DIR receives

``model.pt``
    a fairseq checkpoint of ``xlm_transformer`` under ``--task cross_lingual_lm``
    (``checkpoint_utils.load_model_ensemble_and_task([OUT_DIR/model.pt], arg_overrides={"data": OUT_DIR})``,
    ``XLMModel.from_pretrained(OUT_DIR)``, ``--pretrained-xlm-checkpoint OUT_DIR``);
``dict.txt``
    XLM's vocabulary from index 4 on (``<special0>``..``<special9>``, then the words, in XLM order,
    fastBPE style: ``th@@`` non-final piece, ``the`` word-final), with counts where the source has them;
``langs.txt``
    the languages, one a line, in language-id order;
``bpe.codes``
    fastBPE codes (``a b count`` per line), from ``merges.txt`` or ``--codes``; an original ``.pth``
    holds none, so without ``--codes`` README.md says where to put the released ``codes`` file;
``xlm_tokenizer.json``
    the text pipeline ``{"type": "xlm_bpe", "lowercase_and_remove_accent": ..., "langs": [...]}``
    read by :class:`xlm_fairseq.hub.XLMHubInterface`;
``README.md``
    where it came from, and what is missing.

XLM numbers its vocabulary ``<s> </s> <pad> <unk>``, fairseq ``<s> <pad> </s> <unk>``: the rows of
``embeddings.weight`` and ``pred_layer.proj.bias`` are permuted (1 <-> 2), nothing else changes.

``--to hf``: SRC is an xlm_fairseq LM checkpoint (a ``.pt`` file, or a directory holding
``model.pt``), with ``dict.txt`` beside it (or in its ``task.data``). OUT_DIR becomes a directory that
``transformers.XLMWithLMHeadModel.from_pretrained`` loads, plus ``vocab.json``/``merges.txt``/
``tokenizer_config.json`` when the vocabulary is XLM's BPE (a converted model); a sentencepiece
vocabulary (our own pretraining) is copied as ``spm.model`` with a note.

Refusals (a SRC of neither format, an existing non-empty OUT_DIR without ``--force``, a model this
code cannot represent) print one line ``error: ...`` on stderr and exit with status 2. OUT_DIR is
written in a sibling temporary directory and renamed into place at the end.
"""

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from xlm_fairseq import safe_load
from xlm_fairseq.errors import XLMUserError

logger = logging.getLogger(__name__)

XLM_HEAD = ["<s>", "</s>", "<pad>", "<unk>"]  # XLM's indices 0..3
FAIRSEQ_HEAD = ["<s>", "<pad>", "</s>", "<unk>"]  # fairseq's Dictionary indices 0..3
SPECIALS = [f"<special{i}>" for i in range(10)]
MASK_SYMBOL = "<special1>"
LM_PREFIX = "encoder.transformer."
TOKENIZER_FILE = "xlm_tokenizer.json"
CODES_FILE = "bpe.codes"
LAYER_NORM_EPS = 1e-12


class ConversionError(XLMUserError):
    """SRC or OUT_DIR cannot be used; the message says why."""


# --------------------------------------------------------------------------------------------
# vocabulary order and spelling
# --------------------------------------------------------------------------------------------


def swap_permutation(n: int) -> torch.Tensor:
    """Index map between XLM's and fairseq's vocabulary order: entries 1 and 2 swap, the rest stay.
    It is its own inverse: ``new = old[perm]`` converts either way."""
    if n < 4:
        raise ConversionError(f"a vocabulary of {n} entries cannot hold <s> </s> <pad> <unk>")
    perm = torch.arange(n)
    perm[1], perm[2] = 2, 1
    return perm


def hf_token_to_xlm_word(token: str) -> str:
    """HF ``vocab.json`` spelling -> XLM/fastBPE spelling: ``the</w>`` -> ``the``, ``th`` -> ``th@@``."""
    if token in XLM_HEAD or token in SPECIALS:
        return token
    if token.endswith("</w>"):
        return token[: -len("</w>")]
    return token + "@@"


def xlm_word_to_hf_token(word: str) -> str:
    """XLM/fastBPE spelling -> HF ``vocab.json`` spelling (inverse of :func:`hf_token_to_xlm_word`)."""
    if word in XLM_HEAD or word in SPECIALS:
        return word
    if word.endswith("@@"):
        return word[: -len("@@")]
    return word + "</w>"


def parse_codes(lines, what: str) -> List[Tuple[str, str, int]]:
    """fastBPE codes or HF merges (``a b [count]`` per line, ``#version`` header allowed) ->
    [(a, b, count)] in merge order; a missing count becomes a decreasing stand-in."""
    merges = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip() or (n == 1 and line.startswith("#version")):
            continue
        parts = line.split()
        if len(parts) not in (2, 3):
            raise ConversionError(f"{what} line {n}: expected 'a b [count]', got {line!r}")
        count = None
        if len(parts) == 3:
            try:
                count = int(parts[2])
            except ValueError:
                raise ConversionError(f"{what} line {n}: count {parts[2]!r} is not an integer") from None
        merges.append((parts[0], parts[1], count))
    total = len(merges)
    return [(a, b, c if c is not None else total - i) for i, (a, b, c) in enumerate(merges)]


# --------------------------------------------------------------------------------------------
# a source model, in XLM's terms
# --------------------------------------------------------------------------------------------


@dataclass
class XLMSource:
    """Everything a converter needs, read from either source format; vocabulary in XLM order."""

    kind: str  # "xlm_pth" | "hf"
    path: str
    weights: Dict[str, torch.Tensor]  # XLM parameter names (embeddings.weight, ..., pred_layer.proj.bias)
    words: List[str]  # XLM order, fastBPE spelling
    counts: List[int]
    langs: List[str]
    dim: int
    n_layers: int
    n_heads: int
    dropout: float
    attention_dropout: float
    max_positions: int
    sinusoidal: bool
    use_lang_emb: bool
    lowercase: bool
    codes: Optional[List[Tuple[str, str, int]]] = None
    notes: List[str] = field(default_factory=list)


def _py(value):
    """numpy scalars/arrays (as in XLM's ``params``) -> plain Python."""
    if hasattr(value, "tolist") and not isinstance(value, torch.Tensor):
        return value.tolist()
    return value


def _langs_from_ids(mapping, what: str) -> List[str]:
    """{lang: id} or {id: lang} (ids maybe strings, as JSON writes them) -> languages in id order."""
    if not mapping:
        return []
    pairs = []
    for k, v in dict(mapping).items():
        k, v = _py(k), _py(v)
        if isinstance(v, str):
            k, v = v, k
        try:
            pairs.append((int(v), str(k)))
        except (TypeError, ValueError):
            raise ConversionError(f"{what}: cannot read language ids from {dict(mapping)!r}") from None
    pairs.sort()
    if [i for i, _ in pairs] != list(range(len(pairs))):
        raise ConversionError(f"{what}: language ids {[i for i, _ in pairs]} are not 0..{len(pairs) - 1}")
    return [lang for _, lang in pairs]


def _resolve_langs(found: List[str], option: Optional[str], n_langs: int, src: str) -> List[str]:
    given = [x.strip() for x in option.split(",") if x.strip()] if option else []
    if len(set(given)) != len(given):
        raise ConversionError(f"--langs {option}: a language is listed twice")
    if found and given and found != given:
        raise ConversionError(f"{src} names its languages {','.join(found)}; --langs {option} disagrees")
    langs = found or given
    if not langs:
        raise ConversionError(f"{src} names no languages; pass --langs (in language-id order, {n_langs} of them)")
    if len(langs) != n_langs:
        raise ConversionError(f"{src} has n_langs={n_langs} but {len(langs)} languages are named ({','.join(langs)})")
    return langs


def _check_vocab_head(words: List[str], src: str):
    if words[:4] != XLM_HEAD:
        raise ConversionError(f"{src}: vocabulary starts {words[:4]}, expected XLM's {XLM_HEAD}")
    missing = [s for s in SPECIALS if s not in words]
    if MASK_SYMBOL in missing:
        raise ConversionError(f"{src}: vocabulary lacks the mask token {MASK_SYMBOL}")
    seen = set()
    for w in words:
        if w in seen:
            raise ConversionError(f"{src}: vocabulary lists {w!r} twice")
        if not w or any(ch.isspace() for ch in w):
            raise ConversionError(f"{src}: vocabulary entry {w!r} is empty or holds whitespace; dict.txt cannot store it")
        seen.add(w)


def read_xlm_pth(src: str, langs_option: Optional[str] = None, lowercase: Optional[bool] = None,
                 codes_path: Optional[str] = None, ckpt=None) -> XLMSource:
    """An original XLM checkpoint (``torch.save`` of model/params/dico_*), read through the allowlist
    (``ckpt``: the file's content, when the caller has loaded it already)."""
    if ckpt is None:
        ckpt = _load_checkpoint(src)
    if not isinstance(ckpt, dict) or not {"model", "params", "dico_id2word"} <= set(ckpt):
        keys = sorted(ckpt)[:8] if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ConversionError(f"{src}: not an original XLM checkpoint (expected keys model, params, dico_id2word; found {keys})")
    params = {k: _py(v) for k, v in dict(ckpt["params"]).items()}
    for key, bad, why in (("asm", True, "an adaptive softmax output layer"),
                          ("use_memory", True, "product-key memory layers"),
                          ("gelu_activation", False, "ReLU feed-forward layers (xlm_transformer uses GELU)")):
        if params.get(key, not bad) == bad:
            raise ConversionError(f"{src}: the model uses {why}, which xlm_transformer cannot represent")
    if params.get("share_inout_emb", True) is False:
        raise ConversionError(f"{src}: output layer not tied to the embeddings (share_inout_emb false); xlm_transformer ties them")

    id2word = {int(_py(k)): str(v) for k, v in dict(ckpt["dico_id2word"]).items()}
    if sorted(id2word) != list(range(len(id2word))):
        raise ConversionError(f"{src}: dico_id2word ids are not 0..{len(id2word) - 1}")
    words = [id2word[i] for i in range(len(id2word))]
    _check_vocab_head(words, src)
    raw_counts = {str(k): int(_py(v)) for k, v in dict(ckpt.get("dico_counts") or {}).items()}
    counts = [raw_counts.get(w, 0) for w in words]

    state = ckpt["model"]
    if not isinstance(state, dict):
        raise ConversionError(f"{src}: 'model' is not a state dict")
    weights = {}
    for k, v in state.items():
        if not isinstance(v, torch.Tensor):
            continue
        k = k[len("module."):] if k.startswith("module.") else k
        weights[k] = v
    n_langs = int(params.get("n_langs", 1))
    use_lang_emb = bool(params.get("use_lang_emb", True)) and n_langs > 1
    found_langs = _langs_from_ids(params.get("id2lang") or params.get("lang2id"), f"{src} params")
    langs = _resolve_langs(found_langs, langs_option, n_langs, src)
    if "position_embeddings.weight" not in weights or "embeddings.weight" not in weights:
        raise ConversionError(f"{src}: 'model' lacks position_embeddings/embeddings; not an XLM language model")

    codes = None
    for key in ("codes", "bpe_codes"):
        value = ckpt.get(key, params.get(key))
        if isinstance(value, (str, list)) and value:
            lines = value.splitlines() if isinstance(value, str) else [str(x) for x in value]
            codes = parse_codes(lines, f"{src}[{key}]")
            break
    notes = []
    if codes_path:
        codes = _read_codes_file(codes_path)
    if lowercase is None:
        lowercase = True
        notes.append("The .pth does not say whether its text was lowercased and stripped of accents; "
                     "xlm_tokenizer.json assumes yes (XLM's tools/tokenize.sh pipeline). The XLM-17 and "
                     "XLM-100 models were trained without: convert those with --lowercase no.")
    n_words = len(words)
    if params.get("n_words") is not None and int(params["n_words"]) != n_words:
        raise ConversionError(f"{src}: params n_words={params['n_words']} but the dictionary has {n_words} entries")
    return XLMSource(
        kind="xlm_pth",
        path=src,
        weights=weights,
        words=words,
        counts=counts,
        langs=langs,
        dim=int(params["emb_dim"]),
        n_layers=int(params["n_layers"]),
        n_heads=int(params["n_heads"]),
        dropout=float(params.get("dropout", 0.1)),
        attention_dropout=float(params.get("attention_dropout", 0.1)),
        max_positions=int(weights["position_embeddings.weight"].shape[0]),
        sinusoidal=bool(params.get("sinusoidal_embeddings", False)),
        use_lang_emb=use_lang_emb,
        lowercase=lowercase,
        codes=codes,
        notes=notes,
    )


def _read_codes_file(path: str):
    if not os.path.isfile(path):
        raise ConversionError(f"--codes {path}: no such file")
    with open(path, encoding="utf-8") as f:
        return parse_codes(f, path)


def _hf_weights(src: str) -> Dict[str, torch.Tensor]:
    st = os.path.join(src, "model.safetensors")
    st_index = os.path.join(src, "model.safetensors.index.json")
    pt = os.path.join(src, "pytorch_model.bin")
    if os.path.isfile(st) or os.path.isfile(st_index):
        from safetensors.torch import load_file

        if os.path.isfile(st):
            return load_file(st)
        with open(st_index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        weights = {}
        for shard in shards:
            weights.update(load_file(os.path.join(src, shard)))
        return weights
    if os.path.isfile(pt):
        return safe_load.load(pt)
    raise ConversionError(f"{src}: no model.safetensors or pytorch_model.bin")


def read_hf_dir(src: str, langs_option: Optional[str] = None, lowercase: Optional[bool] = None,
                codes_path: Optional[str] = None) -> XLMSource:
    """A Hugging Face XLM directory (``save_pretrained`` of an XLM model, plus its tokenizer files)."""
    try:
        with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
            raw = json.load(f)
    except ValueError as e:
        raise ConversionError(f"{src}/config.json: not valid JSON ({e})") from None
    if not isinstance(raw, dict) or raw.get("model_type") not in (None, "xlm"):
        raise ConversionError(f"{src}: config.json does not describe an XLM model (model_type {raw.get('model_type') if isinstance(raw, dict) else None!r})")
    from transformers import XLMConfig

    config = XLMConfig.from_pretrained(src)
    for attr, bad, why in (("asm", True, "an adaptive softmax output layer"),
                           ("gelu_activation", False, "ReLU feed-forward layers (xlm_transformer uses GELU)"),
                           ("is_encoder", False, "a decoder configuration")):
        if getattr(config, attr, not bad) == bad:
            raise ConversionError(f"{src}: the model uses {why}, which xlm_transformer cannot represent")
    if abs(float(getattr(config, "layer_norm_eps", LAYER_NORM_EPS)) - LAYER_NORM_EPS) > 1e-15:
        raise ConversionError(f"{src}: layer_norm_eps={config.layer_norm_eps}; xlm_transformer uses XLM's {LAYER_NORM_EPS}")
    for name, want in (("bos_token_id", 0), ("eos_token_id", 1), ("pad_token_id", 2), ("unk_index", 3)):
        value = getattr(config, name, want)
        if value is not None and value != want:
            raise ConversionError(f"{src}: config {name}={value}; only XLM's layout <s>=0 </s>=1 <pad>=2 <unk>=3 is supported")

    vocab_path = os.path.join(src, "vocab.json")
    if not os.path.isfile(vocab_path):
        raise ConversionError(f"{src}: no vocab.json; the vocabulary is needed for dict.txt")
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    by_id = {}
    for token, i in vocab.items():
        if i in by_id:
            raise ConversionError(f"{vocab_path}: id {i} given to {by_id[i]!r} and {token!r}")
        by_id[int(i)] = token
    if sorted(by_id) != list(range(len(by_id))):
        raise ConversionError(f"{vocab_path}: ids are not 0..{len(by_id) - 1}")
    words = [hf_token_to_xlm_word(by_id[i]) for i in range(len(by_id))]
    _check_vocab_head(words, vocab_path)
    counts = [0 if (w in XLM_HEAD or w in SPECIALS) else 1 for w in words]

    weights = {}
    for k, v in _hf_weights(src).items():
        if k.startswith("transformer."):
            k = k[len("transformer."):]
        elif not k.startswith("pred_layer."):
            continue  # task heads (sequence_summary, qa_outputs, ...) are not part of the LM
        if k == "position_ids":
            continue
        weights[k] = v
    notes = ["Hugging Face vocabularies carry no word counts: dict.txt gives every word count 1 "
             "(specials 0), so --sample-alpha weights words uniformly."]
    if "pred_layer.proj.bias" not in weights and "embeddings.weight" in weights:
        weights["pred_layer.proj.bias"] = torch.zeros(weights["embeddings.weight"].shape[0])
        notes.append("The source had no LM head (pred_layer.proj.bias): it was set to zero; "
                     "predictions and fill_mask are not meaningful until the model is trained.")
    if getattr(config, "causal", False):
        notes.append("The source config says causal=true (a CLM model): call the model with causal=True.")

    tok_cfg = {}
    tok_cfg_path = os.path.join(src, "tokenizer_config.json")
    if os.path.isfile(tok_cfg_path):
        with open(tok_cfg_path, encoding="utf-8") as f:
            tok_cfg = json.load(f)
    if lowercase is None:
        lowercase = bool(tok_cfg.get("do_lowercase_and_remove_accent", True))
    found_langs = _langs_from_ids(
        getattr(config, "lang2id", None) or getattr(config, "id2lang", None)
        or tok_cfg.get("lang2id") or tok_cfg.get("id2lang"),
        f"{src}/config.json",
    )
    n_langs = int(config.n_langs)
    langs = _resolve_langs(found_langs, langs_option, n_langs, src)

    codes = None
    merges_path = os.path.join(src, "merges.txt")
    if codes_path:
        codes = _read_codes_file(codes_path)
    elif os.path.isfile(merges_path):
        with open(merges_path, encoding="utf-8") as f:
            codes = parse_codes(f, merges_path)
    return XLMSource(
        kind="hf",
        path=src,
        weights=weights,
        words=words,
        counts=counts,
        langs=langs,
        dim=int(config.emb_dim),
        n_layers=int(config.n_layers),
        n_heads=int(config.n_heads),
        dropout=float(config.dropout),
        attention_dropout=float(config.attention_dropout),
        max_positions=int(config.max_position_embeddings),
        sinusoidal=bool(config.sinusoidal_embeddings),
        use_lang_emb=bool(config.use_lang_emb) and n_langs > 1,
        lowercase=lowercase,
        codes=codes,
        notes=notes,
    )


# --------------------------------------------------------------------------------------------
# fairseq side
# --------------------------------------------------------------------------------------------


_NOISY_LOGGERS = ("", "fairseq", "hydra", "xlm_fairseq")


@contextlib.contextmanager
def _quiet():
    """fairseq/hydra log at DEBUG and warn about deprecated hydra usage when building a config;
    silence that while inside, and put logging and warning filters back afterwards."""
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"hydra(\..*)?")
        warnings.filterwarnings("ignore", message=r"(?s).*(hydra|ConfigStore|strict flag|package header)")
        for lg in loggers:
            lg.setLevel(max(lg.level, logging.WARNING))
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def build_fairseq_model(data_dir: str, langs: List[str], dim: int, n_layers: int, n_heads: int,
                        dropout: float, attention_dropout: float, max_positions: int,
                        sinusoidal: bool, use_lang_emb: bool, ffn_dim: Optional[int] = None):
    """The fairseq way: parse training args, convert to a config, set up the task, build the model.
    Returns (cfg, task, model); data_dir must hold dict.txt."""
    import xlm_fairseq
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    user_dir = os.path.dirname(os.path.abspath(xlm_fairseq.__file__))
    ffn_dim = ffn_dim or 4 * dim
    argv = [
        data_dir,
        "--user-dir", user_dir,
        "--task", "cross_lingual_lm",
        "--langs", ",".join(langs),
        "--arch", "xlm_transformer",
        "--encoder-embed-dim", str(dim),
        "--encoder-layers", str(n_layers),
        "--encoder-attention-heads", str(n_heads),
        "--encoder-ffn-embed-dim", str(ffn_dim),
        # a translation_lm model initialised from this LM needs the same shape on both sides
        "--decoder-embed-dim", str(dim),
        "--decoder-layers", str(n_layers),
        "--decoder-attention-heads", str(n_heads),
        "--decoder-ffn-embed-dim", str(ffn_dim),
        "--dropout", repr(float(dropout)),
        "--attention-dropout", repr(float(attention_dropout)),
        "--max-positions", str(max_positions),
    ]
    if sinusoidal:
        argv.append("--sinusoidal-embeddings")
    if not use_lang_emb:
        argv.append("--no-lang-emb")
    with _quiet():
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(parser, argv)
        cfg = convert_namespace_to_omegaconf(args)
        task = tasks.setup_task(cfg.task)
        model = task.build_model(cfg.model)
    return cfg, task, model


def _lm_state_for(model, weights: Dict[str, torch.Tensor], src: str) -> Dict[str, torch.Tensor]:
    """Source weights (XLM names, fairseq vocabulary order) -> our model's state dict, checked."""
    ours = model.state_dict()
    expected = {k[len(LM_PREFIX):] for k in ours if k.startswith(LM_PREFIX)}
    given = set(weights)
    tied = "pred_layer.proj.weight"
    if tied in given:
        if not torch.equal(weights[tied], weights["embeddings.weight"]):
            raise ConversionError(f"{src}: pred_layer.proj.weight differs from embeddings.weight; xlm_transformer ties them")
        given.discard(tied)
    missing = sorted(expected - given - {tied})
    unexpected = sorted(given - expected)
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected {', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}")
        raise ConversionError(f"{src}: parameters do not match an xlm_transformer LM ({'; '.join(parts)})")
    state = {}
    for name in expected:
        value = weights["embeddings.weight" if name == tied else name]
        want = ours[LM_PREFIX + name]
        if tuple(value.shape) != tuple(want.shape):
            raise ConversionError(f"{src}: {name} has shape {tuple(value.shape)}, the model expects {tuple(want.shape)}")
        state[LM_PREFIX + name] = value.detach().to(dtype=want.dtype).clone()
    return state


def write_fairseq_dir(source: XLMSource, out_dir: str, force: bool = False) -> str:
    """Write ``source`` as an xlm_fairseq OUT_DIR (see the module docstring). Returns OUT_DIR."""
    from fairseq.checkpoint_utils import torch_persistent_save
    from fairseq.data import Dictionary
    from omegaconf import OmegaConf

    final = os.path.abspath(out_dir)
    n_words = len(source.words)
    emb = source.weights.get("embeddings.weight")
    if emb is None or emb.shape[0] != n_words:
        rows = None if emb is None else emb.shape[0]
        raise ConversionError(f"{source.path}: embeddings have {rows} rows but the vocabulary {n_words} entries")
    if source.dim % source.n_heads:
        raise ConversionError(f"{source.path}: emb_dim {source.dim} is not a multiple of n_heads {source.n_heads}")
    ffn = source.weights.get("ffns.0.lin1.weight")
    if ffn is not None and ffn.shape[0] != 4 * source.dim:
        raise ConversionError(f"{source.path}: FFN size {ffn.shape[0]} is not 4 x emb_dim")

    perm = swap_permutation(n_words)
    weights = dict(source.weights)
    for name in ("embeddings.weight", "pred_layer.proj.bias", "pred_layer.proj.weight"):
        if name in weights:
            weights[name] = weights[name][perm]

    with _staging(final, force) as tmp:
        with open(os.path.join(tmp, "dict.txt"), "w", encoding="utf-8", newline="\n") as f:
            for word, count in zip(source.words[4:], source.counts[4:]):
                f.write(f"{word} {int(count)}\n")
        if len(Dictionary.load(os.path.join(tmp, "dict.txt"))) != n_words:
            raise ConversionError(f"{source.path}: fairseq reads dict.txt back with a different size than {n_words}")
        with open(os.path.join(tmp, "langs.txt"), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(lang + "\n" for lang in source.langs))

        cfg, task, model = build_fairseq_model(
            tmp, source.langs, source.dim, source.n_layers, source.n_heads, source.dropout,
            source.attention_dropout, source.max_positions, source.sinusoidal, source.use_lang_emb,
        )
        if len(task.source_dictionary) != n_words:
            raise ConversionError(f"{source.path}: the task's dictionary has {len(task.source_dictionary)} entries, the model {n_words}")
        model.load_state_dict(_lm_state_for(model, weights, source.path), strict=True)
        cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
        cfg_dict["task"]["data"] = final
        checkpoint = {
            "cfg": cfg_dict,
            "model": model.state_dict(),
            "args": None,
            # fairseq's _upgrade_state_dict indexes optimizer_history[-1]: an empty list cannot load
            "optimizer_history": [{"criterion_name": "XLMCriterion", "optimizer_name": "none",
                                   "lr_scheduler_state": {}, "num_updates": 0}],
            "extra_state": {},
        }
        torch_persistent_save(checkpoint, os.path.join(tmp, "model.pt"))

        have_codes = source.codes is not None
        if have_codes:
            with open(os.path.join(tmp, CODES_FILE), "w", encoding="utf-8", newline="\n") as f:
                for a, b, c in source.codes:
                    f.write(f"{a} {b} {c}\n")
        with open(os.path.join(tmp, TOKENIZER_FILE), "w", encoding="utf-8") as f:
            json.dump({"type": "xlm_bpe", "lowercase_and_remove_accent": bool(source.lowercase),
                       "langs": list(source.langs), "bpe_codes": CODES_FILE if have_codes else None},
                      f, indent=2)
            f.write("\n")
        _write_fairseq_readme(tmp, source, have_codes)
    return final


def _write_fairseq_readme(tmp: str, source: XLMSource, have_codes: bool):
    lines = [
        "# XLM model converted for xlm_fairseq",
        "",
        f"Source: `{os.path.abspath(source.path)}` ({'original XLM .pth' if source.kind == 'xlm_pth' else 'Hugging Face XLM directory'}).",
        f"Languages (id order): {', '.join(source.langs)}. Vocabulary: {len(source.words)} entries. "
        f"emb_dim {source.dim}, {source.n_layers} layers, {source.n_heads} heads, "
        f"{'sinusoidal' if source.sinusoidal else 'learned'} positions ({source.max_positions}), "
        f"language embeddings {'on' if source.use_lang_emb else 'off'}.",
        "",
        "Files: `model.pt` (fairseq checkpoint, `--task cross_lingual_lm --arch xlm_transformer`), `dict.txt`, "
        "`langs.txt`, `xlm_tokenizer.json`" + (", `bpe.codes`." if have_codes else "."),
        "",
        "Use: `xlm_fairseq.models.xlm.XLMModel.from_pretrained(THIS_DIR)` or "
        "`--pretrained-xlm-checkpoint THIS_DIR`.",
        "",
    ]
    if not have_codes:
        lines += [
            "## Missing: BPE codes",
            "",
            "The source carries no BPE codes, so text cannot be encoded yet. Copy the `codes` file released "
            "with this model (e.g. `codes_xnli_15` next to `mlm_xnli15_1024.pth`) to `bpe.codes` in this "
            "directory (or convert again with `--codes FILE`).",
            "",
        ]
    if source.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in source.notes] + [""]
    with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


class _staging:
    """A sibling temporary directory, renamed to ``final`` on success, removed on failure."""

    def __init__(self, final: str, force: bool):
        self.final, self.force = final, force

    def __enter__(self):
        check_out_dir(self.final, self.force)
        parent = os.path.dirname(self.final)
        os.makedirs(parent, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(self.final)}.partial-", dir=parent)
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return False
        os.chmod(self.tmp, 0o755 & ~_umask())
        if os.path.lexists(self.final):
            if os.path.isdir(self.final) and not os.path.islink(self.final):
                shutil.rmtree(self.final)
            else:
                os.remove(self.final)
        os.rename(self.tmp, self.final)
        return False


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_out_dir(out_dir: str, force: bool, src: Optional[str] = None):
    out_dir = os.path.abspath(out_dir)
    if os.path.lexists(out_dir):
        if not os.path.isdir(out_dir):
            if not force:
                raise ConversionError(f"{out_dir} exists and is not a directory (use --force to replace it)")
        elif os.listdir(out_dir) and not force:
            raise ConversionError(f"{out_dir} exists and is not empty (use --force to replace it)")
    if src is not None:
        s = os.path.realpath(src)
        o = os.path.realpath(out_dir)
        if s == o or s.startswith(o + os.sep):
            raise ConversionError(f"OUT_DIR {out_dir} holds SRC {src}; choose another OUT_DIR")


# --------------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------------


def _load_checkpoint(path: str):
    if not _looks_like_torch_file(path):
        raise ConversionError(f"{path}: not an XLM .pth nor an xlm_fairseq checkpoint (not a file torch.save writes)")
    try:
        return safe_load.load(path)
    except safe_load.UnsafeCheckpointError:
        raise
    except Exception as e:
        raise ConversionError(f"{path}: not a readable checkpoint ({type(e).__name__}: {' '.join(str(e).split())[:160]})") from None


def _is_xlm_pth(ckpt) -> bool:
    return isinstance(ckpt, dict) and {"model", "params", "dico_id2word"} <= set(ckpt)


def _looks_like_torch_file(path: str) -> bool:
    """torch.save writes a zip archive (torch >= 1.6) or a pickle (protocol 2+ starts with 0x80)."""
    import zipfile

    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as f:
        return f.read(1) == b"\x80"


def detect_source(src: str):
    """(kind, content): kind 'hf', 'xlm_pth' or 'fairseq' (our own checkpoint), content the loaded
    file for a file SRC (else None); ConversionError for anything else."""
    if not os.path.exists(src):
        raise ConversionError(f"{src}: no such file or directory")
    if os.path.isdir(src):
        if os.path.isfile(os.path.join(src, "config.json")):
            return "hf", None
        if os.path.isfile(os.path.join(src, "model.pt")):
            return "fairseq", None
        raise ConversionError(f"{src}: neither a Hugging Face XLM directory (no config.json) nor a converted model (no model.pt)")
    ckpt = _load_checkpoint(src)
    if _is_xlm_pth(ckpt):
        return "xlm_pth", ckpt
    if isinstance(ckpt, dict) and "cfg" in ckpt and "model" in ckpt:
        return "fairseq", ckpt
    raise ConversionError(f"{src}: not an XLM .pth (keys model, params, dico_id2word) nor an xlm_fairseq checkpoint")


def convert_hf(src: str, out: str, langs: Optional[str] = None, force: bool = False,
               lowercase: Optional[bool] = None, codes: Optional[str] = None) -> str:
    """HF XLM directory -> xlm_fairseq OUT_DIR."""
    check_out_dir(out, force, src)
    return write_fairseq_dir(read_hf_dir(src, langs, lowercase, codes), out, force)


def convert_xlm_pth(src: str, out: str, langs: Optional[str] = None, force: bool = False,
                    lowercase: Optional[bool] = None, codes: Optional[str] = None, _ckpt=None) -> str:
    """Original XLM ``.pth`` -> xlm_fairseq OUT_DIR."""
    check_out_dir(out, force, src)
    return write_fairseq_dir(read_xlm_pth(src, langs, lowercase, codes, _ckpt), out, force)


def _fairseq_dictionary_for(ckpt_path: str, state):
    from fairseq.data import Dictionary

    candidates = [os.path.join(os.path.dirname(ckpt_path), "dict.txt")]
    data = ((state.get("cfg") or {}).get("task") or {}).get("data")
    if data:
        candidates.append(os.path.join(str(data).split(os.pathsep)[0], "dict.txt"))
    for c in candidates:
        if os.path.isfile(c):
            d = Dictionary.load(c)
            if MASK_SYMBOL not in d.indices:
                d.add_symbol(MASK_SYMBOL)  # as the task's load_dictionary does
            return d, os.path.dirname(c)
    raise ConversionError(f"{ckpt_path}: no dict.txt beside it or in its task.data")


def export_hf(src: str, out: str, force: bool = False) -> str:
    """xlm_fairseq LM checkpoint (file, or directory with model.pt) -> HF XLM directory."""
    if os.path.isdir(src) and os.path.isfile(os.path.join(src, "config.json")) \
            and not os.path.isfile(os.path.join(src, "model.pt")):
        raise ConversionError(f"{src}: a Hugging Face directory; --to hf takes an xlm_fairseq checkpoint (model.pt)")
    ckpt_path = os.path.join(src, "model.pt") if os.path.isdir(src) else src
    if not os.path.isfile(ckpt_path):
        raise ConversionError(f"{src}: no such checkpoint")
    check_out_dir(out, force, src)
    state = _load_checkpoint(ckpt_path)
    if _is_xlm_pth(state):
        raise ConversionError(f"{ckpt_path}: an original XLM .pth; --to hf takes an xlm_fairseq checkpoint "
                              "(convert with --to fairseq first)")
    if not isinstance(state, dict) or "model" not in state or not state.get("cfg"):
        raise ConversionError(f"{ckpt_path}: not a fairseq checkpoint with a cfg")
    cfg = state["cfg"]
    model_cfg, task_cfg = cfg.get("model") or {}, cfg.get("task") or {}
    if (model_cfg.get("_name") or model_cfg.get("arch")) not in ("xlm_transformer", "xlm_tiny", "xlm_512", "xlm_1024"):
        raise ConversionError(f"{ckpt_path}: model {model_cfg.get('_name')!r} is not xlm_transformer")
    lm = {k[len(LM_PREFIX):]: v for k, v in state["model"].items() if k.startswith(LM_PREFIX)}
    if "pred_layer.proj.bias" not in lm:
        raise ConversionError(f"{ckpt_path}: no LM output layer (a translation model?); only cross_lingual_lm checkpoints export")
    dictionary, dict_dir = _fairseq_dictionary_for(ckpt_path, state)
    n_words = lm["embeddings.weight"].shape[0]
    if len(dictionary) != n_words:
        raise ConversionError(f"{ckpt_path}: {n_words} embedding rows but dict.txt gives {len(dictionary)} entries")
    if list(dictionary.symbols[:4]) != FAIRSEQ_HEAD:
        raise ConversionError(f"{ckpt_path}: dictionary starts {dictionary.symbols[:4]}, expected {FAIRSEQ_HEAD}")
    langs = [x for x in str(task_cfg.get("langs", "")).split(",") if x]
    dim = lm["embeddings.weight"].shape[1]
    n_layers = len({k.split(".")[1] for k in lm if k.startswith("attentions.")})
    n_heads = int(model_cfg.get("encoder_attention_heads"))
    ffn_dim = lm["ffns.0.lin1.weight"].shape[0]
    if ffn_dim != 4 * dim:
        raise ConversionError(f"{ckpt_path}: FFN size {ffn_dim} is not 4 x {dim}; Hugging Face's XLM hard-codes 4 x emb_dim")
    use_lang_emb = "lang_embeddings.weight" in lm
    n_langs = max(len(langs), 1)
    if use_lang_emb and lm["lang_embeddings.weight"].shape[0] != n_langs:
        raise ConversionError(f"{ckpt_path}: {lm['lang_embeddings.weight'].shape[0]} language embeddings for langs {langs}")

    perm = swap_permutation(n_words)
    hf_words = [dictionary.symbols[int(i)] for i in perm]  # HF/XLM order
    hf_state = {}
    for name, value in lm.items():
        if name == "pred_layer.proj.weight":
            continue
        if name in ("embeddings.weight", "pred_layer.proj.bias"):
            value = value[perm]
        key = name if name.startswith("pred_layer.") else "transformer." + name
        hf_state[key] = value.detach().float().clone()
    hf_state["pred_layer.proj.weight"] = hf_state["transformer.embeddings.weight"]

    from transformers import XLMConfig, XLMWithLMHeadModel

    mask_index = hf_words.index(MASK_SYMBOL)
    lang2id = {lang: i for i, lang in enumerate(langs)}
    config = XLMConfig(
        vocab_size=n_words,
        emb_dim=dim,
        n_layers=n_layers,
        n_heads=n_heads,
        dropout=float(model_cfg.get("dropout", 0.1)),
        attention_dropout=float(model_cfg.get("attention_dropout", 0.1)),
        gelu_activation=True,
        sinusoidal_embeddings=bool(model_cfg.get("sinusoidal_embeddings", False)),
        causal=False,
        asm=False,
        n_langs=n_langs,
        use_lang_emb=use_lang_emb,
        max_position_embeddings=lm["position_embeddings.weight"].shape[0],
        layer_norm_eps=LAYER_NORM_EPS,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        unk_index=3,
        mask_index=mask_index,
        mask_token_id=mask_index,
        lang2id=lang2id or None,
        id2lang={i: lang for lang, i in lang2id.items()} or None,
        lang_id=0,
        tie_word_embeddings=True,
    )
    final = os.path.abspath(out)
    with _staging(final, force) as tmp:
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf_model = XLMWithLMHeadModel(config)
            missing, unexpected = hf_model.load_state_dict(hf_state, strict=False)
            missing = [k for k in missing if not k.endswith("position_ids")]
            if missing or unexpected:
                raise ConversionError(f"{ckpt_path}: cannot fill the HF model (missing {missing[:3]}, unexpected {unexpected[:3]})")
            hf_model.tie_weights()
            try:
                hf_model.save_pretrained(tmp)
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
        _write_hf_tokenizer(tmp, hf_words, dict_dir, os.path.dirname(ckpt_path), lang2id, mask_index)
    return final


def _write_hf_tokenizer(tmp, hf_words, dict_dir, ckpt_dir, lang2id, mask_index):
    tok_info = {}
    codes_path = None
    spm_path = None
    for d in dict.fromkeys([ckpt_dir, dict_dir]):
        if not tok_info and os.path.isfile(os.path.join(d, TOKENIZER_FILE)):
            with open(os.path.join(d, TOKENIZER_FILE), encoding="utf-8") as f:
                tok_info = json.load(f)
        if codes_path is None and os.path.isfile(os.path.join(d, CODES_FILE)):
            codes_path = os.path.join(d, CODES_FILE)
        if spm_path is None and os.path.isfile(os.path.join(d, "spm.model")):
            spm_path = os.path.join(d, "spm.model")
    readme = ["# XLM model exported from xlm_fairseq", "",
              "Load with `transformers.XLMWithLMHeadModel.from_pretrained(THIS_DIR)`; pass `langs` "
              f"(ids: {json.dumps(lang2id)}) as XLM expects.", ""]
    if tok_info.get("type") == "xlm_bpe" or (codes_path and not spm_path):
        vocab = {xlm_word_to_hf_token(w): i for i, w in enumerate(hf_words)}
        with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False, indent=2)
            f.write("\n")
        if codes_path:
            with open(codes_path, encoding="utf-8") as f:
                codes = parse_codes(f, codes_path)
            with open(os.path.join(tmp, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
                for a, b, c in codes:
                    f.write(f"{a} {b} {c}\n")
        else:
            readme += ["No BPE codes were next to the checkpoint: add the model's `merges.txt` before using "
                       "`XLMTokenizer`.", ""]
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"tokenizer_class": "XLMTokenizer",
                       "do_lowercase_and_remove_accent": bool(tok_info.get("lowercase_and_remove_accent", True)),
                       "lang2id": lang2id or None,
                       "id2lang": {str(i): lang for lang, i in lang2id.items()} or None,
                       "mask_token": MASK_SYMBOL}, f, indent=2)
            f.write("\n")
    elif spm_path:
        shutil.copyfile(spm_path, os.path.join(tmp, "spm.model"))
        with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(w + "\n" for w in hf_words))
        readme += ["The vocabulary is sentencepiece (`spm.model`, Moses tokenisation first, as in "
                   "`preprocess/`), which Hugging Face's `XLMTokenizer` cannot apply. `vocab.txt` lists the "
                   f"model's ids in order (id i = line i + 1; mask `<special1>` = {mask_index}): encode with "
                   "sentencepiece and map pieces through it.", ""]
    else:
        readme += ["No tokenizer files were found next to the checkpoint; only the weights were exported.", ""]
    with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(readme))


def convert(src: str, out: str, to: str = "fairseq", langs: Optional[str] = None, force: bool = False,
            lowercase: Optional[bool] = None, codes: Optional[str] = None) -> str:
    check_out_dir(out, force, src)
    if to == "hf":
        if not os.path.exists(src):
            raise ConversionError(f"{src}: no such file or directory")
        return export_hf(src, out, force)
    kind, ckpt = detect_source(src)
    if kind == "fairseq":
        raise ConversionError(f"{src}: already an xlm_fairseq checkpoint (use --to hf to export it)")
    if kind == "hf":
        return convert_hf(src, out, langs, force, lowercase, codes)
    return convert_xlm_pth(src, out, langs, force, lowercase, codes, _ckpt=ckpt)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m xlm_fairseq.convert",
        description="Convert an original XLM .pth or a Hugging Face XLM directory to an xlm_fairseq "
        "model directory (--to fairseq), or an xlm_fairseq checkpoint to a Hugging Face directory (--to hf).",
    )
    parser.add_argument("src", metavar="SRC", help="XLM .pth, HF XLM directory, or (--to hf) our model.pt / its directory")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="directory to create")
    parser.add_argument("--to", choices=("fairseq", "hf"), default="fairseq", help="target format (default: fairseq)")
    parser.add_argument("--langs", help="languages in id order, e.g. en,de (only if SRC names none)")
    parser.add_argument("--codes", metavar="FILE", help="fastBPE codes of the model (original .pth files carry none)")
    parser.add_argument("--lowercase", choices=("yes", "no"),
                        help="the model's text is lowercased and accent-stripped (default: from the HF "
                        "tokenizer_config.json; yes for a .pth)")
    parser.add_argument("--force", action="store_true", help="replace an existing non-empty OUT_DIR")
    args = parser.parse_args(argv)
    for name in _NOISY_LOGGERS:  # a command line: keep stderr for errors
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r"(?s).*(hydra|ConfigStore|strict flag|package header)")
    lowercase = None if args.lowercase is None else args.lowercase == "yes"
    try:
        out = convert(args.src, args.out_dir, args.to, args.langs, args.force, lowercase, args.codes)
    except XLMUserError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    main()
