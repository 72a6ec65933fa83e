"""The plugin's one error type: a user error (bad option, missing or mismatched file).

Raised anywhere in the plugin; ``patches/user_errors.py`` prints it as one ``error: ...`` line."""

from preprocess.errors import UserError


class XLMUserError(UserError):
    """A configuration or input error; the message names the option or file."""


# the question XLM's users asked most: a pretrained LM used to translate
NOT_A_TRANSLATION_MODEL = (
    "a pretrained encoder (cross_lingual_lm), not a translation model; train one from it with "
    "--task translation_lm --pretrained-xlm-checkpoint CHECKPOINT, or use its features through XLMModel.from_pretrained"
)
