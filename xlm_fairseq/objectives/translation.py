"""The objectives of ``--task translation_lm`` (XLM's names): denoising auto-encoding (``--ae-steps en``),
supervised translation (``--mt-steps en-de``) and online back-translation (``--bt-steps en-de-en``), each
family weighed by its ``--lambda-ae/-mt/-bt`` schedule. Training pairs with a side over
``--max-sentence-len`` subwords are dropped (XLM's --max_len)."""

from typing import Dict

import torch

from xlm_fairseq.data.translation import NoisyDataset, add_langs, pair_dataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.generation import generate_greedy
from xlm_fairseq.objectives.base import Built, MissingData, Objective, register_objective
from xlm_fairseq.objectives.schedule import bare_model


class TranslationObjective(Objective):
    def built(self, split, dataset, path, drawing=()) -> Built:
        n = self.task.cfg.max_sentence_len  # sizes count the </s> (and the source's leading </s>)
        return Built(dataset, path, len(dataset), list(drawing), (n + 2, n + 1) if split == "train" else None)


@register_objective
class DenoisingAutoEncoding(TranslationObjective):
    """XLM's AE: a sentence with noise in (shuffle within k, drop, blank), the sentence out."""

    family, option, weight_option, draw, loop_order = "ae", "ae_steps", "lambda_ae", "each", 50

    def build(self, split, epoch=1):
        task, cfg = self.task, self.task.cfg
        mono, path = self.monolingual(split, epoch)
        # its draws depend on the zip's round
        noisy = NoisyDataset(
            mono, task.dictionary.eos(), task.mask_idx, cfg.word_shuffle, cfg.word_dropout, cfg.word_blank, cfg.seed
        )
        lang_id = task.lang2id[self.source]
        return self.built(split, pair_dataset(task.dictionary, noisy, mono, lang_id, lang_id), path, [noisy])


@register_objective
class MachineTranslation(TranslationObjective):
    family, option, weight_option, n_langs, loop_order = "mt", "mt_steps", "lambda_mt", 2, 60

    def check(self):
        if self.source == self.target:
            raise XLMUserError(f"--mt-steps: '{'-'.join(self.langs)}' translates a language into itself")

    def build(self, split, epoch=1):
        task, (a, b) = self.task, self.langs
        source, target, path = task.pair_datasets(split, a, b, epoch)
        if source is None:
            raise MissingData(path, f"no parallel {split} data for {a}-{b} (looked for {path}.bin)")
        return self.built(split, pair_dataset(task.dictionary, source, target, task.lang2id[a], task.lang2id[b]), path)


@register_objective
class BackTranslation(TranslationObjective):
    """Online back-translation ``a-b-a``: the data are sentences of a; :meth:`prepare` translates them
    into b with the model being trained and gives the batch b -> a to train on."""

    family, option, weight_option, n_langs, draw, loop_order = "bt", "bt_steps", "lambda_bt", 3, "each", 70

    def check(self):
        a, b, c = self.langs
        if a != c or a == b:
            raise XLMUserError(f"--bt-steps: '{a}-{b}-{c}' must go out and back (like en-de-en)")

    def build(self, split, epoch=1):
        task, (a, b, _) = self.task, self.langs
        mono, path = self.monolingual(split, epoch)  # the batch to translate a -> b; the one trained on comes later
        return self.built(split, pair_dataset(task.dictionary, mono, mono, task.lang2id[a], task.lang2id[b]), path)

    def prepare(self, model, batch):
        a, b, _ = self.langs
        task = self.task
        return back_translate(
            model,
            batch,
            task.lang2id[a],
            task.lang2id[b],
            task.dictionary.eos(),
            task.cfg.bt_max_len_a,
            task.cfg.bt_max_len_b,
        )


def back_translate(
    model, batch, src_lang_id: int, mid_lang_id: int, eos: int, max_len_a: float, max_len_b: int
) -> Dict:
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
    max_len = min(int(max_len_a * src_tokens.size(1) + max_len_b) - 2, model.max_decoder_positions() - 1)
    with torch.inference_mode():
        encoder_out = model.encoder(src_tokens, src_langs=net_input["src_langs"])
        mid_langs = torch.full((src_tokens.size(0),), mid_lang_id, dtype=torch.long, device=src_tokens.device)
        tokens, lengths = generate_greedy(
            model.decoder.transformer,
            encoder_out["encoder_out"][0],
            encoder_out["encoder_padding_mask"][0],
            mid_langs,
            max_len,
            eos,
        )
    model.train(was_training)
    # the batch mid -> src, built where the model is: </s> + each translation as source (one read
    # of the longest length per batch trims the padding), the original sentences as target
    eos_column = tokens.new_full((tokens.size(0), 1), eos)
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
