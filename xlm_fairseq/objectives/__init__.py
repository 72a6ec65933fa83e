"""The training objectives, one class each (``lm``: CLM, MLM, TLM; ``span``: MASS's span masking;
``translation``: AE, MT, BT), registered in XLM's loop order, and the loop that runs them (``schedule``)."""

from . import lm, span, translation  # noqa: F401
