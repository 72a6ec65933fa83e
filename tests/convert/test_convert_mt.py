"""Released translation checkpoints in: XLM's MT checkpoints (``encoder``/``decoder`` state dicts,
``params``, ``dico_*``) and MASS's, written here with XLM's parameter names and vocabulary order,
become ``translation_lm`` model directories whose forward pass equals the model built directly from
the same tensors; what MASS adds that xlm_transformer cannot express is refused with one line."""

import os
import sys

import numpy as np
import pytest
import torch
from conftest import ROOT, in_process
from hf_models import LANG2ID, SPECIALS, learn_bpe
from test_convert import _error_lines

from xlm_fairseq import XLMModel, convert
from xlm_fairseq.convert.cli import main
from xlm_fairseq.modules.transformer import XLMTransformer

DIM, HEADS, ENC_LAYERS, DEC_LAYERS = 32, 4, 2, 3
XLM_PAD = SPECIALS.index("<pad>")


def xlm_stacks(n_words, use_lang_emb=True, seed=0):
    """Encoder (with the output layer XLM builds for it) and decoder, in XLM's vocabulary order, every
    weight perturbed so that nothing is at its initial value."""
    torch.manual_seed(seed)

    def stack(layers, is_decoder):
        return XLMTransformer(
            n_words,
            XLM_PAD,
            2,
            DIM,
            layers,
            HEADS,
            4 * DIM,
            0.0,
            0.0,
            max_positions=64,
            use_lang_emb=use_lang_emb,
            is_decoder=is_decoder,
            with_output=True,
        ).eval()

    encoder, decoder = stack(ENC_LAYERS, False), stack(DEC_LAYERS, True)
    with torch.no_grad():
        for p in [*encoder.parameters(), *decoder.parameters()]:
            p.add_(torch.randn_like(p) * 0.3)
    return encoder, decoder


def write_mt_pth(path, encoder, decoder, vocab, extra_params=None, module_prefix=False, decoder_state=None):
    """The stacks as XLM's (or MASS's) trainer saves an MT model."""
    id2word = {i: w for i, w in enumerate(vocab)}
    prefix = "module." if module_prefix else ""
    params = {
        "emb_dim": np.int64(DIM),
        "n_layers": ENC_LAYERS,
        "n_dec_layers": DEC_LAYERS,
        "n_heads": HEADS,
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "gelu_activation": True,
        "sinusoidal_embeddings": False,
        "share_inout_emb": True,
        "asm": False,
        "encoder_only": False,
        "n_langs": 2,
        "lang2id": dict(LANG2ID),
        "id2lang": {i: lang for lang, i in LANG2ID.items()},
        "n_words": len(vocab),
        **(extra_params or {}),
    }
    torch.save(
        {
            "encoder": {prefix + k: v for k, v in encoder.state_dict().items()},
            "decoder": decoder_state or {prefix + k: v for k, v in decoder.state_dict().items()},
            "params": params,
            "dico_id2word": id2word,
            "dico_word2id": {w: i for i, w in id2word.items()},
            "dico_counts": {w: (0 if w in SPECIALS else 100 - i) for i, w in id2word.items()},
            "epoch": 3,
            "best_metrics": {"valid_en-de_mt_bleu": 1.0},
        },
        path,
    )


def reference_logits(encoder, decoder, src, tgt_in, src_lang, tgt_lang):
    """XLM's MT forward pass on the stacks themselves (XLM's ids): encode, decode with the target
    language at every position, output layer."""
    with torch.no_grad():
        enc = encoder(src, langs=torch.full_like(src, src_lang))
        dec = decoder(
            tgt_in, langs=torch.full_like(tgt_in, tgt_lang), causal=True, src_enc=enc, src_padding_mask=src.eq(XLM_PAD)
        )
        return decoder.pred_layer(dec)


