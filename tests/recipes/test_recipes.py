"""What XLM's recipes (recipes/wmt16_en_de.sh, wmt16_en_ro.sh, xnli.sh) run: their --dry-run listings
checked for what makes them XLM's experiments (the objectives, XLM's loop and clip, the λ schedules,
back-translation, the shared optimiser flags, the evaluation), and every recipe run end to end in
its --smoke mode on tiny stand-ins of its downloads (``slow``: the full suite runs them).

The stage engine, options and downloads are tested in test_recipe_stages.py and test_recipe_cli.py,
the WMT16 tools in test_wmt16_tools.py."""

import json
import re

import pytest
import sacrebleu
from conftest import ROOT, read_optim_flags, run_recipe
from fairseq.tasks.online_backtranslation import PiecewiseLinearFn
from recipe_support import (
    ENDE,
    ENRO,
    TOOLS,
    XNLI,
    assert_options,
    checksums_file,
    downloads,
    dry_run,
    find,
    find_one,
    opt,
    published_names,
    wmt16_mirror,
    xnli_mirror,
)

XNLI_LANGS = "ar,bg,de,el,en,es,fr,hi,ru,sw,th,tr,ur,vi,zh"


def assert_shared_optimiser(command, **own):
    """``command`` trains with every flag of recipes/train/optim.flags, at the file's value unless the
    recipe sets its own (``adam_betas="(0.9,0.999)"``)."""
    for option, value in read_optim_flags().items():
        want = own.get(option[2:].replace("-", "_"), value)
        assert opt(command, option) == want, (option, opt(command, option), want)


# ------------------------------------------------------------------------------------------------
# the listings: what makes them XLM's experiments
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("script,other", [(ENDE, "de"), (ENRO, "ro")], ids=["en-de", "en-ro"])
def test_wmt16_listing_is_xlms_unsupervised_mt(tmp_path, script, other):
    commands, text = dry_run(tmp_path, script)
    work = tmp_path / "cwd" / "work" / script.stem
    # stage 1: every download listed in recipes/checksums.sha256 and verified against it
    verified = [opt(c, "--name") for c in find(commands, *TOOLS, "verify")]
    assert verified == downloads(commands) and set(verified) <= published_names() and verified
    pre = find_one(commands, "fairseq-train", having=("--task", "cross_lingual_lm"))
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    for cmd in (pre, mt):  # XLM's loop: one Adam step, clip at 5 and LR step per objective; XLM's epoch
        assert_options(cmd, step_per_objective=True, clip_norm="5", arch="xlm_1024", validate_interval_updates="6250")
        assert opt(cmd, "--patience") == "10" and opt(cmd, "--mt-steps") is None and float(opt(cmd, "--lr")) == 1e-4
    # pretraining: MLM on both languages, XLM's Adam (0.9, 0.999) without decay, selected on its metric
    assert_options(
        pre,
        mlm_steps=f"en,{other}",
        tokens_per_sample="256",
        batch_size="32",
        mask_prob="0.15",
        mask_keep_rand="0.8,0.1,0.1",
        best_checkpoint_metric="mlm_fullmask_ppl",
    )
    assert_shared_optimiser(pre, adam_betas="(0.9,0.999)", lr_scheduler="fixed")
    # translation from it: denoising AE fading out along XLM's λ schedule, online BT both ways
    assert opt(mt, "--pretrained-xlm-checkpoint") == str(work / "checkpoints" / "pretrain" / "checkpoint_best.pt")
    assert_options(
        mt,
        ae_steps=f"en,{other}",
        bt_steps=f"en-{other}-en,{other}-en-{other}",
        bt_max_len_a="1.3",
        bt_max_len_b="5",
        word_shuffle="3",
        word_dropout="0.1",
        word_blank="0.1",
        max_tokens="2000",
        valid_lang_pairs=f"en-{other},{other}-en",
    )
    assert opt(mt, "--best-checkpoint-metric") == f"bleu_tok_en-{other}"  # XLM's valid_en-xx_mt_bleu
    ae, bt = (PiecewiseLinearFn.from_string(opt(mt, f"--lambda-{k}")) for k in ("ae", "bt"))
    assert [ae(n) for n in (0, 50000, 100000, 300000, 10**6)] == pytest.approx([1, 0.55, 0.1, 0, 0])
    assert bt(0) == bt(10**6) == 1
    assert_shared_optimiser(mt, warmup_updates="4000", warmup_init_lr="1e-07")
    # stage 5: greedy as XLM's evaluator (1.5 L + 10 tokens, empty allowed) and beam 5, both directions
    gens = {(opt(c, "-s"), opt(c, "-t"), opt(c, "--beam")): c for c in find(commands, "fairseq-generate")}
    assert sorted(gens) == sorted((s, t, b) for s, t in (("en", other), (other, "en")) for b in ("1", "5"))
    for (src, tgt, beam), gen in gens.items():
        assert opt(gen, "--path") == str(work / "checkpoints" / "unmt" / "checkpoint_best.pt")
        assert (opt(gen, "--max-len-a"), opt(gen, "--max-len-b"), opt(gen, "--min-len")) == (
            ("1.5", "8", "0") if beam == "1" else (None, None, None)
        )
        detok = [c for c in find(commands, "sacrebleu") if opt(c, "-l") == f"{src}-{tgt}" and opt(c, "-t")]
        assert len(detok) == 2 and {opt(c, "-t") for c in detok} == {"wmt16"}  # sacrebleu's own newstest2016
    summary = find_one(commands, *TOOLS, "summary")
    assert len(json.loads(opt(summary, "--paper"))) == 2 and "# stage 5: evaluate" in text


