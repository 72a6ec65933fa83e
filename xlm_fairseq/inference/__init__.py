"""Using trained models: the hubs (features, translate, classify), export of a self-contained model
directory (with CTranslate2 translators: ``ctranslate2_models.py``), and batch classification from
the command line."""

from xlm_fairseq.inference.classification_hub import XLMClassificationHubInterface
from xlm_fairseq.inference.hub import XLMHubInterface, is_classifier, is_translation_model, load_checkpoint
from xlm_fairseq.inference.translation_hub import XLMTranslationHubInterface


def load_hub(model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
    """A loaded model with its dictionary and text pipeline, in the hub of its kind: a pretrained LM
    as :class:`XLMHubInterface` (features, fill_mask), a translation model as
    :class:`XLMTranslationHubInterface` (translate), a fine-tuned classifier as
    :class:`XLMClassificationHubInterface` (classify)."""
    x, path = load_checkpoint(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
    model = x["models"][0]
    if is_translation_model(model):
        return XLMTranslationHubInterface(x["args"], x["task"], x["models"], model_dir=path)
    if is_classifier(model):
        return XLMClassificationHubInterface(x["args"], x["task"], model, model_dir=path)
    return XLMHubInterface(x["args"], x["task"], model, model_dir=path)
