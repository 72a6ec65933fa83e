"""xlm_fairseq: XLM (Lample & Conneau, 2019) as a fairseq plugin (``--user-dir xlm_fairseq``).

Importing registers the model ``xlm_transformer`` (archs ``xlm_tiny``, ``xlm_512``, ``xlm_1024``),
the tasks ``cross_lingual_lm`` (replacing fairseq's legacy task of that name) and ``translation_lm``,
and the criterion ``xlm_cross_entropy``; it also lets torch's weights-only loader read
fairseq checkpoints through an explicit allowlist (see ``safe_load``).
"""

from xlm_fairseq import cli, errors, safe_load

safe_load.install()
errors.install_excepthook()
cli.install()

from xlm_fairseq import criterions, models, tasks  # noqa: E402,F401  (registers everything)
from xlm_fairseq.models.xlm import XLMModel  # noqa: E402,F401
from xlm_fairseq.tasks import cross_lingual_lm, translation_lm  # noqa: E402,F401

__all__ = ["XLMModel"]
