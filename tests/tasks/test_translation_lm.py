"""translation_lm through fairseq's CLI and API: init from a pretrained LM, back-translation, UNMT
over three languages, generation in every direction, resume with schedules (bad input: test_errors.py)."""

import json
import re

import pytest
import torch
from conftest import (
    MT_ON_VALID_PAIRS,
    PRETRAIN_ARGS,
    ROOT,
    UNMT_ARGS,
    UNMT_STEPS,
    fairseq,
    generate_lines,
    json_logs,
    setup_task,
)


def _load(path, data_bin, **overrides):
    from fairseq import checkpoint_utils

    import xlm_fairseq  # noqa: F401  (registers the tasks the checkpoint names)

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(path)], arg_overrides={"data": str(data_bin), **overrides}
    )
    return models[0], task


def test_init_copies_the_lm_into_encoder_and_decoder_except_cross_attention(pretrained, data_bin, unmt):
    from xlm_fairseq.models.translation import XLMTranslationModel

    _, task = _load(unmt[0] / "checkpoint_last.pt", data_bin)
    task.cfg.pretrained_xlm_checkpoint = str(pretrained)
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {
            "_name": "xlm_tiny",
            "encoder_embed_dim": 64,
            "encoder_layers": 2,
            "encoder_attention_heads": 4,
            "encoder_ffn_embed_dim": 256,
            "decoder_embed_dim": 64,
            "decoder_layers": 2,
            "decoder_attention_heads": 4,
            "decoder_ffn_embed_dim": 256,
            "dropout": 0.1,
            "attention_dropout": 0.1,
            "max_positions": 512,
            "sinusoidal_embeddings": False,
            "no_lang_emb": False,
            "langs": "en,de,ro",
            "share_all_embeddings": False,
        }
    )
    model = task.build_model(cfg)
    assert isinstance(model, XLMTranslationModel) and model.langs == ["en", "de", "ro"]
    lm = torch.load(pretrained)["model"]
    checked = fresh = 0
    for side in ("encoder", "decoder"):
        for name, value in getattr(model, side).transformer.state_dict().items():
            if name.startswith(("encoder_attn.", "layer_norm15.")):
                fresh += 1
                continue
            assert torch.equal(value, lm["encoder.transformer." + name]), (side, name)
            checked += 1
    assert checked > 40 and fresh == 2 * (8 + 2)
    assert model.encoder.transformer.pred_layer is None  # the encoder of a translation model predicts nothing


def test_an_lm_without_language_embeddings_starts_them_at_zero(data_bin, tmp_path):
    """An LM pretrained with --no-lang-emb (XLM's --use_lang_emb false) initialises a translation
    model, which needs language embeddings (its decoder is told the target language): they start at
    zero, so the model starts computing what the LM did, and everything else is the LM's."""
    save = tmp_path / "lm"
    fairseq(
        "train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de",
        "--mlm-steps",
        "en,de",
        "--no-lang-emb",
        "--max-update",
        "3",
        "--save-dir",
        save,
    )
    lm = torch.load(save / "checkpoint_last.pt")["model"]
    assert not any("lang_embeddings" in k for k in lm)
    task, cfg = setup_task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de",
        "--mt-steps",
        "en-de",
        "--pretrained-xlm-checkpoint",
        save / "checkpoint_last.pt",
    )
    model = task.build_model(cfg.model).eval()
    for side in (model.encoder, model.decoder):
        assert side.transformer.lang_embeddings.weight.abs().sum() == 0
        assert torch.equal(side.transformer.embeddings.weight, lm["encoder.transformer.embeddings.weight"])
    tokens = torch.tensor([[0, 10, 11, 12, 2]])
    lm_task, lm_cfg = setup_task(data_bin, "cross_lingual_lm", "--langs", "en,de", "--no-lang-emb")
    reference = lm_task.build_model(lm_cfg.model).eval()
    reference.load_state_dict(lm)
    with torch.no_grad():
        ours = model.encoder.transformer(tokens, langs=torch.ones_like(tokens))
        theirs = reference.encoder.transformer(tokens, langs=torch.ones_like(tokens))
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_unmt_trains_every_objective_and_validates_every_direction(unmt):
    save, log = unmt
    train = json_logs(log, "train")[-1]
    for key in ("ae_en", "ae_de", "ae_ro", "bt_en-de-en", "bt_de-en-de", "bt_en-ro-en", "bt_ro-en-ro"):
        assert f"train_{key}_loss" in train, key
    valid = json_logs(log, "valid")[-1]
    for direction in ("en-de", "de-en", "en-ro", "ro-en"):
        assert f"valid_bleu_{direction}" in valid and f"valid_mt_{direction}_ppl" in valid, direction
        assert f"valid_bleu_tok_{direction}" in valid, direction  # XLM's multi-bleu scale
    inner = json_logs(log, "train_inner")
    # the 10th update is made with update_num 9 (fairseq counts updates done before this one)
    assert int(inner[9]["num_updates"]) == 10
    assert float(inner[9]["lambda_ae"]) == pytest.approx(1 - 0.75 * 9 / 40, abs=1e-3)