def batch(n_words):
    torch.manual_seed(1)
    src = torch.randint(14, n_words, (3, 9))
    src[:, 0] = src[:, -1] = 1  # XLM's </s>
    src[2, 6:] = XLM_PAD
    src[2, 5] = 1
    tgt_in = torch.randint(14, n_words, (3, 7))
    tgt_in[:, 0] = 1
    return src, tgt_in


@pytest.fixture(scope="module")
def vocab_and_codes(tmp_path_factory):
    merges, tokens = learn_bpe()
    root = tmp_path_factory.mktemp("mt_codes")
    codes = root / "codes"
    codes.write_text("".join(f"{a} {b} {c}\n" for a, b, c in merges))
    return SPECIALS + [convert.hf_token_to_xlm_word(t) for t in tokens], str(codes)


@pytest.mark.parametrize("kind", ["xlm", "mass_english_only"])
def test_mt_checkpoint_converts_with_the_same_forward_pass(kind, vocab_and_codes, tmp_path, capsys):
    vocab, codes = vocab_and_codes
    use_lang_emb = kind == "xlm"
    encoder, decoder = xlm_stacks(len(vocab), use_lang_emb=use_lang_emb)
    extra = {"use_lang_emb": True} if kind == "xlm" else {"english_only": True, "attention_setting": "v1"}
    pth = tmp_path / "best-valid_en-de_mt_bleu.pth"
    write_mt_pth(pth, encoder, decoder, vocab, extra, module_prefix=kind == "xlm")
    out = tmp_path / "converted"
    status, err = in_process(main, [pth, out, "--codes", codes], capsys)
    assert status == 0, err
    assert sorted(os.listdir(out)) == ["README.md", "bpe.codes", "dict.txt", "model.pt", "text_pipeline.json"]
    assert "translation_lm" in (out / "README.md").read_text()

    hub = XLMModel.from_pretrained(str(out))
    assert hub.langs == ["en", "de"] and len(hub.models[0].decoder.transformer.attentions) == DEC_LAYERS
    perm = convert.swap_permutation(len(vocab))  # XLM's ids <-> ours (its own inverse)
    src, tgt_in = batch(len(vocab))
    for src_lang, tgt_lang in ((0, 1), (1, 0)):
        ref = reference_logits(encoder, decoder, src, tgt_in, src_lang, tgt_lang)
        model = hub.models[0]
        with torch.no_grad():
            n = src.size(0)
            ours, _ = model(
                perm[src],
                None,
                perm[tgt_in],
                src_langs=torch.full((n,), src_lang),
                tgt_langs=torch.full((n,), tgt_lang),
            )
        assert (ours[..., perm] - ref).abs().max().item() < 1e-4
    # text in, text out through the converted directory (XLM's BPE codes)
    translation = hub.translate("the cat sat on the mat .", src="en", tgt="de", beam=2, max_len_b=5)
    assert isinstance(translation, str) and translation


@pytest.mark.parametrize("setting", ["v1", "v2"])
def test_mass_per_language_encoder_attention_is_refused(setting, vocab_and_codes, tmp_path, capsys):
    vocab, codes = vocab_and_codes
    encoder, decoder = xlm_stacks(len(vocab))
    state = dict(decoder.state_dict())
    for i in range(DEC_LAYERS):  # MASS's default: one out_lin (v1) or one whole attention (v2) per language
        for name in [k for k in state if k.startswith(f"encoder_attn.{i}.")]:
            tail = name[len(f"encoder_attn.{i}.") :]
            value = state.pop(name)
            for lang in range(2):
                if setting == "v2":
                    state[f"encoder_attn.{i}.{lang}.{tail}"] = value
                elif tail.startswith("out_lin."):
                    state[f"encoder_attn.{i}.out_lin.{lang}.{tail[len('out_lin.') :]}"] = value
                else:
                    state[name] = value
    pth = tmp_path / "mass_ende_1024.pth"
    write_mt_pth(pth, encoder, decoder, vocab, {"attention_setting": setting}, decoder_state=state)
    out = tmp_path / "converted"
    status, err = in_process(main, [pth, out, "--codes", codes], capsys)
    lines = _error_lines(err)
    assert status == 2 and len(lines) == 1, err
    assert f"attention_setting {setting}" in lines[0] and "cannot express" in lines[0]
    assert not out.exists()


