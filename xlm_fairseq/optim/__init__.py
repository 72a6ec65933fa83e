"""The plugin's optimizers (``--optimizer xlm_adam``) and learning-rate schedules (``--lr-scheduler
inverse_sqrt_cooldown``); fairseq's own stay as fairseq has them."""

from xlm_fairseq.optim import adam, cooldown  # noqa: F401  (registers --optimizer xlm_adam, the schedule)