def test_validation_means_the_directions_and_the_log_file_has_each_line_once(data_bin, tmp_path):
    """bleu_mean / bleu_tok_mean average the validated directions, and --best-checkpoint-metric picks
    by it; fairseq opens --log-file again at every epoch, and the file still gets each line once
    (xlm_fairseq/patches/log_file_once.py)."""
    log = tmp_path / "train.log"
    # three epochs of a few updates each (the 100 valid pairs), validated after each
    proc = fairseq(
        "train",
        data_bin,
        *MT_ON_VALID_PAIRS,
        "--max-epoch",
        "3",
        "--best-checkpoint-metric",
        "bleu_tok_mean",
        "--maximize-best-checkpoint-metric",
        "--save-dir",
        tmp_path / "ckpt",
        "--log-file",
        log,
    )
    valid = json_logs(proc.stdout + proc.stderr, "valid")
    assert [int(v["epoch"]) for v in valid] == [1, 2, 3]
    for v in valid:
        for metric in ("bleu", "bleu_tok"):
            mean = (float(v[f"valid_{metric}_de-en"]) + float(v[f"valid_{metric}_en-de"])) / 2
            assert float(v[f"valid_{metric}_mean"]) == pytest.approx(mean, abs=0.006), (metric, v)
    assert float(valid[-1]["valid_best_bleu_tok_mean"]) == max(float(v["valid_bleu_tok_mean"]) for v in valid)
    assert (tmp_path / "ckpt" / "checkpoint_best.pt").is_file()
    written = [line for line in log.read_text().splitlines() if '"valid_loss"' in line]
    assert [int(json.loads(line)["epoch"]) for line in written] == [1, 2, 3]  # once each


def _without_parallel_valid(data_bin, dest):
    """A copy of the data-bin without its parallel valid sets (monolingual valid text kept)."""
    dest.mkdir()
    for f in data_bin.iterdir():
        if not (f.name.startswith("valid.") and f.name.count(".") == 3):  # valid.en-de.en.bin
            (dest / f.name).symlink_to(f)
    return dest


