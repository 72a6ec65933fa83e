"""The objectives of ``--task translation_lm`` (XLM's names): denoising auto-encoding (``--ae-steps en``),
online back-translation (``--bt-steps en-de-en``) and supervised translation (``--mt-steps en-de``), each
family weighed by its ``--lambda-ae/-bt/-mt`` schedule and registered in that order (the order of the
task's data). Training pairs with a side over ``--max-sentence-len`` subwords are dropped (XLM's --max_len)."""

from dataclasses import dataclass, field
from typing import Dict

import torch

from xlm_fairseq.data.translation import NoisyDataset, add_langs, pair_dataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.generation import generate_greedy
from xlm_fairseq.models.base import bare_model
from xlm_fairseq.objectives.base import Built, MissingData, Objective, register_objective

SCHEDULE_HELP = "a number or a schedule like 0:1,100000:0.1,300000:0"


@dataclass
class AEOptions:
    ae_steps: str = field(default="", metadata={"help": "denoising auto-encoding on these languages, e.g. en,de"})
    lambda_ae: str = field(default="1", metadata={"help": f"AE weight: {SCHEDULE_HELP}"})
    word_shuffle: float = field(default=3.0, metadata={"help": "AE noise: local shuffle distance k (0: off)"})
    word_dropout: float = field(default=0.1, metadata={"help": "AE noise: token dropout probability"})
    word_blank: float = field(default=0.1, metadata={"help": "AE noise: token blanking probability"})


@dataclass
class BTOptions:
    bt_steps: str = field(default="", metadata={"help": "online back-translation, e.g. en-de-en,de-en-de"})
    lambda_bt: str = field(default="1", metadata={"help": f"BT weight: {SCHEDULE_HELP}"})
    bt_max_len_a: float = field(
        default=1.3,
        metadata={"help": "back-translation length limit int(a * L + b), L and the limit counting both </s> (XLM's)"},
    )
    bt_max_len_b: int = field(default=5, metadata={"help": "back-translation length limit: see --bt-max-len-a"})


@dataclass
class MTOptions:
    mt_steps: str = field(default="", metadata={"help": "supervised translation on parallel data, e.g. en-ro,ro-en"})
    lambda_mt: str = field(default="1", metadata={"help": f"MT weight: {SCHEDULE_HELP}"})


class TranslationObjective(Objective):
    task_name = "translation_lm"

    def built(self, split, dataset, path, drawing=()) -> Built:
        n = self.context.max_sentence_len  # sizes count the </s> (and the source's leading </s>)
        return Built(dataset, path, len(dataset), list(drawing), (n + 2, n + 1) if split == "train" else None)


@register_objective
class DenoisingAutoEncoding(TranslationObjective):
    """XLM's AE: a sentence with noise in (shuffle within k, drop, blank), the sentence out."""

    family, option, Options, weight_option, draw, loop_order = "ae", "ae_steps", AEOptions, "lambda_ae", "each", 50

    def build(self, split, epoch=1):
        context, options = self.context, self.options
        mono, path = self.monolingual(split, epoch)
        # its draws depend on the zip's round
        noisy = NoisyDataset(
            mono,
            context.dictionary.eos(),
            context.mask_idx,
            options.word_shuffle,
            options.word_dropout,
            options.word_blank,
            context.seed,
        )
        lang_id = context.lang2id[self.source]
        return self.built(split, pair_dataset(context.dictionary, noisy, mono, lang_id, lang_id), path, [noisy])


@register_objective
class BackTranslation(TranslationObjective):
    """Online back-translation ``a-b-a``: the data are sentences of a; :meth:`prepare` translates them
    into b with the model being trained and gives the batch b -> a to train on."""

    family, option, Options, weight_option, n_langs, draw = "bt", "bt_steps", BTOptions, "lambda_bt", 3, "each"
    loop_order = 70

    def check(self):
        a, b, c = self.langs
        if a != c or a == b:
            raise XLMUserError(f"--bt-steps: '{a}-{b}-{c}' must go out and back (like en-de-en)")

    def build(self, split, epoch=1):
        context, (a, b, _) = self.context, self.langs
        mono, path = self.monolingual(split, epoch)  # the batch to translate a -> b; the one trained on comes later
        pairs = pair_dataset(context.dictionary, mono, mono, context.lang2id[a], context.lang2id[b])
        return self.built(split, pairs, path)

    def prepare(self, model, batch):
        a, b, _ = self.langs
        context, options = self.context, self.options
        return back_translate(
            model,
            batch,
            context.lang2id[a],
            context.lang2id[b],
            context.dictionary.eos(),
            options.bt_max_len_a,
            options.bt_max_len_b,
        )


@register_objective
class MachineTranslation(TranslationObjective):
    family, option, Options, weight_option, n_langs, loop_order = "mt", "mt_steps", MTOptions, "lambda_mt", 2, 60

    def check(self):
        if self.source == self.target:
            raise XLMUserError(f"--mt-steps: '{'-'.join(self.langs)}' translates a language into itself")

    def build(self, split, epoch=1):
        context, (a, b) = self.context, self.langs
        source, target, path = context.pair_datasets(split, a, b, epoch)
        if source is None:
            raise MissingData(path, f"no parallel {split} data for {a}-{b} (looked for {path}.bin)")
        pairs = pair_dataset(context.dictionary, source, target, context.lang2id[a], context.lang2id[b])
        return self.built(split, pairs, path)


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
