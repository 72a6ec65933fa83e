"""Convert pretrained XLM models to and from xlm_fairseq checkpoints.

::

    xlm-fairseq-convert SRC OUT_DIR [--to fairseq|hf] [--langs en,de] [--codes FILE]
                        [--lowercase yes|no] [--force]

``--to fairseq`` (default): SRC is an original XLM ``.pth`` (keys ``model``, ``params``,
``dico_id2word``, ``dico_word2id``, ``dico_counts``) or a Hugging Face XLM directory (``config.json``,
``model.safetensors`` or ``pytorch_model.bin``, ``vocab.json``, ``merges.txt``). OUT_DIR receives

``model.pt``
    a fairseq checkpoint of ``xlm_transformer`` under ``--task cross_lingual_lm``
    (``checkpoint_utils.load_model_ensemble_and_task([OUT_DIR/model.pt], arg_overrides={"data": OUT_DIR})``,
    ``XLMModel.from_pretrained(OUT_DIR)``, ``--pretrained-xlm-checkpoint OUT_DIR``); its ``cfg.task.langs``
    lists the languages in language-id order;
``dict.txt``
    XLM's vocabulary from index 4 on (``<special0>``..``<special9>``, then the words, in XLM order,
    fastBPE style: ``th@@`` non-final piece, ``the`` word-final), with counts where the source has them;
``bpe.codes``
    fastBPE codes (``a b count`` per line), from ``merges.txt`` or ``--codes``; an original ``.pth``
    holds none, so without ``--codes`` README.md says where to put the released ``codes`` file;
``text_pipeline.json``
    the text pipeline's settings (``preprocess/pipeline.py``: ``xlm_bpe`` subwords from
    ``bpe.codes``, lowercasing, XLM's Romanian diacritics removal), also stored in ``model.pt``;
``README.md``
    where it came from, and what is missing.

XLM numbers its vocabulary ``<s> </s> <pad> <unk>``, fairseq ``<s> <pad> </s> <unk>``: the rows of
``embeddings.weight`` and ``pred_layer.proj.bias`` are permuted (1 <-> 2), nothing else changes.

``--to hf``: SRC is an xlm_fairseq LM checkpoint (a ``.pt`` file, or a directory holding
``model.pt``), with ``dict.txt`` beside it (or in its ``task.data``). OUT_DIR becomes a directory that
``transformers.XLMWithLMHeadModel.from_pretrained`` loads, plus ``vocab.json``/``merges.txt``/
``tokenizer_config.json`` when the vocabulary is XLM's BPE (a converted model); a sentencepiece
vocabulary (our own pretraining) is copied as ``spm.model`` with a note.

Refusals (a SRC of neither format, an existing non-empty OUT_DIR without ``--force``, a model this
code cannot represent) print one line ``error: ...`` on stderr and exit with status 2. OUT_DIR is
written in a sibling temporary directory and renamed into place at the end.

One way through, one module a job: ``detect`` (what SRC is: the only place that decides; a Hugging
Face id is fetched first) -> a reader per kind, ``read_xlm`` / ``read_hf`` / ``read_ours``, each making
an :class:`LM` (``lm``: our parameter names, fairseq's vocabulary order, the text pipeline; what XLM's
two formats share is in ``xlm_terms``) -> a writer per target, ``write_fairseq`` / ``write_hf``.
``cli`` runs that path and the command line; ``hf_hub`` lets ``XLMModel.from_pretrained`` take ids.
"""

from xlm_fairseq.convert.cli import convert, convert_hf, convert_xlm_pth, export_hf, main, read
from xlm_fairseq.convert.detect import Found, detect_source
from xlm_fairseq.convert.lm import LM, hf_token_to_xlm_word, swap_permutation, xlm_word_to_hf_token
from xlm_fairseq.convert.read_hf import read_hf_dir
from xlm_fairseq.convert.read_ours import read_ours
from xlm_fairseq.convert.read_xlm import read_xlm_pth
from xlm_fairseq.convert.write_fairseq import build_fairseq_model, write_fairseq_dir
from xlm_fairseq.convert.write_hf import write_hf_dir

__all__ = [
    "LM",
    "Found",
    "build_fairseq_model",
    "convert",
    "convert_hf",
    "convert_xlm_pth",
    "detect_source",
    "export_hf",
    "hf_token_to_xlm_word",
    "main",
    "read",
    "read_hf_dir",
    "read_ours",
    "read_xlm_pth",
    "swap_permutation",
    "write_fairseq_dir",
    "write_hf_dir",
    "xlm_word_to_hf_token",
]