def test_without_parallel_valid_text_round_trips_choose_the_checkpoint(pretrained, data_bin, tmp_path):
    """No parallel valid text: each direction's round trip on monolingual valid text (en -> de -> en,
    greedy) is validated instead, its BLEU back and how much the translation copies its source; their
    means choose the checkpoint. --valid-roundtrip adds them beside parallel validation."""
    bare = _without_parallel_valid(data_bin, tmp_path / "bin")
    args = [*UNMT_ARGS, "--langs", "de,en", "--ae-steps", "de,en", "--bt-steps", "de-en-de,en-de-en"]
    args += ["--max-update", "6", "--validate-interval-updates", "3", "--save-interval-updates", "3"]
    args += ["--log-interval", "1"]
    args += ["--pretrained-xlm-checkpoint", pretrained]
    proc = fairseq(
        "train",
        bare,
        *args,
        "--best-checkpoint-metric",
        "roundtrip_score",
        "--maximize-best-checkpoint-metric",
        "--save-dir",
        tmp_path / "ckpt",
    )
    log = proc.stdout + proc.stderr
    assert "validated by its round trip bt_de-en-de" in log
    valid = json_logs(log, "valid")
    assert len(valid) == 2
    for v in valid:
        assert not any(k.startswith("valid_mt_") or k == "valid_bleu_mean" for k in v), v
        trips = ("de-en-de", "en-de-en")
        for trip in trips:
            for metric in ("bleu", "bleu_tok", "bleu_copy"):
                assert 0 <= float(v[f"valid_{metric}_{trip}"]) <= 100, (metric, trip)
            assert float(v[f"valid_bt_{trip}_ppl"]) > 1
        mean = sum(float(v[f"valid_bleu_tok_{t}"]) for t in trips) / 2
        copy = sum(float(v[f"valid_bleu_copy_{t}"]) for t in trips) / 2
        assert float(v["valid_roundtrip_bleu"]) == pytest.approx(mean, abs=0.01)
        assert float(v["valid_roundtrip_copy"]) == pytest.approx(copy, abs=0.01)
        assert float(v["valid_roundtrip_score"]) == pytest.approx(mean - copy, abs=0.02)
    best = max(float(v["valid_roundtrip_score"]) for v in valid)
    assert float(valid[-1]["valid_best_roundtrip_score"]) == best
    assert (tmp_path / "ckpt" / "checkpoint_best.pt").is_file()

    # with parallel valid text, round trips beside it on request, and the choice may be either
    proc = fairseq(
        "train",
        data_bin,
        *args,
        "--max-update",
        "3",
        "--valid-roundtrip",
        "--best-checkpoint-metric",
        "roundtrip_score",
        "--maximize-best-checkpoint-metric",
        "--save-dir",
        tmp_path / "both",
    )
    (v,) = json_logs(proc.stdout + proc.stderr, "valid")
    assert {"valid_bleu_de-en", "valid_bleu_tok_mean", "valid_bleu_de-en-de", "valid_roundtrip_score"} <= set(v)


def test_round_trips_beside_parallel_validation_need_the_option(pretrained, data_bin, tmp_path):
    """With parallel valid text and no --valid-roundtrip, a round trip's checkpoint metric is refused
    before training, in one line that names the option."""
    proc = fairseq(
        "train",
        data_bin,
        *UNMT_ARGS,
        "--langs",
        "de,en",
        "--ae-steps",
        "de,en",
        "--bt-steps",
        "de-en-de,en-de-en",
        "--max-update",
        "5",
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--best-checkpoint-metric",
        "roundtrip_score",
        "--save-dir",
        tmp_path / "ckpt",
        ok=False,
    )
    assert proc.returncode != 0
    (line,) = [x for x in proc.stderr.splitlines() if "--best-checkpoint-metric roundtrip_score" in x]
    assert "bleu_tok_mean" in line and "--valid-roundtrip" in line
    assert not (tmp_path / "ckpt" / "checkpoint_last.pt").exists()


@pytest.mark.slow
def test_resume_continues_the_schedule(unmt, pretrained, data_bin, tmp_path):
    import shutil

    save = tmp_path / "resume"
    shutil.copytree(unmt[0], save)
    proc = fairseq(
        "train",
        data_bin,
        *UNMT_ARGS,
        *UNMT_STEPS,
        "--disable-validation",
        "--max-update",
        "33",
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--save-dir",
        save,
        "--log-interval",
        "1",
    )
    inner = json_logs(proc.stdout + proc.stderr, "train_inner")
    assert [int(r["num_updates"]) for r in inner] == [31, 32, 33]
    # trainer passes update_num = num_updates - 1 for the update being made
    assert float(inner[0]["lambda_ae"]) == pytest.approx(1 - 0.75 * 30 / 40, abs=1e-3)


def _generate(data_bin, ckpt, src, tgt, *extra):
    """H- lines {id: text} of fairseq-generate on the test split, and its output."""
    lines, out = generate_lines(data_bin, ckpt, src, tgt, "--max-tokens", "4000", *extra)
    return lines["H"], out


SLOW = pytest.mark.slow  # the fast tier generates one direction (the others: the same path)


