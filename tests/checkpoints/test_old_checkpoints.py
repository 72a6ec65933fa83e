"""Checkpoints written before the redesign of #34 still load and translate token for token as they
did. ``data/made_before_34/unmt.pt`` is a tiny UNMT checkpoint (16 dims, 1 layer, 2 updates: its
outputs are degenerate, which makes long decodes) trained by commit 89b2d27, with the optimiser
state dropped; ``expected.json`` holds what that commit's hub translated with it. Its state dict
names its languages only in its config (checkpoints now keep the list in ``task_state``) and the
old KV-cache protocol made those outputs: this is the guard on both."""

import json
from pathlib import Path

import pytest
import torch

import xlm_fairseq  # noqa: F401
from xlm_fairseq import XLMModel

OLD = Path(__file__).resolve().parent / "made_before_34"


@pytest.fixture(scope="module")
def old_model():
    return XLMModel.from_pretrained(str(OLD), checkpoint_file="unmt.pt")


@pytest.mark.parametrize("beam", ["1", "5"])
def test_old_translation_checkpoint_translates_as_before(old_model, beam):
    expected = json.loads((OLD / "expected.json").read_text(encoding="utf-8"))
    assert old_model.translate(expected["src"], src="de", tgt="en", beam=int(beam)) == expected["de-en"][beam]


def test_the_language_list_is_stored_once_and_read_from_old_checkpoints_config(old_model, tmp_path):
    """The old checkpoint names its languages only in its config: fairseq's reader puts them in its
    task_state (the one store) and hands them to the model with its weights. A model's state dict
    never carries them; saved again, the checkpoint loads and translates as before."""
    from fairseq import checkpoint_utils
    from fairseq.checkpoint_utils import torch_persistent_save

    from xlm_fairseq import checkpoints

    state = checkpoints.load(str(OLD / "unmt.pt"))
    assert "_extra_state" not in state["model"] and "langs" not in state["task_state"]
    read = checkpoint_utils.load_checkpoint_to_cpu(str(OLD / "unmt.pt"))
    assert read["task_state"]["langs"] == ["de", "en", "ro"] and read["model"]["_extra_state"] == ["de", "en", "ro"]
    assert "_extra_state" not in old_model.models[0].state_dict()
    expected = json.loads((OLD / "expected.json").read_text(encoding="utf-8"))
    state["model"] = old_model.models[0].state_dict()
    state["task_state"] = dict(old_model.task.state_dict())
    state["cfg"]["task"]["langs"] = state["cfg"]["model"]["langs"] = ""  # the list is in task_state alone
    torch_persistent_save(state, str(tmp_path / "model.pt"))
    again = XLMModel.from_pretrained(str(tmp_path))
    assert again.task.langs == ["de", "en", "ro"]
    assert again.translate(["Click OK."], src="en", tgt="ro", beam=1) == expected["en-ro"]["1"]


def test_a_list_carried_in_the_state_dict_as_characters_is_still_checked(old_model):
    """Checkpoints written before the list moved to task_state carry it in the model's state dict,
    its characters as a tensor: loading one in another order is the one-line error."""
    from xlm_fairseq.errors import XLMUserError

    model = old_model.models[0]
    state = model.state_dict()
    state["_extra_state"] = torch.tensor([ord(c) for c in "de,en,ro"])
    model.load_state_dict(state)
    state["_extra_state"] = torch.tensor([ord(c) for c in "en,de,ro"])
    with pytest.raises(XLMUserError, match="trained with --langs en,de,ro, not de,en,ro"):
        model.load_state_dict(state)


def test_checkpoints_of_fairseqs_own_tasks_are_read_as_fairseq_reads_them():
    """mBART's task has a --langs too: a checkpoint without this plugin's task_state keeps its model's
    state dict and task_state as they were, whatever its config names."""
    from xlm_fairseq.checkpoints import hand_langs_to_model

    weights = {"encoder.embed_tokens.weight": torch.zeros(2, 2)}
    for task_state in ({}, {"other": 1}):
        state = {
            "cfg": {"task": {"_name": "multilingual_denoising", "langs": "ar_AR,cs_CZ"}},
            "model": dict(weights),
            "task_state": dict(task_state),
        }
        assert hand_langs_to_model(state) == {
            "cfg": {"task": {"_name": "multilingual_denoising", "langs": "ar_AR,cs_CZ"}},
            "model": weights,
            "task_state": task_state,
        }
