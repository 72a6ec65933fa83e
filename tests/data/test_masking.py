"""Which tokens MLM predicts and draws, as XLM's mask_out and its evaluator do, on a real fairseq
Dictionary and real token streams of the shipped Debian sample (data-bin made by preprocess/)."""

import pytest
import torch

from xlm_fairseq.data import MaskedLMConfig, mask_tokens, stream_dataset


def _blocks(data_bin, dictionary, n_blocks=300, block=256):
    from fairseq.data import data_utils

    mono = data_utils.load_indexed_dataset(str(data_bin / "train.en"), dictionary)
    stream = stream_dataset(mono, block, dictionary.pad(), dictionary.eos())
    return torch.stack([stream[i] for i in range(n_blocks)])


@pytest.fixture(scope="module")
def dictionary(data_bin):
    from xlm_fairseq.data.data_bin import load_data_bin_dictionary as load_dictionary

    return load_dictionary(str(data_bin))


def _specials(dictionary):
    ids = [i for i, sym in enumerate(dictionary.symbols) if i < dictionary.nspecial or sym.startswith("<special")]
    assert len(ids) == 4 + 10
    return torch.tensor(ids)


def test_alpha_0_predicts_sentence_boundaries_like_words(data_bin, dictionary):
    """XLM's mask_out at --sample-alpha 0 (its default): every non-pad token but a block's first is
    predicted with probability 0.15, so </s> (4-8 % of a real stream) is predicted as often as a
    word and makes up the same share of the targets."""
    tokens = _blocks(data_bin, dictionary)
    eos = dictionary.eos()
    candidates = tokens[:, 1:][tokens[:, 1:].ne(dictionary.pad())]
    eos_share = candidates.eq(eos).float().mean().item()
    assert 0.02 < eos_share < 0.1, eos_share
    cfg = MaskedLMConfig.from_dictionary(dictionary, dictionary.index("<special1>"))
    inputs, pred_mask, targets = mask_tokens(tokens, cfg, torch.Generator().manual_seed(0))
    assert not pred_mask[:, 0].any(), "the first position of a block is never predicted (XLM)"
    assert abs(len(targets) / len(candidates) - 0.15) < 0.005
    predicted_eos = targets.eq(eos).float().mean().item()
    assert abs(predicted_eos - eos_share) < 0.006, (predicted_eos, eos_share)
    # those </s> are hidden like words: 80 % of them show the mask token
    shown = inputs[pred_mask][targets.eq(eos)]
    assert abs(shown.eq(cfg.mask_idx).float().mean().item() - 0.8) < 0.05


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_special_symbols_are_not_predicted_at_alpha(data_bin, dictionary, alpha):
    """At --sample-alpha > 0 XLM's specials weigh 0 (count 0; fairseq's Dictionary counts its four
    as 1, which under count^-alpha would make them the likeliest targets)."""
    assert dictionary.count[dictionary.eos()] == 1 and dictionary.count[dictionary.pad()] == 1  # fairseq's own counts
    tokens = _blocks(data_bin, dictionary)
    cfg = MaskedLMConfig.from_dictionary(dictionary, dictionary.index("<special1>"), sample_alpha=alpha)
    _, pred_mask, targets = mask_tokens(tokens, cfg, torch.Generator().manual_seed(0))
    assert not torch.isin(targets, _specials(dictionary)).any(), "a special symbol was predicted"
    assert not pred_mask[:, 0].any()
    assert abs(len(targets) / int(tokens.ne(dictionary.pad()).sum()) - 0.15) < 0.01


def test_random_replacement_draws(data_bin, dictionary):
    """XLM draws the 10 % random replacements from the whole vocabulary (special symbols included);
    never <pad> here, which this model hides from attention as padding where XLM attends to it."""
    tokens = _blocks(data_bin, dictionary, n_blocks=100)
    cfg = MaskedLMConfig.from_dictionary(dictionary, dictionary.index("<special1>"), mask_keep_rand=(0.0, 0.0, 1.0))
    inputs, pred_mask, _ = mask_tokens(tokens, cfg, torch.Generator().manual_seed(0))
    drawn = inputs[pred_mask]
    assert len(drawn) > 3000
    assert not inputs.eq(dictionary.pad()).any()
    assert torch.isin(drawn, _specials(dictionary)).any(), "special symbols are drawn too (XLM)"
    assert len(set(drawn.tolist())) > 0.5 * len(dictionary)


def test_evaluation_mask_is_xlms_evaluator(data_bin, dictionary):
    """XLM's evaluator (valid_{lang}_mlm_ppl): positions with rand <= 0.15, never a row's first or
    last token, at least one per row, special symbols included; the same draw every time."""
    from xlm_fairseq.data.masking import eval_pred_mask

    tokens = _blocks(data_bin, dictionary, n_blocks=200, block=32)
    tokens[-1, 5:] = dictionary.pad()  # a short last block, as a stream's end
    tokens[-2, 3:] = dictionary.pad()  # a row too short to draw from by chance: one forced position
    lengths = tokens.ne(dictionary.pad()).sum(1)
    masks = [eval_pred_mask(tokens, dictionary.pad(), 0.15, torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(masks[0], masks[1])
    pred = masks[0]
    assert not pred[:, 0].any()
    assert not pred[torch.arange(len(tokens)), lengths - 1].any(), "a row's last token is never predicted"
    assert not pred[tokens.eq(dictionary.pad())].any()
    assert pred.any(1).all(), "every row predicts something"
    assert pred[-2].nonzero().flatten().tolist() == [1]
    inner = int((lengths - 2).clamp(min=0).sum())
    assert abs(int(pred.sum()) / inner - 0.15) < 0.02
    assert tokens[pred].eq(dictionary.eos()).any(), "</s> is scored like a word"
