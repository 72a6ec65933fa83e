"""xlm_fairseq.inference.hub.XLMHubInterface on a converted XLM (fastBPE codes) and on one of our own
checkpoints (sentencepiece, as preprocess/ makes them). CPU only, tiny random models."""

import io
import os

import pytest
import torch
from hf_models import CORPUS, make_hf_dir

from preprocess.subwords import XLMBPESubwords
from xlm_fairseq import convert
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.inference.hub import XLMHubInterface
from xlm_fairseq.models.xlm import XLMModel


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub_bpe")
    make_hf_dir(str(root / "hf"), use_lang_emb=True)
    return convert.convert_hf(str(root / "hf"), str(root / "xlm")), str(root / "hf")


@pytest.fixture(scope="module")
def xlm(bpe_dir):
    return XLMModel.from_pretrained(bpe_dir[0])


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory):
    """Our own pretraining layout: checkpoint_best.pt beside dict.txt and spm.model."""
    import sentencepiece as spm
    from fairseq.checkpoint_utils import torch_persistent_save
    from omegaconf import OmegaConf

    root = tmp_path_factory.mktemp("hub_spm")
    lines = [line for lang in ("en", "de") for line in CORPUS[lang]] * 5
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=60,
        model_type="bpe",
        hard_vocab_limit=False,
        minloglevel=2,
        character_coverage=1.0,
    )
    (root / "spm.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    with open(root / "dict.txt", "w", encoding="utf-8") as f:  # preprocess/'s layout
        f.write("".join(f"<special{i}> 0\n" for i in range(10)))
        for i in range(sp.get_piece_size()):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                f.write(f"{sp.id_to_piece(i)} 3\n")
    cfg, task, lm = convert.build_fairseq_model(str(root), ["en", "de"], 32, 2, 4, 0.1, 0.1, 64, False, True)
    cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    cfg_dict["task"]["data"] = "/nonexistent/data-bin"  # where training read its data; moved since
    cfg_dict["task"]["mlm_steps"] = "en,de"
    torch_persistent_save(
        {
            "cfg": cfg_dict,
            "model": lm.state_dict(),
            "args": None,
            "extra_state": {},
            "optimizer_history": [
                {"criterion_name": "x", "optimizer_name": "adam", "lr_scheduler_state": {}, "num_updates": 7}
            ],
        },
        str(root / "checkpoint_best.pt"),
    )
    return str(root)


# --------------------------------------------------------------------------------------------
# converted model (fastBPE)
# --------------------------------------------------------------------------------------------


def test_attributes(xlm, bpe_dir):
    assert isinstance(xlm, XLMHubInterface)
    assert xlm.langs == ["en", "de"] and xlm.lang2id == {"en": 0, "de": 1}
    assert len(xlm.task.source_dictionary) == len(xlm.dictionary)
    assert not xlm.training and not xlm.model.training
    # a checkpoint path works as well as its directory
    again = XLMHubInterface.from_pretrained(os.path.join(bpe_dir[0], "model.pt"))
    assert again.langs == xlm.langs


def test_encode_decode_round_trip(xlm):
    text = "the cat sat on the mat, here."
    tokens = xlm.encode(text, "en")
    eos = xlm.dictionary.eos()
    assert tokens.dtype == torch.long and tokens[0] == eos and tokens[-1] == eos
    assert xlm.dictionary.unk() not in tokens.tolist()
    assert xlm.decode(tokens) == text
    # lowercasing and accent removal, as the model was trained
    assert xlm.encode("Thé CAT sât on thè mat, here.", "en").tolist() == tokens.tolist()
    german = "der hund sitzt auf der matte."
    assert xlm.decode(xlm.encode(german, "de"), "de") == german


def test_pieces_match_hf_tokenizer(xlm, bpe_dir):
    from transformers import XLMTokenizer

    hf = XLMTokenizer.from_pretrained(bpe_dir[1])
    for text, lang in (("The cat sat “on” the mat… here!", "en"), ("Die Katze sitzt auf der Matte，hier.", "de")):
        ours = xlm.tokenizer.pieces(text, lang)
        theirs = [convert.hf_token_to_xlm_word(t) for t in hf.tokenize(text, lang=lang)]
        assert ours == theirs, (ours, theirs)


def test_bpe_merges_lowest_rank_first(tmp_path):
    codes = tmp_path / "codes"
    codes.write_text("a b 9\nb c</w> 8\nab c</w> 7\n")
    bpe = XLMBPESubwords(str(codes))
    assert bpe.bpe("abc") == ["abc"]  # a b (rank 0) first, then ab c</w>
    assert bpe.bpe("bc") == ["bc"]
    assert bpe.bpe("cab") == ["c@@", "a@@", "b"]  # 'b' is word-final: 'b</w>', no rank for (a, b</w>)
    assert bpe.bpe("x") == ["x"]


def test_shapes(xlm):
    a = xlm.encode("the cat sat on the mat.", "en")
    b = xlm.encode("der hund ist hier.", "de")
    feats = xlm.extract_features(a, "en")
    assert feats.shape == (1, len(a), 32)
    batch = torch.full((2, len(a)), xlm.dictionary.pad(), dtype=torch.long)
    batch[0], batch[1, : len(b)] = a, b
    langs = torch.tensor([[0] * len(a), [1] * len(a)])
    assert xlm.extract_features(batch, langs).shape == (2, len(a), 32)
    logits = xlm.predict(batch, langs)
    assert logits.shape == (2, len(a), len(xlm.dictionary))
    assert not logits.requires_grad
    # padding gives no features, and does not change the real positions
    single_b = xlm.predict(b, "de")[0]
    assert (logits[1, : len(b)] - single_b).abs().max() < 1e-5


def test_langs_as_code_or_tensor(xlm):
    tokens = xlm.encode("the dog is here.", "en")
    by_code = xlm.predict(tokens, "en")
    assert torch.equal(by_code, xlm.predict(tokens, torch.zeros_like(tokens)))
    assert torch.equal(by_code, xlm.predict(tokens.unsqueeze(0), torch.tensor([0])))  # per sentence
    assert torch.equal(by_code, xlm.predict(tokens, 0))
    assert not torch.allclose(by_code, xlm.predict(tokens, "de"))  # language embeddings are used
    with pytest.raises(XLMUserError, match="not one of"):
        xlm.predict(tokens, "fr")
    with pytest.raises(XLMUserError, match="language embeddings"):
        xlm.predict(tokens)


def test_fill_mask(xlm):
    results = xlm.fill_mask("the <mask> sat on the mat.", "en", topk=5)
    assert len(results) == 5
    scores = [s for _, s, _ in results]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6
    for sentence, score, token in results:
        assert isinstance(sentence, str) and isinstance(score, float) and isinstance(token, str)
        assert token not in ("<s>", "<pad>", "</s>", "<unk>", "<special1>")
        assert sentence.startswith("the ") and sentence.endswith("sat on the mat.")
    with pytest.raises(XLMUserError, match="exactly one"):
        xlm.fill_mask("no mask here", "en")
    # a list of texts gives a list of answers; what is not text is one error naming the argument
    assert xlm.fill_mask(["the <mask> sat on the mat.", "a <mask>."], "en", topk=5)[0] == results
    for wrong, named in ((b"the <mask>.", "text is bytes"), (None, "text is None"), (["a <mask>.", 3], "text\\[1\\]")):
        with pytest.raises(XLMUserError, match=named):
            xlm.fill_mask(wrong, "en")


def test_missing_codes_is_a_clear_error(bpe_dir, tmp_path):
    import shutil

    d = tmp_path / "nocodes"
    shutil.copytree(bpe_dir[0], d)
    os.remove(d / "bpe.codes")
    hub = XLMHubInterface.from_pretrained(str(d))
    assert hub.extract_features(torch.tensor([2, 20, 2]), "en").shape == (1, 3, 32)  # tensors still work
    with pytest.raises(XLMUserError, match="bpe.codes"):
        hub.encode("the cat", "en")


# --------------------------------------------------------------------------------------------
# our own checkpoint (sentencepiece)
# --------------------------------------------------------------------------------------------


def test_spm_checkpoint(spm_dir):
    hub = XLMModel.from_pretrained(spm_dir, checkpoint_file="checkpoint_best.pt")
    assert hub.langs == ["en", "de"] and hub.tokenizer.kind == "sentencepiece"
    text = "die katze sitzt auf der matte, hier."  # no lowercasing here: the corpus is lowercase
    tokens = hub.encode(text, "de")
    assert hub.dictionary.unk() not in tokens.tolist()
    assert hub.decode(tokens, "de") == text
    assert hub.extract_features(tokens, "de").shape == (1, len(tokens), 32)
    results = hub.fill_mask("der hund <mask> hier.", "de", topk=3)
    assert len(results) == 3 and all(r[0].startswith("der hund") for r in results)
    assert hub.encode("der", "de")[1:-1].tolist() != hub.encode("Der", "de")[1:-1].tolist()


def test_spm_checkpoint_exports_to_hf(spm_dir, tmp_path):
    from transformers import XLMWithLMHeadModel

    hub = XLMModel.from_pretrained(spm_dir, checkpoint_file="checkpoint_best.pt")
    out = convert.export_hf(os.path.join(spm_dir, "checkpoint_best.pt"), str(tmp_path / "hf"))
    assert (
        os.path.isfile(os.path.join(out, "spm.model"))
        and "sentencepiece" in open(os.path.join(out, "README.md")).read()
    )
    hf = XLMWithLMHeadModel.from_pretrained(out).eval()
    assert hf.config.mask_index == 5 and hf.config.lang2id == {"en": 0, "de": 1}
    tokens = hub.encode("der hund ist hier.", "de")
    perm = convert.swap_permutation(len(hub.dictionary))
    with torch.no_grad():
        theirs = hf(input_ids=perm[tokens][None], langs=torch.ones(1, len(tokens), dtype=torch.long)).logits
    ours = hub.predict(tokens, "de")[..., perm]
    assert (ours - theirs).abs().max() <= 1e-4


def test_spm_pipeline_is_preprocess_own(spm_dir):
    """The hub tokenises as preprocess/ did."""
    from preprocess import normalize_and_tokenize

    tok = XLMModel.from_pretrained(spm_dir, checkpoint_file="checkpoint_best.pt").tokenizer
    for text, lang in (
        ("Hello, “world”… it's 3.5 km!", "en"),
        ("Şi ţara,\tîn «pace».", "ro"),
        ("Straße (groß)？", "de"),
    ):
        assert tok.words(text, lang) == normalize_and_tokenize(text, lang).split()
