"""What every XLM model class shares: checks when a checkpoint is loaded, and ``from_pretrained``."""

from typing import List

from xlm_fairseq.errors import XLMUserError


class XLMModelBase:
    """What the LM, classifier and translation model share: loading, and the language list the
    model was built for, which its checkpoints carry (torch's ``get_extra_state``: the key
    ``_extra_state`` of the state dict)."""

    langs: List[str] = []  # set by build_model: language ids are positions in this list

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

    def get_extra_state(self):
        return {"langs": list(self.langs)}

    def set_extra_state(self, state):
        stored = (state or {}).get("langs")
        if stored and self.langs and list(stored) != list(self.langs):
            # language ids are positions in the list: resuming in another order swaps the embeddings
            raise XLMUserError(
                f"the checkpoint was trained with --langs {','.join(stored)}, not {','.join(self.langs)}: language "
                f"ids are positions in that list; give --langs {','.join(stored)}"
            )

    def upgrade_state_dict_named(self, state_dict, name):
        """Checkpoints written before the language list was carried (and converted ones) load as
        they did: without a list to check."""
        super().upgrade_state_dict_named(state_dict, name)
        state_dict.setdefault(f"{name}._extra_state" if name else "_extra_state", None)

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """A loaded model with its dictionary and text pipeline, in the hub of its kind: a pretrained
        LM as :class:`xlm_fairseq.inference.hub.XLMHubInterface` (features, fill_mask), a translation model as
        :class:`xlm_fairseq.inference.translation_hub.XLMTranslationHubInterface` (translate), a fine-tuned
        classifier as :class:`xlm_fairseq.inference.classification_hub.XLMClassificationHubInterface` (classify)."""
        from xlm_fairseq.inference import load_hub  # the hubs sit above the models (they use tasks)

        return load_hub(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
