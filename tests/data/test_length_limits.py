"""XLM's --max_len, per side: translation training drops the pairs with a side over it, and TLM
limits each side, not the total."""

import numpy as np
from conftest import setup_task


def test_translation_training_drops_sentences_over_max_len_per_side(data_bin):
    """XLM --max_len 100: AE/BT/MT training sentences with more subwords (</s> not counted) on a side
    are dropped; validation and generation keep everything."""
    from fairseq import utils

    limit = 20
    task, cfg = setup_task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de,ro",
        "--ae-steps",
        "en",
        "--bt-steps",
        "de-en-de",
        "--mt-steps",
        "en-ro",
        "--max-sentence-len",
        limit,
    )
    task.load_dataset("train")
    zipped = task.dataset("train")
    model_max = 512
    itr = task.get_batch_iterator(
        zipped, max_tokens=4000, max_positions=utils.resolve_max_positions(task.max_positions(), model_max)
    )
    seen = {}
    for batch in itr.next_epoch_itr(shuffle=False):
        for key, b in batch.items():
            src = b["net_input"]["src_tokens"].ne(task.dictionary.pad()).sum(1) - 2  # leading and final </s>
            tgt = b["target"].ne(task.dictionary.pad()).sum(1) - 1
            assert src.max() <= limit and tgt.max() <= limit, key
            seen.setdefault(key, set()).update(b["id"].tolist())
    raw = {k: np.asarray(ds.sizes) for k, ds in zipped.datasets.items()}
    for key, sizes in raw.items():
        keep = (sizes <= np.array([limit + 2, limit + 1])).all(axis=1)
        assert 0 < keep.sum() < len(keep), key  # the limit bites on this data
        assert seen[key] == set(np.nonzero(keep)[0].tolist()), key
    task.load_dataset("valid")  # en-ro and de-en, 100 sentences each
    valid = task.dataset("valid")
    itr = task.get_batch_iterator(
        valid, max_tokens=4000, max_positions=utils.resolve_max_positions(task.max_positions(), model_max)
    )
    ids = {}
    for batch in itr.next_epoch_itr(shuffle=False):
        for key, b in batch.items():
            ids.setdefault(key, set()).update(b["id"].tolist())
    assert {k: len(v) for k, v in ids.items()} == {"mt_en-ro": 100, "mt_de-en": 100}
    assert any((np.asarray(ds.sizes) > limit + 2).any() for ds in valid.datasets.values())


def test_tlm_limits_each_side_not_the_total(data_bin):
    task, _ = setup_task(
        data_bin,
        "cross_lingual_lm",
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "en-de",
        "--max-sentence-len",
        40,
        "--tokens-per-sample",
        48,
    )
    task.load_dataset("train")
    tlm = task.dataset("train").datasets["tlm_en-de"].dataset
    src, tgt = np.asarray(tlm.src.sizes) - 1, np.asarray(tlm.tgt.sizes) - 1
    assert len(tlm) == int(((src <= 40) & (tgt <= 40)).sum())
    assert tlm.sizes.max() > 48, "pairs longer than a stream block are kept (XLM limits each side)"
