from .xlm import XLMModel  # noqa: F401
