"""On an accelerator (the meta device here) no forward, no decoding step and no classification count
waits for the device."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default, torch.ops.aten.item.default)


class HostSyncs(TorchDispatchMode):
    """Counts reads of a device tensor's value into Python (``bool(t)``, ``int(t)``, ``.item()``):
    on the meta device they have no value, so each returns False; ``nonzero`` or ``tolist`` (syncs
    too) raise there."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in READS:
            self.count += 1
            return False
        return func(*args, **(kwargs or {}))


def test_no_host_sync_per_forward_or_decoding_step():
    """On an accelerator the forward never waits for the device; greedy decoding asks once per
    GREEDY_SYNC_EVERY steps whether every sentence has finished."""
    from tiny_models import tiny_stack

    from xlm_fairseq.generation import GREEDY_SYNC_EVERY, generate_greedy

    encoder, decoder = tiny_stack().eval().to("meta"), tiny_stack(is_decoder=True).eval().to("meta")
    tokens = torch.randint(4, 50, (6, 12)).to("meta")
    langs = torch.zeros(6, dtype=torch.long, device="meta")
    with HostSyncs() as syncs:
        enc = encoder(tokens, langs=langs)
        positions = torch.arange(12)[None].expand(6, 12).to("meta")  # given positions (TLM's restart)
        decoder(tokens, langs=langs, positions=positions, causal=True, src_enc=enc, src_padding_mask=tokens.eq(1))
    assert syncs.count == 0
    max_len = 40
    with HostSyncs() as syncs, torch.no_grad():
        out, lengths = generate_greedy(decoder, enc, tokens.eq(1), langs, max_len, eos=2)
    assert out.shape == (6, max_len + 1) and out.device.type == "meta"
    assert syncs.count == max_len // GREEDY_SYNC_EVERY


def test_classification_counts_without_host_sync():
    """Rows and hits per row language (``langs``; the model may read the rows with other ids,
    ``--lang-id``), on the meta device: no read of a tensor into Python."""
    from xlm_fairseq.criterions.classification import XLMSentenceClassificationCriterion

    class Task:
        langs = ["en", "de", "fr"]
        target_dictionary = None

    class Scores(torch.nn.Module):
        def forward(self, src_tokens, src_langs):
            return torch.zeros(src_tokens.size(0), 9, device=src_tokens.device), None

    criterion = XLMSentenceClassificationCriterion(Task())
    sample = {
        "net_input": {"src_tokens": torch.ones(5, 7, dtype=torch.long), "src_langs": torch.zeros(5, dtype=torch.long)},
        "langs": torch.tensor([0, 2, 2, 0, 2]),
        "target": torch.tensor([1, 0, 3, 1, 1]),
        "ntokens": 35,
    }
    _, _, log = criterion(Scores(), sample)
    assert [int(log[f"{lang}:rows"]) for lang in Task.langs] == [2, 0, 3]
    assert [int(log[f"{lang}:correct"]) for lang in Task.langs] == [0, 0, 1]  # class 0 everywhere
    meta = {
        "net_input": {k: v.to("meta") for k, v in sample["net_input"].items()},
        "langs": sample["langs"].to("meta"),
        "target": sample["target"].to("meta"),
        "ntokens": 35,
    }
    with HostSyncs() as syncs:
        criterion(Scores(), meta)
    assert syncs.count == 0
