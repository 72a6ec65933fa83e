"""The plugin's optimizers (``--optimizer xlm_adam``); fairseq's own stay as fairseq has them."""

from xlm_fairseq.optim import adam  # noqa: F401  (registers --optimizer xlm_adam)