@pytest.mark.parametrize(
    "src,tgt",
    [
        ("de", "en"),
        pytest.param("en", "de", marks=SLOW),
        pytest.param("en", "ro", marks=SLOW),
        pytest.param("ro", "en", marks=SLOW),
    ],
)
def test_generate_every_direction_and_score(unmt, data_bin, src, tgt):
    """The README's command: no pipeline flags; D- lines detokenised by the data-bin's own pipeline,
    scored by sacrebleu against the detokenised references."""
    import sacrebleu

    lines, out = generate_lines(
        data_bin, unmt[0] / "checkpoint_last.pt", src, tgt, "--beam", "5", "--scoring", "sacrebleu"
    )
    assert len(lines["D"]) == len(lines["T"]) == 60
    hyps, refs = [lines["D"][i] for i in range(60)], [lines["T"][i] for i in range(60)]
    assert not any("\u2581" in t for t in hyps + refs)  # pieces joined
    assert sum(" ." in r or " ," in r for r in refs) < 3  # Moses-detokenised
    m = re.search(r"BLEU = ([0-9.]+)", out)
    assert m, out[-500:]
    assert float(m.group(1)) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=0.01)


def _stopping_later(ckpt, out, eos=2, shift=4.0):
    """The checkpoint with ``</s>`` made less likely in the decoder's output layer: the tiny fixture
    model ends every translation at once, and greedy decoding is only compared word for word when
    there are words."""
    from fairseq.checkpoint_utils import torch_persistent_save

    from xlm_fairseq import checkpoints

    state = checkpoints.load(str(ckpt))
    state["model"]["decoder.transformer.pred_layer.proj.bias"][eos] -= shift
    torch_persistent_save(state, str(out))
    return out


def test_back_translation_is_greedy_generation_in_the_other_language(unmt, data_bin, tmp_path):
    from xlm_fairseq.objectives.translation import BackTranslation

    ckpt = _stopping_later(unmt[0] / "checkpoint_last.pt", tmp_path / "checkpoint.pt")
    model, task = _load(ckpt, data_bin, source_lang="en", target_lang="de")
    task.load_dataset("test")
    ds = task.dataset("test")
    batch = ds.collater([ds[i] for i in range(16)])
    model.train()
    model.zero_grad()
    modes = []
    handle = model.encoder.transformer.register_forward_pre_hook(
        lambda m, a: modes.append((m.training, torch.is_grad_enabled()))
    )
    back_translation = task.make_objective(BackTranslation, ("en", "de", "en"))
    out = back_translation.prepare(model, batch)
    handle.remove()
    assert modes and all(mode == (False, False) for mode in modes), "generation runs in eval mode without gradient"
    assert model.training, "training mode restored"
    assert all(p.grad is None for p in model.parameters())
    assert not out["net_input"]["src_tokens"].requires_grad
    assert out["net_input"]["src_langs"].tolist() == [task.lang2id["de"]] * 16  # generated side is German
    assert out["net_input"]["tgt_langs"].tolist() == [task.lang2id["en"]] * 16  # reconstruct English
    # the generated sentences are exactly what fairseq-generate --beam 1 produces with the same limits
    # (the length limit depends on the longest source of a batch, so compare one sentence per batch)
    hyps, _ = _generate(
        data_bin,
        ckpt,
        "en",
        "de",
        "--beam",
        "1",
        "--max-len-a",
        "1.3",
        "--max-len-b",
        "3",
        "--min-len",
        "0",
        "--batch-size",
        "1",
    )
    pad, eos = task.dictionary.pad(), task.dictionary.eos()
    in_batch = {
        int(sid): [t for t in row.tolist() if t != pad] for sid, row in zip(out["id"], out["net_input"]["src_tokens"])
    }
    for i in range(12):
        single = back_translation.prepare(model, ds.collater([ds[i]]))
        tokens = [t for t in single["net_input"]["src_tokens"][0].tolist() if t != pad]
        assert tokens[0] == eos and in_batch[i][0] == eos
        assert task.dictionary.string(torch.tensor(tokens[1:])) == hyps[i], i
        # in the batch the same greedy words, to the batch's own length limit (its longest source):
        # one is a prefix of the other, whichever limit is shorter
        words, batch_words = tokens[1:-1], in_batch[i][1:-1]
        shorter = min(len(words), len(batch_words))
        assert words[:shorter] == batch_words[:shorter], i
    # the comparison is between words, not empty sentences (a fixture that learnt to stop at once)
    assert sum(len(hyps[i].split()) >= 3 for i in range(12)) >= 6, [hyps[i] for i in range(12)]
    # and the target of the new batch is the original English sentence
    originals = {int(i): t for i, t in zip(batch["id"], batch["target"])}
    for row, sid in zip(out["target"], out["id"].tolist()):
        assert torch.equal(row[row.ne(pad)], originals[sid][originals[sid].ne(pad)])


