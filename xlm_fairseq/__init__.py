"""xlm_fairseq: XLM (Lample & Conneau, 2019) as a fairseq plugin (``--user-dir xlm_fairseq``).

Importing registers the model ``xlm_transformer`` (archs ``xlm_tiny``, ``xlm_512``, ``xlm_1024``),
the tasks ``cross_lingual_lm`` (replacing fairseq's legacy MLM-only task of that name),
``translation_lm`` and ``xlm_classification``, the criteria ``xlm_cross_entropy`` and
``xlm_sentence_classification``, the optimizer ``xlm_adam`` (fairseq's Adam in torch's fused kernel),
the schedule ``inverse_sqrt_cooldown`` (``inverse_sqrt`` falling to 0 by the end of the budget), the text
pipeline as ``--tokenizer xlm`` / ``--bpe xlm``, and Hugging Face ids as model names of
``XLMModel.from_pretrained``; it installs the patches of ``xlm_fairseq.patches`` (fairseq offers no
hook for them; each module says why).

Where things live: ``modules/`` layers, ``models/`` wiring, ``generation.py`` greedy and beam decoding,
``data/`` datasets, ``objectives/`` one class per objective and XLM's loop, ``tasks/``, ``criterions/``,
``optim/`` optimizers and schedules, ``assets.py`` a model's dictionary, languages and text pipeline,
``checkpoints.py`` reading checkpoints, ``hardware.py`` what the CPU multiplies fast, ``inference/`` hubs
and export, ``evaluation/`` BLEU, lexicon induction and retrieval, ``convert/`` other formats,
``distributed/`` CPU data parallelism, ``patches/`` changes to fairseq and torch.
"""

from xlm_fairseq import patches

patches.install()

from xlm_fairseq import criterions, models, objectives, optim  # noqa: E402,F401  (registers them)
from xlm_fairseq.convert import hf_hub  # noqa: E402
from xlm_fairseq.data import encoders  # noqa: E402,F401  (registers --tokenizer xlm / --bpe xlm)
from xlm_fairseq.models import XLMLanguageModel, XLMModel  # noqa: E402
from xlm_fairseq.tasks import cross_lingual_lm, translation_lm, xlm_classification  # noqa: E402,F401

hf_hub.register()

__all__ = ["XLMLanguageModel", "XLMModel", "criterions", "models"]
