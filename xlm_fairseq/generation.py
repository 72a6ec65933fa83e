"""Decoding loops over the XLM stacks: greedy (XLM's ``generate``, for online back-translation: no beam
search's bookkeeping) and fairseq's beam search, which ``--task translation_lm`` generates with."""

import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.search import BeamSearch
from fairseq.sequence_generator import SequenceGenerator
from torch import Tensor

from xlm_fairseq.models.fairseq_interfaces import XLMDecoder
from xlm_fairseq.modules.attention import BeamKVCache, KVCache
from xlm_fairseq.modules.transformer import XLMTransformer

GREEDY_SYNC_EVERY = 8  # decoding steps on an accelerator between two "all finished?" checks
OUTPUT_COLUMNS_MULTIPLE = 8  # the decoding steps' output layer is padded to a multiple of this many words


def padded_output_layer(decoder: XLMTransformer) -> Tuple[Tensor, Tensor]:
    """The decoder's output layer (weight, bias) with words added up to a multiple of 8: weight 0 and bias
    -inf, so never chosen. On CPU a GEMM with 4,011 output columns (the recipes' vocabulary) runs ~30 %
    slower than with 4,016 (fairseq-preprocess pads dictionaries to a multiple of 8 for the same reason).
    The real words' scores are the same numbers."""
    proj = decoder.pred_layer.proj
    n_words = proj.out_features
    extra = -n_words % OUTPUT_COLUMNS_MULTIPLE
    if not extra:
        return proj.weight, proj.bias
    return F.pad(proj.weight, (0, 0, 0, extra)), F.pad(proj.bias, (0, extra), value=-math.inf)


def best_words(scores: Tensor) -> Tensor:
    """``scores.argmax(-1)`` (the first of equal maxima, as torch's); on CPU by numpy's vectorised argmax,
    which takes a fraction of torch's time there (bench/README.md)."""
    if scores.device.type != "cpu":
        return scores.argmax(-1)
    return torch.from_numpy(scores.float().numpy().argmax(-1))


@torch.inference_mode()
def generate_greedy(
    decoder: XLMTransformer,
    src_enc: Tensor,
    src_padding_mask: Tensor,
    tgt_langs: Tensor,
    max_len: int,
    eos: int,
    min_len: int = 0,
    shrink: Optional[bool] = None,
) -> Tuple[Tensor, Tensor]:
    """Greedy translation by ``decoder`` (a decoder stack) of the encoder output ``src_enc``.

    At most ``max_len`` words, then ``</s>``; ``</s>`` may come first (an empty sentence, as in XLM)
    unless ``min_len`` is 1; ``<pad>`` is never chosen (here it would be hidden as padding). Token for
    token what fairseq's SequenceGenerator gives at beam 1 with the same ``--min-len`` and a length
    limit of ``max_len``. Keys/values live in one :class:`KVCache` sized for ``max_len`` steps. On CPU
    finished sentences leave the batch; on an accelerator the batch keeps its shape and is asked
    whether all have finished every ``GREEDY_SYNC_EVERY`` steps only, so that steps do not wait for
    the device (``shrink`` chooses otherwise). Returns (B x (max_len + 1) tokens: each sentence's
    words, ``</s>``, then ``<pad>``; B lengths, ``</s>`` included)."""
    pad = decoder.pad_index
    bs = src_enc.size(0)
    device = src_enc.device
    shrink = device.type == "cpu" if shrink is None else shrink
    out = torch.full((bs, max_len + 1), pad, dtype=torch.long, device=device)
    lengths = torch.full((bs,), max_len + 1, dtype=torch.long, device=device)
    finished = torch.zeros(bs, dtype=torch.bool, device=device)
    alive = torch.arange(bs, device=device)
    cache = KVCache(capacity=max_len)
    word = torch.full((bs, 1), eos, dtype=torch.long, device=device)
    output_weight, output_bias = padded_output_layer(decoder)
    for step in range(max_len + 1):
        if step == max_len:
            if shrink:
                out[alive, step] = eos
            else:
                out[:, step] = out[:, step].fill_(eos).masked_fill(finished, pad)
            break
        x = decoder(word, langs=tgt_langs, causal=True, src_enc=src_enc, src_padding_mask=src_padding_mask, cache=cache)
        scores = F.linear(x[:, -1], output_weight, output_bias)
        scores[:, pad] = -math.inf
        if step < min_len:
            scores[:, eos] = -math.inf
        word = best_words(scores)
        if not shrink:
            word = word.masked_fill(finished, pad)
            out[:, step] = word
            ended = word.eq(eos)
            lengths = lengths.masked_fill(ended, step + 1)
            finished = finished | ended
            if (step + 1) % GREEDY_SYNC_EVERY == 0 and finished.all():
                break
            word = word[:, None]
            continue
        out[alive, step] = word
        done = word.eq(eos)
        if done.any():
            lengths[alive[done]] = step + 1
            keep = (~done).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            alive, word, tgt_langs = alive[keep], word[keep], tgt_langs[keep]
            src_enc, src_padding_mask = src_enc[keep], src_padding_mask[keep]
            cache.select(keep)
        word = word[:, None]
    return out, lengths


