"""Write an :class:`XLMSource` as an xlm_fairseq OUT_DIR: a ``cross_lingual_lm`` / ``xlm_transformer``
checkpoint built the way fairseq builds one, with its dict.txt, BPE codes and text pipeline."""

import contextlib
import logging
import os
import warnings
from typing import Dict, List, Optional

import torch

from preprocess.files import file_sha256, staged_out_dir
from preprocess.layout import BPE_CODES_FILE, DICT_FILE, MODEL_FILE, PIPELINE_FILE
from preprocess.pipeline import PipelineSettings, write_settings
from preprocess.subwords import write_bpe_codes
from xlm_fairseq.convert.source import XLMSource, swap_permutation
from xlm_fairseq.data.dictionary import dictionary_digest, load_dictionary
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX

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


def build_fairseq_model(
    data_dir: str,
    langs: List[str],
    dim: int,
    n_layers: int,
    n_heads: int,
    dropout: float,
    attention_dropout: float,
    max_positions: int,
    sinusoidal: bool,
    use_lang_emb: bool,
    ffn_dim: Optional[int] = None,
):
    """The config fairseq-train makes of ``--task cross_lingual_lm --arch xlm_transformer`` with these
    sizes (fairseq's defaults elsewhere), the task set up from it and the model the task builds.
    Returns (cfg, task, model); data_dir must hold dict.txt."""
    from fairseq import tasks
    from fairseq.dataclass.configs import FairseqConfig
    from omegaconf import OmegaConf

    import xlm_fairseq
    from xlm_fairseq.models.xlm import XLMConfig
    from xlm_fairseq.tasks.cross_lingual_lm import CrossLingualLMConfig

    ffn_dim = ffn_dim or 4 * dim
    # a translation_lm model initialised from this LM needs the same shape on both sides
    shape = {
        f"{side}_{name}": value
        for side in ("encoder", "decoder")
        for name, value in (
            ("embed_dim", dim),
            ("layers", n_layers),
            ("attention_heads", n_heads),
            ("ffn_embed_dim", ffn_dim),
        )
    }
    model_cfg = XLMConfig(
        _name="xlm_transformer",
        **shape,
        dropout=float(dropout),
        attention_dropout=float(attention_dropout),
        max_positions=int(max_positions),
        sinusoidal_embeddings=bool(sinusoidal),
        no_lang_emb=not use_lang_emb,
    )
    task_cfg = CrossLingualLMConfig(_name="cross_lingual_lm", data=data_dir, langs=",".join(langs))
    cfg = OmegaConf.structured(FairseqConfig)  # the groups fairseq fills in (common.seed, ...)
    cfg.common.user_dir = os.path.dirname(os.path.abspath(xlm_fairseq.__file__))
    cfg.task = OmegaConf.structured(task_cfg)  # task.seed is ${common.seed}
    cfg.model = OmegaConf.structured(model_cfg)  # model.langs is ${task.langs}
    OmegaConf.set_struct(cfg, True)
    with _quiet():
        task = tasks.setup_task(cfg.task)
        model = task.build_model(cfg.model)
    return cfg, task, model