def test_wmt16_en_ro_listing_supervised(tmp_path):
    commands, _ = dry_run(tmp_path, ENRO, "--supervised", "--gpus", "4", "--fp16", "--max-update", "1000")
    work = tmp_path / "cwd" / "work" / "wmt16_en_ro"
    assert downloads(commands)[-2:] == ["training-parallel-ep-v8.tgz", "en-ro.txt.zip"]
    para = find_one(commands, *TOOLS, "extract-para")
    assert opt(para, "--out-prefix") == str(work / "raw" / "train.en-ro")
    prep = find_one(commands, "xlm-fairseq-prepare")
    assert f"train:en-ro={work / 'raw' / 'train.en-ro'}" in prep and opt(prep, "--ro-remove-diacritics") is True
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(
        mt,
        mt_steps="en-ro,ro-en",
        ae_steps="en,ro",
        bt_steps="en-ro-en,ro-en-ro",
        fp16=True,
        distributed_world_size="4",
        max_update="1000",
    )
    assert opt(mt, "--save-dir") == str(work / "checkpoints" / "nmt_bt")
    # into Romanian also against the reference without diacritics (the model writes none)
    assert len([c for c in find(commands, "sacrebleu") if opt(c, "-l") == "en-ro"]) == 6
    assert "38.5" in opt(find_one(commands, *TOOLS, "summary"), "--paper")

    commands, _ = dry_run(tmp_path, ENRO, "--supervised", "--no-bt", "--gpus", "0")
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(mt, mt_steps="en-ro,ro-en", cpu=True, bt_steps=None, ae_steps=None, distributed_world_size=None)


@pytest.mark.parametrize("script,other", [(ENDE, "de"), (ENRO, "ro")], ids=["en-de", "en-ro"])
def test_wmt16_listing_from_the_released_model(tmp_path, script, other):
    commands, text = dry_run(tmp_path, script, "--init", "released", "--work-dir", tmp_path / "w")
    work, tag = tmp_path / "w", f"en{other}"
    assert downloads(commands)[-3:] == [f"mlm_{tag}_1024.pth", f"codes_{tag}", f"vocab_{tag}"]
    # XLM's BPE codes and vocabulary instead of a new sentencepiece model; conversion instead of pretraining
    vocab = find_one(commands, *TOOLS, "vocab-to-dict")
    prep = find_one(commands, "xlm-fairseq-prepare")
    assert_options(prep, bpe_codes=str(work / "downloads" / f"codes_{tag}"), dict=vocab[-1], vocab_size=None)
    assert "# stage 3: convert (released" in text and len(find(commands, "fairseq-train")) == 1
    conv = find_one(commands, "xlm-fairseq-convert")
    assert conv[1:3] == [str(work / "downloads" / f"mlm_{tag}_1024.pth"), str(work / "released")]
    same = find_one(commands, *TOOLS, "same-dict")  # the data numbered as the model's vocabulary
    assert same[-2:] == [str(work / "released" / "dict.txt"), str(work / "data-bin" / "dict.txt")]
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(mt, pretrained_xlm_checkpoint=str(work / "released"), arch="xlm_1024")


def test_wmt16_listing_of_some_stages_from_a_data_dir(tmp_path):
    data = tmp_path / "mirror"
    commands, text = dry_run(tmp_path, ENDE, "--stage", "2", "--stop-stage", "3", "--data-dir", data)
    assert "# stage 1" not in text and "# stage 4" not in text and len(find(commands, "fairseq-train")) == 1
    commands, _ = dry_run(tmp_path, ENDE, "--stop-stage", "1", "--data-dir", data, "--accept-new-checksums")
    links = find(commands, "ln", "-sfn")
    assert find(commands, "curl") == [] and len(links) == 4 and all(c[2].startswith(f"{data}/") for c in links)
    # the test sets from --data-dir's sacrebleu cache only, never downloaded
    assert [c[-1] for c in find(commands, *TOOLS, "testset")] == ["--offline"] * 4
    assert all("--accept-new-checksums" in c for c in find(commands, *TOOLS, "verify"))


