from .xlm import XLMLanguageModel, XLMModel  # noqa: F401
