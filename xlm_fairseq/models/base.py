"""What every XLM model class shares: checks when a checkpoint is loaded, and ``from_pretrained``."""

from typing import Dict, List

import torch
import torch.nn as nn
from fairseq.models import BaseFairseqModel
from torch import Tensor

from xlm_fairseq.errors import XLMUserError

LM_PREFIX = "encoder.transformer."  # where the pretrained LM's parameters sit in a checkpoint's state dict
DECODER_PREFIX = "decoder.transformer."  # where a translation model's decoder sits


def bare_model(model):
    """The model inside fairseq's distributed wrappers (a ModuleProxyWrapper around a DDP module):
    ``model.module`` alone is still a wrapper under --ddp-backend legacy_ddp."""
    while not isinstance(model, BaseFairseqModel) and hasattr(model, "module"):
        model = model.module
    return model


class XLMModelBase:
    """What the LM, classifier and translation model share: loading, checked against the language
    list the model was built for."""

    langs: List[str]  # given to the constructor: language ids are positions in this list

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        """A checkpoint made for another vocabulary or language list is one line saying so (was a
        wall of size mismatches)."""
        transformer = self.encoder.transformer
        source = getattr(self.encoder.dictionary, "source_file", None)  # None: the checkpoint's own
        for name, what, have in (
            ("embeddings", "vocabulary", f"the dictionary ({source})" if source else "the dictionary"),
            ("lang_embeddings", "languages", "--langs"),
        ):
            stored = state_dict.get(f"encoder.transformer.{name}.weight")
            own = getattr(transformer, name, None)
            if stored is not None and own is not None and stored.shape[0] != own.weight.shape[0]:
                raise XLMUserError(
                    f"the checkpoint's {what} has {stored.shape[0]} entries, {have} {own.weight.shape[0]}: "
                    "use the model with the data-bin and --langs it was trained with"
                )
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def set_extra_state(self, state):
        """The checkpoint's language list, handed over with its weights when fairseq reads it
        (:func:`xlm_fairseq.checkpoints.hand_langs_to_model`); checkpoints written before the list moved
        to ``task_state`` carry its characters as a tensor. Models never write it: ``state_dict`` has no
        ``_extra_state``, the list is stored once, in the checkpoint's ``task_state``."""
        if state is None:  # a state dict not read from a checkpoint, or from one without a list
            return
        if isinstance(state, Tensor):
            state = "".join(chr(int(c)) for c in state.round().long()).split(",")
        stored = [lang for lang in state if lang]
        if stored and self.langs and stored != list(self.langs):
            # language ids are positions in the list: resuming in another order swaps the embeddings
            raise XLMUserError(
                f"the checkpoint was trained with --langs {','.join(stored)}, not {','.join(self.langs)}: language "
                f"ids are positions in that list; give --langs {','.join(stored)}"
            )

    def upgrade_state_dict_named(self, state_dict, name):
        """A state dict without a language list (one not read from a checkpoint, or from one that names
        none) loads without one to check."""
        super().upgrade_state_dict_named(state_dict, name)
        state_dict.setdefault(f"{name}._extra_state" if name else "_extra_state", None)

    def stacks(self) -> Dict[str, nn.Module]:
        """The model's transformer stacks by side (``encoder``, and ``decoder`` for translation)."""
        sides = {"encoder": self.encoder.transformer}
        if getattr(self, "decoder", None) is not None:
            sides["decoder"] = self.decoder.transformer
        return sides

    def init_from_lm(self, lm_state: Dict[str, Tensor], pretrained=None) -> List[str]:
        """Every stack from one pretrained LM's parameters (``encoder.transformer.*``): XLM's
        ``--reload_model enc,dec``. What an LM has no counterpart for stays as initialised
        (encoder-decoder attention and its LayerNorm; a classifier's head is outside the stacks; language
        embeddings the LM was trained without start at zero); the LM's output layer is skipped by a stack
        without one. Returns the names left as initialised."""
        lm = {k[len(LM_PREFIX) :]: v for k, v in lm_state.items() if k.startswith(LM_PREFIX)}
        built = f"; it was built with {pretrained.architecture()}" if pretrained is not None else ""
        where = pretrained.path if pretrained is not None else "the pretrained checkpoint"
        fresh = []
        for side, stack in self.stacks().items():
            own = stack.state_dict()
            for name in own:
                if name in lm:
                    if own[name].shape != lm[name].shape:
                        raise XLMUserError(
                            f"{where}: parameter {name} has shape {tuple(lm[name].shape)}, the {side} of the model of "
                            f"--arch and its options expects {tuple(own[name].shape)}{built}"
                        )
                    own[name] = lm[name]
                elif name.startswith(("encoder_attn.", "layer_norm15.")):
                    fresh.append(f"{side}.{name}")
                elif name == "lang_embeddings.weight":  # an LM without them (XLM's --use_lang_emb false)
                    own[name] = torch.zeros_like(own[name])  # so that the model starts computing what the LM did
                    fresh.append(f"{side}.{name}")
                else:
                    raise XLMUserError(f"{where}: lacks {name}, needed by the {side} of the model of --arch{built}")
            stack.load_state_dict(own)
        return fresh

    def init_embeddings(self, weights: Tensor, where: str) -> int:
        """Token embeddings of every stack from ``weights`` [dictionary size x dim]: each row of numbers replaces
        the initialised row (a row of NaN keeps it; the padding row is never replaced). Returns the rows replaced."""
        rows = ~weights.isnan().any(1)
        for side, stack in self.stacks().items():
            own = stack.embeddings.weight
            if tuple(weights.shape) != tuple(own.shape):
                raise XLMUserError(
                    f"{where}: embeddings of shape {tuple(weights.shape)}, the {side} of the model expects "
                    f"{tuple(own.shape)} (the dictionary's size x --encoder-embed-dim)"
                )
            rows[stack.embeddings.padding_idx] = False
            with torch.no_grad():
                own[rows] = weights[rows].to(own.dtype)
        return int(rows.sum())

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """A loaded model with its dictionary and text pipeline, in the hub of its kind: a pretrained
        LM as :class:`xlm_fairseq.inference.hub.XLMHubInterface` (features, fill_mask), a translation model as
        :class:`xlm_fairseq.inference.translation_hub.XLMTranslationHubInterface` (translate), a fine-tuned
        classifier as :class:`xlm_fairseq.inference.classification_hub.XLMClassificationHubInterface` (classify)."""
        from xlm_fairseq.inference import load_hub  # the hubs sit above the models (they use tasks)

        return load_hub(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