@torch.inference_mode()
def beam_search(
    decoder: XLMTransformer,
    src_enc: Tensor,
    src_padding_mask: Tensor,
    tgt_langs: Tensor,
    beam: int,
    max_len: int,
    min_len: int,
    eos: int,
    unk: int,
    unk_penalty: float = 0.0,
    temperature: float = 1.0,
    normalize_scores: bool = True,
    len_penalty: float = 1.0,
) -> List[List[Dict[str, Tensor]]]:
    """fairseq's beam search (``SequenceGenerator`` with ``search.BeamSearch``), hypothesis for hypothesis
    (scores equal up to float rounding), as one loop over the decoder stack: no ensemble wrapper,
    incremental-state dicts or per-step reordering of the source. Each sentence's ``beam`` hypotheses read
    its one source row (``MultiHeadAttention`` groups their queries); the self-attention cache (one
    :class:`BeamKVCache`, sized for every step) follows the hypotheses by their ancestry, without moving
    their keys and values. The rules are fairseq's: 2 x beam candidates a step, the
    first ``beam`` of them that end in ``</s>`` finished (score / length^len_penalty), the first ``beam``
    others kept; a sentence leaves once it has ``beam`` finished hypotheses, or at ``max_len``. Returns
    per sentence its hypotheses, best first, as fairseq's dicts (tokens, score, positional_scores)."""
    pad, device = decoder.pad_index, src_enc.device
    bsz = src_enc.size(0)
    cand_size = 2 * beam
    tokens = torch.full((bsz * beam, max_len + 2), pad, dtype=torch.long, device=device)
    tokens[:, 0] = eos
    scores = torch.zeros(bsz * beam, max_len + 1, device=device)  # each hypothesis' running total
    langs = tgt_langs.repeat_interleave(beam)
    finalized: List[List[Dict[str, Tensor]]] = [[] for _ in range(bsz)]
    sentence_of = list(range(bsz))  # batch row -> the sentence it decodes
    cand_offsets = torch.arange(cand_size, device=device)
    row_offsets = torch.arange(bsz, device=device)[:, None] * beam  # each sentence's first hypothesis row
    cache = BeamKVCache(beam, capacity=max_len + 1)
    output_weight, output_bias = padded_output_layer(decoder)
    n_words = decoder.pred_layer.proj.out_features
    for step in range(max_len + 1):
        x = decoder(
            tokens[:, step : step + 1],
            langs=langs,
            causal=True,
            src_enc=src_enc,
            src_padding_mask=src_padding_mask,
            cache=cache,
        )
        logits = F.linear(x[:, -1], output_weight, output_bias)
        if temperature != 1.0:
            logits = logits.div_(temperature)
        lprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float32)
        lprobs.nan_to_num_(nan=-math.inf, posinf=math.inf, neginf=-math.inf)
        lprobs[:, pad] = -math.inf
        if unk_penalty:
            lprobs[:, unk] -= unk_penalty
        if step >= max_len:
            lprobs[:, :eos] = -math.inf
            lprobs[:, eos + 1 :] = -math.inf
        elif step < min_len:
            lprobs[:, eos] = -math.inf
        vocab = lprobs.size(-1)  # with the padding words
        if step == 0:  # all of a sentence's hypotheses are the same: candidates from the first
            totals = lprobs.view(bsz, beam, vocab)[:, 0]
        else:
            totals = (lprobs.view(bsz, beam, vocab) + scores.view(bsz, beam, -1)[:, :, step - 1, None]).view(bsz, -1)
        cand_scores, cand_indices = totals.topk(min(cand_size, totals.size(1) // vocab * n_words - 1))  # fairseq's k
        cand_beams, cand_words = cand_indices // vocab, cand_indices % vocab
        if vocab > n_words:  # only a hypothesis whose every score is -inf (NaN logits) goes on with a -inf word:
            cand_words.masked_fill_(cand_words.ge(n_words), pad)  # <pad> then, not a padding word, as fairseq may
        ends = cand_words.eq(eos) & cand_scores.ne(-math.inf)
        ending = ends[:, :beam]  # only the first `beam` candidates may finish
        done: List[int] = []
        if ending.any():
            rows = (cand_beams[:, :beam] + row_offsets)[ending]
            done = _finalize(
                step,
                rows,
                cand_scores[:, :beam][ending],
                tokens,
                scores,
                beam,
                eos,
                sentence_of,
                finalized,
                max_len,
                normalize_scores,
                len_penalty,
            )
        if len(done) == bsz:
            break
        assert step < max_len
        cache_offsets = row_offsets  # the cache keeps the batch's rows until it is reordered below
        if done:  # finished sentences leave the batch
            kept = torch.arange(bsz, device=device)
            kept = kept[~torch.isin(kept, torch.tensor(done, device=device))]
            ends, cand_beams, cand_words = ends[kept], cand_beams[kept], cand_words[kept]
            cand_scores = cand_scores[kept]
            scores = scores.view(bsz, -1)[kept].view(kept.numel() * beam, -1)
            tokens = tokens.view(bsz, -1)[kept].view(kept.numel() * beam, -1)
            src_enc, src_padding_mask = src_enc[kept], src_padding_mask[kept]
            langs = langs.view(bsz, beam)[kept].view(-1)
            sentence_of = [sentence_of[i] for i in kept.tolist()]
            bsz = kept.numel()
            cache_offsets, row_offsets = row_offsets[kept], row_offsets[:bsz]
        # the first `beam` candidates not ending here go on; there are always that many (see the vocabulary
        # size in XLMSequenceGenerator.runs_own_loop: fairseq's cands_to_ignore stays empty)
        active = torch.topk(ends.long() * cand_size + cand_offsets[: ends.size(1)], beam, largest=False)[1]
        parents = cand_beams.gather(1, active)
        rows = (parents + row_offsets).view(-1)
        tokens[:, : step + 1] = tokens[:, : step + 1].index_select(0, rows)
        tokens.view(bsz, beam, -1)[:, :, step + 1] = cand_words.gather(1, active)
        if step > 0:
            scores[:, :step] = scores[:, :step].index_select(0, rows)
        scores.view(bsz, beam, -1)[:, :, step] = cand_scores.gather(1, active)
        cache.select((parents + cache_offsets).view(-1))
    for sentence, hypos in enumerate(finalized):  # best first, ordered as fairseq orders them
        order = torch.sort(torch.tensor([float(h["score"].item()) for h in hypos]), descending=True)[1]
        finalized[sentence] = [hypos[i] for i in order]
    return finalized


def _finalize(step, rows, end_scores, tokens, scores, beam, eos, sentence_of, finalized, max_len, normalize, lenpen):
    """Hypotheses ``rows`` end with ``</s>`` at ``step``: keep them (fairseq's ``finalize_hypos``). Returns
    the batch rows of the sentences that are now done."""
    words = tokens.index_select(0, rows)[:, 1 : step + 2]
    words[:, step] = eos
    positional = scores.index_select(0, rows)[:, : step + 1]
    positional[:, step] = end_scores
    positional[:, 1:] = positional[:, 1:] - positional[:, :-1]
    if normalize:
        end_scores /= (step + 1) ** lenpen
    batch_rows = (rows // beam).tolist()
    for i, b in enumerate(batch_rows):
        hypos = finalized[sentence_of[b]]
        if len(hypos) < beam:
            hypos.append(
                {
                    "tokens": words[i],
                    "score": end_scores[i],
                    "attention": torch.empty(0),
                    "alignment": torch.empty(0),
                    "positional_scores": positional[i],
                }
            )
    return [b for b in sorted(set(batch_rows)) if len(finalized[sentence_of[b]]) == beam or step == max_len]


class XLMSequenceGenerator(SequenceGenerator):
    """fairseq's ``SequenceGenerator``; its plain beam search (one XLM model, ``search.BeamSearch``, no
    prefix, constraints, LM fusion, n-gram blocking or alignment) runs :func:`beam_search`, everything
    else fairseq's own loop. What ``--task translation_lm`` builds for fairseq-generate / -interactive
    and the hub."""

    def runs_own_loop(self, sample, prefix_tokens=None, constraints=None, bos_token=None) -> bool:
        return (
            type(self.search) is BeamSearch
            and self.vocab_size >= 2 * self.beam_size + 3  # finite candidates to go on with at every step
            and self.model.models_size == 1
            and isinstance(getattr(self.model.single_model, "decoder", None), XLMDecoder)
            and prefix_tokens is None
            and constraints is None
            and bos_token is None
            and self.lm_model is None
            and not self.match_source_len
            and self.repeat_ngram_blocker is None
            and getattr(self, "token_indices_to_suppress", None) is None
            and "tgt_langs" in sample["net_input"]
        )

    def _generate(self, sample, prefix_tokens=None, constraints=None, bos_token=None):
        if not self.runs_own_loop(sample, prefix_tokens, constraints, bos_token):
            return super()._generate(sample, prefix_tokens, constraints, bos_token)
        net_input = sample["net_input"]
        model = self.model.single_model
        src_tokens = net_input["src_tokens"]
        max_len = min(int(self.max_len_a * src_tokens.size(1) + self.max_len_b), self.max_len - 1)
        assert self.min_len <= max_len, "min_len cannot be larger than max_len, please adjust these!"
        encoder_out = model.encoder.forward_torchscript(net_input)
        return beam_search(
            model.decoder.transformer,
            encoder_out["encoder_out"][0],
            encoder_out["encoder_padding_mask"][0],
            net_input["tgt_langs"],
            beam=self.beam_size,
            max_len=max_len,
            min_len=self.min_len,
            eos=self.eos,
            unk=self.unk,
            unk_penalty=self.unk_penalty,
            temperature=self.temperature,
            normalize_scores=self.normalize_scores,
            len_penalty=self.len_penalty,
        )