@pytest.mark.slow  # three fairseq commands; the fast tier checks the conversion's forward pass in process
def test_converted_mt_model_in_fairseq_tools(vocab_and_codes, tmp_path, capsys):
    """The converted directory is a checkpoint fairseq's tools take: fairseq-interactive translates
    raw text with it, and fairseq-train continues it (--restore-file) on data binarised with its
    dict.txt and BPE codes."""
    from conftest import BIN, TRAIN_ARGS, fairseq, run
    from hf_models import CORPUS

    vocab, codes = vocab_and_codes
    encoder, decoder = xlm_stacks(len(vocab))
    pth = tmp_path / "checkpoint.pth"
    write_mt_pth(pth, encoder, decoder, vocab, {"use_lang_emb": True})
    out = tmp_path / "converted"
    assert in_process(main, [pth, out, "--codes", codes], capsys)[0] == 0
    proc = run(
        [
            BIN / "fairseq-interactive",
            out,
            "--user-dir",
            ROOT / "xlm_fairseq",
            "--task",
            "translation_lm",
            "-s",
            "en",
            "-t",
            "de",
            "--path",
            out / "model.pt",
            "--beam",
            "2",
            "--max-len-b",
            "5",
            "--cpu",
        ],
        input="the cat sat on the mat .\nthe dog is here .\n",
    )
    assert len([line for line in proc.stdout.splitlines() if line.startswith("D-")]) == 2

    raw = tmp_path / "raw"
    raw.mkdir()
    for lang in ("en", "de"):
        (raw / f"train.en-de.{lang}").write_text("\n".join(CORPUS[lang] * 4) + "\n")
    data = tmp_path / "data-bin"
    run(
        [
            sys.executable,
            "-m",
            "preprocess.prepare",
            data,
            "--langs",
            "en,de",
            "--bpe-codes",
            out / "bpe.codes",
            "--dict",
            out / "dict.txt",
            "--lowercase-and-remove-accent",
            "--para",
            f"train:en-de={raw / 'train.en-de'}",
            "--quiet",
        ]
    )
    shape = [
        "--encoder-embed-dim",
        str(DIM),
        "--decoder-embed-dim",
        str(DIM),
        "--encoder-layers",
        str(ENC_LAYERS),
        "--decoder-layers",
        str(DEC_LAYERS),
    ]
    shape += ["--encoder-attention-heads", str(HEADS), "--decoder-attention-heads", str(HEADS)]
    shape += ["--encoder-ffn-embed-dim", str(4 * DIM), "--decoder-ffn-embed-dim", str(4 * DIM), "--max-positions", "64"]
    save = tmp_path / "continued"
    proc = fairseq(
        "train",
        data,
        *TRAIN_ARGS,
        "--task",
        "translation_lm",
        "--langs",
        "en,de",
        "--mt-steps",
        "en-de,de-en",
        *shape,
        "--lr",
        "0.0001",
        "--max-tokens",
        "400",
        "--max-update",
        "3",
        "--disable-validation",
        "--restore-file",
        out / "model.pt",
        "--reset-optimizer",
        "--reset-dataloader",
        "--reset-meters",
        "--save-dir",
        save,
    )
    assert "num_updates" in proc.stdout  # it trained
    # from the converted weights: 3 updates at lr 1e-4 move them little (a fresh model is 0.3 away)
    converted = torch.load(out / "model.pt", weights_only=False)["model"]
    continued = torch.load(save / "checkpoint_last.pt", weights_only=False)["model"]
    for name in ("encoder.transformer.embeddings.weight", "decoder.transformer.encoder_attn.2.q_lin.weight"):
        assert 0 < (continued[name] - converted[name]).abs().max().item() < 0.01
