"""Online back-translation for ``--task translation_lm``: XLM's greedy generation of the batch to train
on."""

from typing import Dict

import torch

from xlm_fairseq.data.translation import add_langs
from xlm_fairseq.generation import generate_greedy
from xlm_fairseq.objectives import bare_model


class BackTranslation:
    """Mixed into the translation task: it brings ``cfg``, ``dictionary``, ``langs``, ``bt_steps`` and the
    data loading (``_load``, ``_path``)."""

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