@pytest.mark.slow  # in-process: test_loop.py (update_objectives leaves weight 0 out)
def test_zero_weight_objective_costs_nothing(pretrained, data_bin, tmp_path):
    proc = fairseq(
        "train",
        data_bin,
        *UNMT_ARGS,
        "--langs",
        "en,de,ro",
        "--ae-steps",
        "en,de",
        "--bt-steps",
        "en-de-en",
        "--lambda-bt",
        "0",
        "--max-update",
        "3",
        "--disable-validation",
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--save-dir",
        tmp_path / "c",
        "--log-interval",
        "1",
    )
    inner = json_logs(proc.stdout + proc.stderr, "train_inner")
    assert "ae_en_loss" in inner[-1] and "bt_en-de-en_loss" not in inner[-1]


@pytest.mark.slow  # the fast tier runs fairseq-interactive in test_pipeline.py and test_errors.py
def test_interactive_translates_raw_text(unmt, data_bin):
    """fairseq-interactive as the README runs it, no pipeline flags: raw text -> the data-bin's
    pipeline (Moses, sentencepiece) -> model -> detokenised text; typographic quotes, dashes and
    ellipses are normalised as in training, so none of them becomes <unk>."""
    import subprocess

    from conftest import BIN

    lines = [
        "Legen Sie eine bestimmte Druckreihenfolge der Seiten fest.",
        "„Das ist's“ … «Ja» – sagte er.",
        "‚Öffnen‘ — oder »Schließen«? …",
    ]
    proc = subprocess.run(
        [
            str(BIN / "fairseq-interactive"),
            str(data_bin),
            "--user-dir",
            str(ROOT / "xlm_fairseq"),
            "--task",
            "translation_lm",
            "-s",
            "de",
            "-t",
            "en",
            "--path",
            str(unmt[0] / "checkpoint_last.pt"),
            "--beam",
            "2",
            "--cpu",
        ],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    sources = [line.split("\t")[1] for line in proc.stdout.splitlines() if line.startswith("S-")]
    detok = [line.split("\t")[2] for line in proc.stdout.splitlines() if line.startswith("D-")]
    assert len(sources) == len(detok) == 3
    assert sources[0].startswith("\u2581Le") and "\u2581Sie" in sources[0]
    assert not any("<unk>" in s for s in sources), sources
    assert all("\u2581" not in d for d in detok)


def test_the_language_list_is_one_store_that_a_checkpoint_fills(data_bin):
    """Without --langs (fairseq-generate's set-up) the task knows no language until a checkpoint's
    task_state brings its list; its ids, objectives and validated directions then follow that list,
    which is what checkpoints carry. --langs in another order is refused."""
    from xlm_fairseq.errors import XLMUserError

    task, _ = setup_task(data_bin, "translation_lm", "--ae-steps", "en", "--bt-steps", "en-de-en")
    assert task.langs == [] and task.objectives == []
    task.load_state_dict({"langs": ["en", "de", "ro"]})
    assert task.lang2id == {"en": 0, "de": 1, "ro": 2}
    assert [o.key for o in task.objectives] == ["ae_en", "bt_en-de-en"]
    assert [o.key for o in task.valid_objectives] == ["mt_en-de"]
    assert task.state.langs == ["en", "de", "ro"]
    other, _ = setup_task(data_bin, "translation_lm", "--langs", "de,en,ro", "--ae-steps", "en")
    with pytest.raises(XLMUserError, match="not the model's language list en,de,ro"):
        other.load_state_dict({"langs": ["en", "de", "ro"]})
    assert other.langs == ["de", "en", "ro"]
