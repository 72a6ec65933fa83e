"""Online back-translation for ``--task translation_lm``: XLM's greedy generation of the batch to train
on, and (``--bt-vocab-min-share``) the words each language's back-translations may be written with."""

import logging
from collections import OrderedDict
from typing import Dict

import torch
from fairseq.data import indexed_dataset

from preprocess.binarize import count_dataset_ids
from xlm_fairseq.data.translation import add_langs, words_of_each_language
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.generation import generate_greedy
from xlm_fairseq.objectives import bare_model

logger = logging.getLogger(__name__)


class BackTranslation:
    """Mixed into the translation task: it brings ``cfg``, ``dictionary``, ``langs``, ``bt_steps`` and the
    data loading (``_load``, ``_path``), and sets ``bt_word_bias`` (target language id -> output bias)."""

    def back_translate(self, model, batch, src_lang_id: int, mid_lang_id: int) -> Dict:
        """XLM's online BT: greedy translation src->mid with the model in eval mode and no gradient;
        returns the training batch mid->src (generated sentences as source, originals as target).

        Decoding is the model's own greedy loop (XLM's ``generate``): XLM's length limit
        int(a * L + b) with L the longest source of the batch (its two ``</s>`` counted), which
        holds the two ``</s>`` of the output too, so at most int(a * L + b) - 2 words; an empty
        translation is allowed, as in XLM. The same words as fairseq-generate --beam 1 --min-len 0
        --max-len-a a --max-len-b (b - 2), without a beam search's bookkeeping."""
        model = bare_model(model)
        was_training = model.training
        model.eval()
        net_input = batch["net_input"]
        src_tokens = net_input["src_tokens"]
        max_len = min(
            int(self.cfg.bt_max_len_a * src_tokens.size(1) + self.cfg.bt_max_len_b) - 2,
            model.max_decoder_positions() - 1,
        )
        with torch.inference_mode():
            encoder_out = model.encoder(src_tokens, src_langs=net_input["src_langs"])
            mid_langs = torch.full((src_tokens.size(0),), mid_lang_id, dtype=torch.long, device=src_tokens.device)
            tokens, lengths = generate_greedy(
                model.decoder.transformer,
                encoder_out["encoder_out"][0],
                encoder_out["encoder_padding_mask"][0],
                mid_langs,
                max_len,
                self.dictionary.eos(),
                word_bias=self.bt_word_bias.get(mid_lang_id),
            )
        model.train(was_training)
        # the batch mid -> src, built where the model is: </s> + each translation as source (one read
        # of the longest length per batch trims the padding), the original sentences as target
        eos_column = tokens.new_full((tokens.size(0), 1), self.dictionary.eos())
        source = torch.cat([eos_column, tokens[:, : int(lengths.max())]], dim=1)
        new = {
            "id": batch["id"],
            "nsentences": batch["nsentences"],
            "ntokens": batch["ntokens"],
            "net_input": {
                "src_tokens": source,
                "src_lengths": lengths + 1,
                "prev_output_tokens": net_input["prev_output_tokens"],
            },
            "target": batch["target"],
        }
        return add_langs(new, mid_lang_id, src_lang_id)

    def _bt_words(self, split, epoch):
        """--bt-vocab-min-share: each back-translation target's open words, from every language's text."""
        counts, n_words = {}, len(self.dictionary)
        for lang in self.langs:
            path = self._path(split, lang, epoch)
            if indexed_dataset.dataset_exists(path, impl="mmap"):  # read in blocks, not loaded as a dataset
                counts[self.lang2id[lang]] = count_dataset_ids(path, n_words)
        keep = [self.dictionary.eos(), self.dictionary.unk()]
        self.bt_word_bias = words_of_each_language(counts, self.cfg.bt_vocab_min_share, keep)
        for _, mid, _ in self.bt_steps:
            if self.lang2id[mid] not in self.bt_word_bias:
                raise XLMUserError(
                    f"--bt-vocab-min-share: no {split} text of '{mid}' ({self._path(split, mid, epoch)}.bin) "
                    "to tell its words by"
                )
        for lang in OrderedDict.fromkeys(mid for _, mid, _ in self.bt_steps):
            closed = int(torch.isinf(self.bt_word_bias[self.lang2id[lang]]).sum())
            logger.info(f"back-translation into {lang}: {closed} of {n_words} words closed (--bt-vocab-min-share)")