def test_xnli_listing_is_xlms_fine_tuning(tmp_path):
    commands, listing = dry_run(tmp_path, XNLI)
    work = str(tmp_path / "cwd" / "work" / "xnli")
    assert downloads(commands) == ["XNLI-1.0.zip", "multinli_1.0.zip"] and set(downloads(commands)) <= published_names()
    assert [opt(c, "--name") for c in find(commands, *TOOLS, "verify")] == downloads(commands)
    convert = find_one(commands, "xlm-fairseq-convert")
    assert convert[1:3] == ["FacebookAI/xlm-mlm-tlm-xnli15-1024", f"{work}/model"]
    train = find_one(commands, "fairseq-train")
    # XLM's glue-xnli.py: Adam (0.9, 0.999) lr 2.5e-5 without decay or clipping, batches of 8, max_len 256,
    # all layers, 20,000-pair epochs
    assert_options(
        train,
        task="xlm_classification",
        pretrained_xlm_checkpoint=f"{work}/model",
        arch="xlm_1024",
        encoder_layers="12",
        train_langs="en",
        valid_langs=XNLI_LANGS,
        truncate_len="256",
        finetune_layers="0:_1",
        batch_size="8",
        lr="2.5e-5",
        validate_interval_updates="2500",
        best_checkpoint_metric="acc",
        distributed_world_size="1",
    )
    assert_shared_optimiser(train, adam_betas="(0.9,0.999)", lr_scheduler="fixed", clip_norm="0")
    test = find_one(commands, "xlm-fairseq-classify")
    assert [c for c in test if c.endswith(".tsv")] == [f"{work}/xnli/test.{x}.tsv" for x in XNLI_LANGS.split(",")]
    assert "75.1" in listing  # the paper's average, printed beside ours

    # an existing model is used as it is; --gpus 0 trains on the CPU; --langs: a subset of the languages
    model = tmp_path / "mine.pt"
    commands, _ = dry_run(tmp_path, XNLI, "--model", model, "--gpus", "0", "--langs", "en,de", "--stage", "3")
    assert not find(commands, "xlm-fairseq-convert") and not downloads(commands)
    assert_options(
        find_one(commands, "fairseq-train"),
        pretrained_xlm_checkpoint=str(model),
        cpu=True,
        valid_langs="en,de",
        distributed_world_size=None,
    )


# the shared optimiser's values, as a recipe would write them out in a command
SHARED_VALUES = re.compile(
    r"""--adam-betas['",\s]+['"]?\(0\.9,\s*0\.98\)|--lr-scheduler['",\s]+['"]?inverse_sqrt"""
    r"""|--clip-norm['",\s]+['"]?5\b|--optimizer['",\s]+['"]?adam"""
)


def test_the_shared_optimiser_flags_are_written_in_one_place():
    places = [p for p in sorted((ROOT / "recipes").rglob("*")) if p.suffix in (".sh", ".py") and "data" not in p.parts]
    places += [ROOT / "bench" / "run.py", ROOT / "tests" / "conftest.py"]
    written = [
        f"{p.relative_to(ROOT)}: {line.strip()}"
        for p in places
        for line in p.read_text(encoding="utf-8").splitlines()
        if SHARED_VALUES.search(line) and not line.lstrip().startswith("#")
    ]
    assert written == []
    assert read_optim_flags() == {
        "--optimizer": "xlm_adam",
        "--adam-betas": "(0.9,0.98)",
        "--lr-scheduler": "inverse_sqrt",
        "--clip-norm": "5",
    }


# ------------------------------------------------------------------------------------------------
# --smoke: every stage for real, on tiny stand-ins of the downloads
# ------------------------------------------------------------------------------------------------


def _score(path):
    return float(re.search(r"=\s*([0-9.]+)", path.read_text()).group(1))