def _lm_state_for(model, weights: Dict[str, torch.Tensor], src: str) -> Dict[str, torch.Tensor]:
    """Source weights (XLM names, fairseq vocabulary order) -> our model's state dict, checked."""
    ours = model.state_dict()
    expected = {k[len(LM_PREFIX) :] for k in ours if k.startswith(LM_PREFIX)}
    given = set(weights)
    tied = "pred_layer.proj.weight"
    if tied in given:
        if not torch.equal(weights[tied], weights["embeddings.weight"]):
            raise XLMUserError(
                f"{src}: pred_layer.proj.weight differs from embeddings.weight; xlm_transformer ties them"
            )
        given.discard(tied)
    missing = sorted(expected - given - {tied})
    unexpected = sorted(given - expected)
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected {', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}")
        raise XLMUserError(f"{src}: parameters do not match an xlm_transformer LM ({'; '.join(parts)})")
    state = {}
    for name in expected:
        value = weights["embeddings.weight" if name == tied else name]
        want = ours[LM_PREFIX + name]
        if tuple(value.shape) != tuple(want.shape):
            raise XLMUserError(f"{src}: {name} has shape {tuple(value.shape)}, the model expects {tuple(want.shape)}")
        state[LM_PREFIX + name] = value.detach().to(dtype=want.dtype).clone()
    return state


def write_fairseq_dir(source: XLMSource, out_dir: str, force: bool = False) -> str:
    """Write ``source`` as an xlm_fairseq OUT_DIR (see :mod:`xlm_fairseq.convert`). Returns OUT_DIR."""
    from fairseq.checkpoint_utils import torch_persistent_save
    from fairseq.data import Dictionary
    from omegaconf import OmegaConf

    final = os.path.abspath(out_dir)
    n_words = len(source.words)
    emb = source.weights.get("embeddings.weight")
    if emb is None or emb.shape[0] != n_words:
        rows = None if emb is None else emb.shape[0]
        raise XLMUserError(f"{source.path}: embeddings have {rows} rows but the vocabulary {n_words} entries")
    if source.dim % source.n_heads:
        raise XLMUserError(f"{source.path}: emb_dim {source.dim} is not a multiple of n_heads {source.n_heads}")
    ffn = source.weights.get("ffns.0.lin1.weight")
    if ffn is not None and ffn.shape[0] != 4 * source.dim:
        raise XLMUserError(f"{source.path}: FFN size {ffn.shape[0]} is not 4 x emb_dim")

    perm = swap_permutation(n_words)
    weights = dict(source.weights)
    for name in ("embeddings.weight", "pred_layer.proj.bias", "pred_layer.proj.weight"):
        if name in weights:
            weights[name] = weights[name][perm]

    with staged_out_dir(final, force) as tmp:
        # dict.txt leaves out the four symbols fairseq's Dictionary adds itself
        with open(os.path.join(tmp, DICT_FILE), "w", encoding="utf-8", newline="\n") as f:
            for word, count in zip(source.words[4:], source.counts[4:]):
                f.write(f"{word} {int(count)}\n")
        if len(Dictionary.load(os.path.join(tmp, DICT_FILE))) != n_words:
            raise XLMUserError(f"{source.path}: fairseq reads dict.txt back with a different size than {n_words}")

        cfg, task, model = build_fairseq_model(
            tmp,
            source.langs,
            source.dim,
            source.n_layers,
            source.n_heads,
            source.dropout,
            source.attention_dropout,
            source.max_positions,
            source.sinusoidal,
            source.use_lang_emb,
        )
        if len(task.source_dictionary) != n_words:
            raise XLMUserError(
                f"{source.path}: the task's dictionary has {len(task.source_dictionary)} entries, the model {n_words}"
            )
        model.load_state_dict(_lm_state_for(model, weights, source.path), strict=True)

        have_codes = source.codes is not None
        if have_codes:
            with open(os.path.join(tmp, BPE_CODES_FILE), "w", encoding="utf-8", newline="\n") as f:
                write_bpe_codes(source.codes, f)
        # XLM's get-data-nmt.sh strips Romanian diacritics (WMT16's scripts); it applies to ro only
        settings = PipelineSettings(
            subwords="xlm_bpe",
            subword_model=BPE_CODES_FILE,
            subword_sha256=file_sha256(os.path.join(tmp, BPE_CODES_FILE)) if have_codes else None,
            ro_remove_diacritics=True,
            lowercase_and_remove_accent=bool(source.lowercase),
        )
        write_settings(tmp, settings)

        cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
        cfg_dict["task"]["data"] = final
        checkpoint = {
            "cfg": cfg_dict,
            "model": model.state_dict(),
            "args": None,
            # fairseq's _upgrade_state_dict indexes optimizer_history[-1]: an empty list cannot load
            "optimizer_history": [
                {"criterion_name": "XLMCriterion", "optimizer_name": "none", "lr_scheduler_state": {}, "num_updates": 0}
            ],
            "extra_state": {},
            # as a training checkpoint carries them
            "task_state": {
                "text_pipeline": settings.to_dict(),
                "dictionary_sha256": dictionary_digest(load_dictionary(os.path.join(tmp, DICT_FILE))),
            },
        }
        torch_persistent_save(checkpoint, os.path.join(tmp, MODEL_FILE))
        _write_fairseq_readme(tmp, source, have_codes)
    return final


def _write_fairseq_readme(tmp: str, source: XLMSource, have_codes: bool):
    kind = "original XLM .pth" if source.kind == "xlm_pth" else "Hugging Face XLM directory"
    lines = [
        "# XLM model converted for xlm_fairseq",
        "",
        f"Source: `{os.path.abspath(source.path)}` ({kind}).",
        f"Languages (id order): {', '.join(source.langs)}. Vocabulary: {len(source.words)} entries. "
        f"emb_dim {source.dim}, {source.n_layers} layers, {source.n_heads} heads, "
        f"{'sinusoidal' if source.sinusoidal else 'learned'} positions ({source.max_positions}), "
        f"language embeddings {'on' if source.use_lang_emb else 'off'}.",
        "",
        f"Files: `{MODEL_FILE}` (fairseq checkpoint, `--task cross_lingual_lm --arch xlm_transformer`), "
        f"`{DICT_FILE}`, `{PIPELINE_FILE}`" + (f", `{BPE_CODES_FILE}`." if have_codes else "."),
        "",
        "Use: `xlm_fairseq.models.xlm.XLMModel.from_pretrained(THIS_DIR)` or `--pretrained-xlm-checkpoint THIS_DIR`.",
        "",
    ]
    if not have_codes:
        lines += [
            "## Missing: BPE codes",
            "",
            "The source carries no BPE codes, so text cannot be encoded yet. Copy the `codes` file released "
            f"with this model (e.g. `codes_xnli_15` next to `mlm_xnli15_1024.pth`) to `{BPE_CODES_FILE}` in "
            "this directory (or convert again with `--codes FILE`).",
            "",
        ]
    if source.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in source.notes] + [""]
    with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
