"""xlm_fairseq: XLM (Lample & Conneau, 2019) as a fairseq plugin (``--user-dir xlm_fairseq``).

Importing registers the model ``xlm_transformer`` (archs ``xlm_tiny``, ``xlm_512``, ``xlm_1024``),
the tasks ``cross_lingual_lm``, ``translation_lm`` and ``xlm_classification``, the criteria
``xlm_cross_entropy`` and ``xlm_sentence_classification``, and the text pipeline as
``--tokenizer xlm`` / ``--bpe xlm``.
"""

from xlm_fairseq import checkpoint_copy, cli, errors, interactive_input, precision, prefetch, safe_load

# Importing the plugin changes seven things outside it, each because fairseq's commands offer no hook:
# - torch >= 2.6 loads weights-only, and fairseq's checkpoints pickle argparse/omegaconf/numpy objects:
#   an explicit allowlist (safe_load) lets fairseq-train/-generate read them, and nothing else; and
#   fairseq's checkpoint reader turns a truncated or corrupt file into one line naming it;
# - a user error (bad option or file) raised inside fairseq-train/-generate prints one ``error:`` line
#   instead of a traceback (other exceptions are untouched);
# - ``fairseq-train --task cross_lingual_lm --help`` lists the task's options (fairseq adds them only
#   after a first parse, which --help never reaches);
# - fairseq copies each new checkpoint over checkpoint_last.pt in place: a kill during the copy left a
#   checkpoint that cannot be resumed; the copy now goes through a temporary file and a rename;
# - fairseq's parser makes --bf16 imply --tpu: without torch_xla that --tpu is taken back (precision);
# - at exit fairseq's batch-prefetch threads stop between batches: one ended by the interpreter inside a
#   torch op aborted a finished run with exit code 134 (prefetch);
# - fairseq-interactive decodes its input as strict UTF-8, a bad line one error naming it: standard input
#   with a 0xff byte was translated and exited 0 (interactive_input).
# Registering ``cross_lingual_lm`` replaces fairseq's legacy MLM-only task of that name (tasks/__init__.py).
safe_load.install()
safe_load.install_checkpoint_reader()
errors.install_excepthook()
cli.install()
checkpoint_copy.install()
precision.install()
prefetch.install()
interactive_input.install()

from xlm_fairseq import criterions, models, tasks  # noqa: E402,F401  (registers everything)
from xlm_fairseq.convert import hf_hub  # noqa: E402,F401  (XLMModel.from_pretrained takes Hugging Face ids)
from xlm_fairseq.data import encoders  # noqa: E402,F401
from xlm_fairseq.models.xlm import XLMLanguageModel, XLMModel  # noqa: E402,F401
from xlm_fairseq.tasks import cross_lingual_lm, translation_lm, xlm_classification  # noqa: E402,F401

__all__ = ["XLMLanguageModel", "XLMModel"]
