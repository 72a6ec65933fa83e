"""Convert pretrained XLM models to and from xlm_fairseq checkpoints.

::

    python -m xlm_fairseq.convert SRC OUT_DIR [--to fairseq|hf] [--langs en,de] [--codes FILE]
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

One module a job: ``source`` (:class:`XLMSource`, vocabulary order and spelling, checkpoint files),
``from_xlm`` / ``from_hf`` (the readers), ``to_fairseq`` / ``to_hf`` (the writers), ``out_dir``
(refusing and staging OUT_DIR), ``cli`` (what SRC is, the command line).
"""

from preprocess.files import check_out_dir
from xlm_fairseq.convert.cli import convert, convert_hf, convert_xlm_pth, detect_source, main
from xlm_fairseq.convert.from_hf import read_hf_dir
from xlm_fairseq.convert.from_xlm import read_xlm_pth
from xlm_fairseq.convert.source import (
    XLMSource,
    hf_token_to_xlm_word,
    swap_permutation,
    xlm_word_to_hf_token,
)
from xlm_fairseq.convert.to_fairseq import build_fairseq_model, write_fairseq_dir
from xlm_fairseq.convert.to_hf import export_hf

__all__ = [
    "XLMSource",
    "build_fairseq_model",
    "check_out_dir",
    "convert",
    "convert_hf",
    "convert_xlm_pth",
    "detect_source",
    "export_hf",
    "hf_token_to_xlm_word",
    "main",
    "read_hf_dir",
    "read_xlm_pth",
    "swap_permutation",
    "write_fairseq_dir",
    "xlm_word_to_hf_token",
]
