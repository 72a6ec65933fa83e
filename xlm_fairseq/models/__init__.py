"""Wiring only: the LM, the classifier and the translation model around the stacks of ``modules/``."""

from .xlm import LM_PREFIX, XLMClassificationModel, XLMLanguageModel, XLMModel, XLMTranslationModel  # noqa: F401