def assert_wmt16_smoke(work, pair, directions, result):
    """Every stage ran and left its marker; the evaluation holds a hypothesis per test sentence and
    scores that are sacreBLEU's on them, gathered in the summary; a re-run skips every stage."""
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert sorted(p.name for p in (work / ".stages").glob("*.done")) == [f"{n}.done" for n in range(1, 6)]
    assert result.stdout.count("Stopping training due to num_updates: 20 >= max_update: 20") == 2  # the smoke budget
    summary = {row.split()[0]: row.split()[1:] for row in (work / "eval" / "summary.txt").read_text().splitlines()[1:]}
    assert sorted(summary) == sorted(directions)
    for direction in directions:
        tgt = direction.split("-")[1]
        refs = (work / "raw" / f"test.{pair}.{tgt}").read_text(encoding="utf-8").splitlines()
        beam5 = work / "eval" / direction / "beam5"
        hyps = (beam5 / "hyp.detok").read_text(encoding="utf-8").splitlines()
        assert len(hyps) == len(refs) == 24, direction
        # sacrebleu -t scored against its cached reference: the raw test side the download stage extracted
        ours, theirs = sacrebleu.corpus_bleu(hyps, [refs]), (beam5 / "sacrebleu.txt").read_text()
        assert f"hyp_len = {ours.sys_len} ref_len = {ours.ref_len})" in theirs, theirs
        assert _score(beam5 / "sacrebleu.txt") == pytest.approx(ours.score, abs=0.05)  # printed to 1 decimal
        greedy, tokenised, detok = (float(x) for x in summary[direction][:3])
        assert (greedy, tokenised, detok) == (
            _score(work / "eval" / direction / "beam1" / "tokenized_bleu.txt"),
            _score(beam5 / "tokenized_bleu.txt"),
            _score(beam5 / "sacrebleu.txt"),
        )


@pytest.mark.slow
def test_wmt16_en_de_smoke_runs_every_stage(tmp_path):
    mirror, work = wmt16_mirror(tmp_path / "mirror", "en-de", valid=24, test=24), tmp_path / "w"
    args = ["--smoke", "--data-dir", mirror, "--work-dir", work]
    result = run_recipe("wmt16_en_de.sh", *args, "--accept-new-checksums")
    assert_wmt16_smoke(work, "de-en", ("en-de", "de-en"), result)
    assert len((work / "checksums.lock").read_text().splitlines()) == 4  # the stand-ins' digests, recorded
    assert len((work / "raw" / "mono.de").read_text(encoding="utf-8").splitlines()) == 2000  # --mono-sentences
    again = run_recipe("wmt16_en_de.sh", *args)
    assert again.returncode == 0 and again.stderr.count(": done before") == 5, again.stderr[-2000:]


@pytest.mark.slow
def test_wmt16_en_ro_smoke_runs_every_stage_supervised(tmp_path):
    mirror, work = wmt16_mirror(tmp_path / "mirror", "en-ro", valid=24, test=24), tmp_path / "w"
    result = run_recipe(
        "wmt16_en_ro.sh", "--smoke", "--supervised", "--data-dir", mirror, "--work-dir", work, "--accept-new-checksums"
    )
    assert_wmt16_smoke(work, "en-ro", ("en-ro", "ro-en"), result)
    # the parallel data out of both archives, MT steps beside AE + BT; into Romanian also without diacritics
    assert len((work / "raw" / "train.en-ro.ro").read_text(encoding="utf-8").splitlines()) == 600
    assert (work / "checkpoints" / "nmt_bt" / "checkpoint_best.pt").is_file()
    header = (work / "eval" / "summary.txt").read_text().splitlines()[0]
    assert "w/o diacritics" in header and (work / "eval" / "en-ro" / "beam5" / "sacrebleu.nodiacritics.txt").is_file()


@pytest.mark.slow
def test_xnli_smoke_runs_every_stage(tmp_path, pretrained):
    """With a tiny model of ours (en, de, ro): fine-tuned on the MultiNLI stand-in, tested in en and de."""
    mirror, work = xnli_mirror(tmp_path / "mirror", langs=("en", "de")), tmp_path / "w"
    sums = checksums_file(tmp_path / "mirror.sha256", sorted(mirror.glob("*.zip")))
    result = run_recipe(
        "xnli.sh",
        "--smoke",
        "--langs",
        "en,de",
        "--model",
        pretrained,
        "--data-dir",
        mirror,
        "--checksums",
        sums,
        "--work-dir",
        work,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert sorted(p.name for p in (work / ".stages").glob("*.done")) == [f"{n}.done" for n in range(1, 6)]
    assert sorted(p.name for p in (work / "xnli").glob("*.tsv")) == [
        "test.de.tsv",
        "test.en.tsv",
        "train.en.tsv",
        "valid.de.tsv",
        "valid.en.tsv",
    ]
    accuracy = json.loads((work / "test_accuracy.json").read_text())
    acc = {name.split(".")[1]: result["accuracy"] for name, result in accuracy.items()}
    assert sorted(acc) == ["de", "en"]
    mean = sum(acc.values()) / 2
    assert f"average {mean:.1f} % over 2 languages (paper, MLM+TLM: 75.1); en {acc['en']:.1f} (85.0)" in result.stdout
