"""Checkpoints written before the redesign of #34 still load and translate token for token as they
did. ``data/made_before_34/unmt.pt`` is a tiny UNMT checkpoint (16 dims, 1 layer, 2 updates: its
outputs are degenerate, which makes long decodes) trained by commit 89b2d27, with the optimiser
state dropped; ``expected.json`` holds what that commit's hub translated with it. Its state dict
has no ``_extra_state`` (the language list a checkpoint now carries) and the old KV-cache protocol
made those outputs: this is the guard on both."""

import json
from pathlib import Path

import pytest

import xlm_fairseq  # noqa: F401
from xlm_fairseq import XLMModel

OLD = Path(__file__).resolve().parent / "data" / "made_before_34"


@pytest.fixture(scope="module")
def old_model():
    return XLMModel.from_pretrained(str(OLD), checkpoint_file="unmt.pt")


@pytest.mark.parametrize("beam", ["1", "5"])
def test_old_translation_checkpoint_translates_as_before(old_model, beam):
    expected = json.loads((OLD / "expected.json").read_text(encoding="utf-8"))
    assert old_model.translate(expected["src"], src="de", tgt="en", beam=int(beam)) == expected["de-en"][beam]


def test_old_checkpoint_has_no_language_list_and_new_ones_do(old_model, tmp_path):
    """An old state dict loads without the list (nothing to check); saved again it carries it."""
    from fairseq.checkpoint_utils import torch_persistent_save

    from xlm_fairseq import checkpoints

    state = checkpoints.load(str(OLD / "unmt.pt"))
    assert "_extra_state" not in state["model"]
    carried = old_model.models[0].state_dict()["_extra_state"]
    assert "".join(map(chr, carried.tolist())) == "de,en,ro"
    expected = json.loads((OLD / "expected.json").read_text(encoding="utf-8"))
    state["model"] = old_model.models[0].state_dict()
    torch_persistent_save(state, str(tmp_path / "model.pt"))
    again = XLMModel.from_pretrained(str(tmp_path))
    assert again.translate(["Click OK."], src="en", tgt="ro", beam=1) == expected["en-ro"]["1"]
