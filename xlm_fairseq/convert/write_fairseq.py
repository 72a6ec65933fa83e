"""Write an :class:`~xlm_fairseq.convert.lm.LM` as an xlm_fairseq model directory: a
``cross_lingual_lm`` (a translation model: ``translation_lm``) / ``xlm_transformer`` checkpoint built
the way fairseq builds one, with its dict.txt, BPE codes, text pipeline and a README; staged, so
OUT_DIR is whole or not there."""

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
from xlm_fairseq.convert.lm import LM
from xlm_fairseq.data.dictionary import dictionary_digest, load_dictionary
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import DECODER_PREFIX, LM_PREFIX

NOISY_LOGGERS = ("", "fairseq", "hydra", "xlm_fairseq")


def write_fairseq_dir(lm: LM, out_dir: str, force: bool = False) -> str:
    """Write ``lm`` as an xlm_fairseq OUT_DIR (see :mod:`xlm_fairseq.convert`). Returns OUT_DIR."""
    from fairseq.checkpoint_utils import torch_persistent_save
    from fairseq.data import Dictionary
    from omegaconf import OmegaConf

    final = os.path.abspath(out_dir)
    n_words = len(lm.words)
    if lm.subwords != "xlm_bpe":
        raise XLMUserError(f"{lm.path}: subwords {lm.subwords!r}; a converted model dir holds XLM's BPE")
    if lm.dim % lm.n_heads:
        raise XLMUserError(f"{lm.path}: emb_dim {lm.dim} is not a multiple of n_heads {lm.n_heads}")
    ffn = lm.state.get(LM_PREFIX + "ffns.0.lin1.weight")
    if ffn is not None and ffn.shape[0] != 4 * lm.dim:
        raise XLMUserError(f"{lm.path}: FFN size {ffn.shape[0]} is not 4 x emb_dim")

    with staged_out_dir(final, force) as tmp:
        # dict.txt leaves out the four symbols fairseq's Dictionary adds itself
        with open(os.path.join(tmp, DICT_FILE), "w", encoding="utf-8", newline="\n") as f:
            for word, count in zip(lm.words[4:], lm.counts[4:]):
                f.write(f"{word} {int(count)}\n")
        if len(Dictionary.load(os.path.join(tmp, DICT_FILE))) != n_words:
            raise XLMUserError(f"{lm.path}: fairseq reads dict.txt back with a different size than {n_words}")

        shape = (lm.dim, lm.n_layers, lm.n_heads, lm.dropout, lm.attention_dropout, lm.max_positions)
        cfg, task, model = build_fairseq_model(
            tmp, lm.langs, *shape, lm.sinusoidal, lm.use_lang_emb, decoder_layers=lm.decoder_layers
        )
        if len(task.source_dictionary) != n_words:
            raise XLMUserError(
                f"{lm.path}: the task's dictionary has {len(task.source_dictionary)} entries, the model {n_words}"
            )
        model.load_state_dict(_state_for(model, lm.state, lm.path), strict=True)

        have_codes = lm.codes is not None
        if have_codes:
            with open(os.path.join(tmp, BPE_CODES_FILE), "w", encoding="utf-8", newline="\n") as f:
                write_bpe_codes(lm.codes, f)
        settings = PipelineSettings(
            subwords="xlm_bpe",
            subword_model=BPE_CODES_FILE,
            subword_sha256=file_sha256(os.path.join(tmp, BPE_CODES_FILE)) if have_codes else None,
            ro_remove_diacritics=lm.ro_remove_diacritics,
            lowercase_and_remove_accent=bool(lm.lowercase),
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
                "langs": list(lm.langs),  # what fairseq-generate/-interactive build the model with
                "text_pipeline": settings.to_dict(),
                "dictionary_sha256": dictionary_digest(load_dictionary(os.path.join(tmp, DICT_FILE))),
            },
        }
        torch_persistent_save(checkpoint, os.path.join(tmp, MODEL_FILE))
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
            f.write("\n".join(_readme(lm, have_codes)))
    return final


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
    decoder_layers: Optional[int] = None,
):
    """The config fairseq-train makes of ``--task cross_lingual_lm --arch xlm_transformer`` with these
    sizes (fairseq's defaults elsewhere; with ``decoder_layers`` ``--task translation_lm``), the task
    set up from it and the model the task builds. Returns (cfg, task, model); data_dir must hold dict.txt."""
    from fairseq import tasks
    from fairseq.dataclass.configs import FairseqConfig
    from omegaconf import OmegaConf

    import xlm_fairseq
    from xlm_fairseq.models.xlm import XLMConfig
    from xlm_fairseq.tasks.cross_lingual_lm import CrossLingualLMConfig
    from xlm_fairseq.tasks.translation_lm import TranslationLMConfig

    ffn_dim = ffn_dim or 4 * dim
    # a translation_lm model initialised from this LM needs the same shape on both sides
    layers = {"encoder": n_layers, "decoder": decoder_layers or n_layers}
    shape = {
        f"{side}_{name}": value
        for side in ("encoder", "decoder")
        for name, value in (
            ("embed_dim", dim),
            ("layers", layers[side]),
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
    if decoder_layers:
        task_cfg = TranslationLMConfig(_name="translation_lm", data=data_dir, langs=",".join(langs))
    else:
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


@contextlib.contextmanager
def _quiet():
    """fairseq/hydra log at DEBUG and warn about deprecated hydra usage when building a config;
    silence that while inside, and put logging and warning filters back afterwards."""
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
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


def _state_for(model, state: Dict[str, torch.Tensor], src: str) -> Dict[str, torch.Tensor]:
    """``state`` (the stacks' parameters, each tied output weight left out) as the model's state dict, checked."""
    ours = model.state_dict()
    stacks = (LM_PREFIX, DECODER_PREFIX)
    tied = {
        p + "pred_layer.proj.weight": p + "embeddings.weight" for p in stacks if p + "pred_layer.proj.weight" in ours
    }
    expected = {k for k in ours if k.startswith(stacks)}
    missing = sorted(expected - set(state) - set(tied))
    unexpected = sorted(set(state) - expected)
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected {', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}")
        kind = "translation model" if DECODER_PREFIX + "embeddings.weight" in ours else "LM"
        raise XLMUserError(f"{src}: parameters do not match an xlm_transformer {kind} ({'; '.join(parts)})")
    checked = {}
    for name in expected:
        value = state[tied.get(name, name)]
        want = ours[name]
        if tuple(value.shape) != tuple(want.shape):
            raise XLMUserError(f"{src}: {name} has shape {tuple(value.shape)}, the model expects {tuple(want.shape)}")
        checked[name] = value.detach().to(dtype=want.dtype).clone()
    return checked


def _readme(lm: LM, have_codes: bool) -> List[str]:
    task = "translation_lm" if lm.decoder_layers else "cross_lingual_lm"
    use = (
        "Use: `XLMModel.from_pretrained(THIS_DIR).translate(text, src=..., tgt=...)`, `fairseq-generate` / "
        "`fairseq-interactive` with `--path THIS_DIR/model.pt`, or `fairseq-train --restore-file THIS_DIR/model.pt`."
        if lm.decoder_layers
        else "Use: `xlm_fairseq.models.xlm.XLMModel.from_pretrained(THIS_DIR)` or "
        "`--pretrained-xlm-checkpoint THIS_DIR`."
    )
    lines = [
        "# XLM model converted for xlm_fairseq",
        "",
        f"Source: `{os.path.abspath(lm.path)}` ({lm.origin}).",
        f"Languages (id order): {', '.join(lm.langs)}. Vocabulary: {len(lm.words)} entries. "
        f"emb_dim {lm.dim}, {lm.n_layers} layers, {lm.n_heads} heads, "
        f"{'sinusoidal' if lm.sinusoidal else 'learned'} positions ({lm.max_positions}), "
        f"language embeddings {'on' if lm.use_lang_emb else 'off'}"
        + (f"; a translation model, decoder of {lm.decoder_layers} layers." if lm.decoder_layers else "."),
        "",
        f"Files: `{MODEL_FILE}` (fairseq checkpoint, `--task {task} --arch xlm_transformer`), "
        f"`{DICT_FILE}`, `{PIPELINE_FILE}`" + (f", `{BPE_CODES_FILE}`." if have_codes else "."),
        "",
        use,
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
    if lm.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in lm.notes] + [""]
    return lines
