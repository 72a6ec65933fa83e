"""One command for any languages: raw text files in, a scored and exported translator out.

    bash recipes/train.sh --pairs en-ro=PREFIX [--pairs en-de=PREFIX ...] [--mono ro=FILE ...]
                          [--valid en-ro=PREFIX] [--test en-ro=PREFIX] [--score NAME:en-ro=PREFIX]
                          [--unsupervised] [--minutes 30 | --hours H] [--dict de-en=FILE] --work-dir DIR
                          [--device auto|cpu|cuda] [--processes N] [--nodes N --node-rank R --master HOST:PORT]

Raw UTF-8 text, one sentence a line; ``PREFIX`` names line-aligned ``PREFIX.SRC`` and ``PREFIX.TGT``. It
does what the quickstart does (the quickstart is this command on the bundled en-de sample), for any
languages: valid and test sets split off the pairs where none are given (blocks of consecutive lines; no
sentence in two splits; with ``--unsupervised`` no line whose translation is on the other side), preprocessing
(Moses or a segmenter for scripts without spaces, one joint sentencepiece vocabulary), pretraining
(``cross_lingual_lm``: MLM on every language, + TLM on the pairs), translation (``translation_lm``: AE +
back-translation, + MT on the pairs), the checkpoint of the best validation BLEU scored in every direction
with sacreBLEU beside copying the source, the lexicon probe with ``--dict``, ``DIR/model`` exported for
fairseq, the hub and CTranslate2, a figure and a report (``DIR/report.md``, ``report.json``).

Every input is read and checked before anything trains: a bad one is one line naming the option and the
file, exit status 2. Re-running skips finished stages and resumes an interrupted one; ``--fresh`` starts
over. The path of a run through the engine's modules: ``recipes/train/__init__.py``."""

import argparse
import shutil
import sys
from pathlib import Path

from preprocess.errors import ArgumentParser, UserError
from preprocess.segment import check_bleu, parse_segmenters, segmenter
from recipes.train import stages
from recipes.train.corpus import prepared_text, words_and_characters
from recipes.train.hardware import choose_hardware, choose_precision
from recipes.train.inputs import Inputs
from recipes.train.lm_start import LMStart
from recipes.train.plan import default_lexicon, make_plan, parse_lexicon, parse_size
from recipes.train.training_run import TrainingRun


def build_parser(name: str = "train") -> argparse.ArgumentParser:
    p = ArgumentParser(
        name=name,
        prog=f"bash recipes/{name}.sh",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Outputs in DIR: raw/ (the text each split got), data-bin/, checkpoints/, logs/, out/ (generated "
        "and scored text per test set), model/ (the exported translator), figures/, report.md, report.json.",
    )
    add = p.add_argument
    add("--langs", help="the languages, comma-separated, in the order of their ids (default: as the files name them)")
    add(
        "--pairs",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="parallel text PREFIX.SRC / PREFIX.TGT (repeatable; files of one pair are joined)",
    )
    add(
        "--mono",
        action="append",
        default=[],
        metavar="LANG=FILE",
        help="monolingual text (repeatable); a language without: its sides of the pairs (with --unsupervised: "
        "its unpaired halves, always added)",
    )
    add(
        "--valid",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="a pair's validation set (default: blocks of its pairs, 2.5 %% up to 500 lines)",
    )
    add(
        "--test",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="a pair's held-out test set (default: blocks of its pairs, 5 %% up to 1,000 lines); training text "
        "keeps none of the sentences of valid and test sets",
    )
    add(
        "--score",
        action="append",
        default=[],
        metavar="NAME:SRC-TGT=PREFIX",
        help="also score this parallel text after training (changes nothing in training; a re-run only scores)",
    )
    add(
        "--dict",
        action="append",
        default=[],
        metavar="SRC-TGT=FILE",
        help="a bilingual dictionary ('src tgt' a line) for the lexicon probe of the pretrained LM",
    )
    add(
        "--unsupervised",
        action="store_true",
        help="no pair is seen: MLM pretraining (no TLM) and AE + back-translation on unpaired halves of the pairs "
        "and the monolingual text (default: semi-supervised: MLM+TLM, then MT + AE + BT)",
    )
    add(
        "--lexicon",
        metavar="USES",
        help="with --unsupervised: what a bilingual lexicon induced for each pair from its unpaired text "
        "(xlm-fairseq-lexicon induce) feeds, comma-separated: tlm, every line beside its word-by-word "
        "translation for TLM in pretraining; mt, the same pairs for MT fading out in the first translation "
        "updates; cs, a code-switched copy of every line (a quarter of its translatable words replaced) for "
        "MLM; emb, the LM's piece embeddings initialised from the lexicon's word vectors (one pair); none "
        "(default: emb with one pair, tlm with several)",
    )
    add(
        "--lm",
        metavar="DIR",
        help="start from this pretrained LM of ours (a model dir or checkpoint): its vocabulary, text pipeline and "
        "size; its languages must cover the run's (add one first: xlm-fairseq-convert LM OUT --add-lang LANG "
        "--text FILE). A language of the LM in no pair may come as --mono: pretraining keeps it, translation not",
    )
    add("--minutes", type=float, help="the whole run's budget (default 30)")
    add("--hours", type=float, help="the budget in hours, instead of --minutes")
    add(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to train (auto: cuda when torch sees a GPU; with --plan, cuda plans for GPUs that are not here)",
    )
    add(
        "--processes",
        type=int,
        help="data-parallel processes on each machine (default: one per GPU on cuda, 1 on cpu; on cpu several "
        "share its cores over gloo); each reads a whole batch, so an update grows with them",
    )
    add("--nodes", type=int, default=1, help="machines training together, each running this command (default 1)")
    add("--node-rank", type=int, default=0, help="this machine's place among --nodes, 0 to N-1 (0 scores, exports)")
    add(
        "--master",
        metavar="HOST:PORT",
        help="with --nodes: node 0's address and a free port on it; --work-dir must be one directory all share",
    )
    add("--size", metavar="DIMSxLAYERS", help="the model's size instead of the plan's choice, for example 512x6")
    add("--vocab-size", type=int, help="subword vocabulary (default: from the text's size)")
    add(
        "--segment",
        action="append",
        default=[],
        metavar="LANG=NAME",
        help="word segmenter of a script without spaces (default: zh jieba, ja mecab, th pythainlp; none: Moses)",
    )
    add(
        "--precision",
        choices=("auto", "fp32", "bf16", "fp16"),
        default="auto",
        help="pretraining's number format (auto: on CPUs bf16 where the CPU multiplies it in hardware, on GPUs "
        "bf16 where the GPU has it, else fp16); on CPUs translation trains in fp32 with pairs, in this format "
        "without; on GPUs both in this format",
    )
    add(
        "--tiny",
        action="store_true",
        help="a pipeline check in a few minutes (what CI runs): short inputs, capped updates",
    )
    add(
        "--keep-checkpoints",
        action="store_true",
        help="keep every checkpoint translation validates (checkpoints/translate/checkpoint_EPOCH_UPDATES.pt), not "
        "only the best and the last: to compare them (python -m recipes.experiments.criterion)",
    )
    add("--fresh", action="store_true", help="delete the work directory's previous results first")
    add("--plan", action="store_true", help="check the inputs, print the split and the plan, and stop (writes nothing)")
    add("--work-dir", required=True, help="where everything goes")
    add("--recipe", default="train", help=argparse.SUPPRESS)  # the quickstart's name in its messages
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[argv.index("--recipe") + 1] if "--recipe" in argv[:-1] else "train"
    args = build_parser(name).parse_args(argv)

    def refuse(message):
        stages.fail(name, message, status=2)

    try:
        if args.minutes is not None and args.hours is not None:
            raise UserError("--minutes and --hours: give one budget")
        minutes = args.hours * 60 if args.hours is not None else args.minutes if args.minutes is not None else 30.0
        if minutes <= 0:
            given = f"--hours {args.hours:g}" if args.hours is not None else f"--minutes {args.minutes:g}"
            raise UserError(f"{given}: a positive number of {'hours' if args.hours is not None else 'minutes'}")
        hardware = choose_hardware(args)
        if args.fresh and hardware.node_rank:
            raise UserError("--fresh: on node 0 only (the other nodes share its work directory)")
        size = parse_size(args.size) if args.size else None
        if args.vocab_size is not None and args.vocab_size < 100:
            raise UserError(f"--vocab-size {args.vocab_size}: at least 100")
        if args.lexicon is not None and not args.unsupervised:
            raise UserError("--lexicon goes with --unsupervised (with pairs, TLM reads the real ones)")
        lexicon = parse_lexicon(args.lexicon) if args.lexicon is not None else ()
        work = Path(args.work_dir)
        if work.exists() and not work.is_dir():
            raise UserError(f"--work-dir {work}: exists and is not a directory")
        lm = LMStart(args.lm) if args.lm else None
        inputs = Inputs(args, kept=lm.langs if lm else ())
        if args.unsupervised and args.lexicon is None:
            lexicon = default_lexicon(len(inputs.pairs), lm is not None)
        if lm:
            lm.check_langs(inputs.langs)
            if args.vocab_size is not None or args.segment or args.size:
                raise UserError("--vocab-size, --segment and --size come from the LM with --lm")
        segmenters = parse_segmenters(args.segment, inputs.langs)
        if lm:
            segmenters = {k: v for k, v in lm.settings.segmenters.items() if k in inputs.langs}
        for seg in set(segmenters.values()):
            segmenter(seg)
        if "emb" in lexicon and (len(inputs.pairs) > 1 or lm):
            raise UserError("--lexicon emb: one pair and no --lm (each pair's lexicon is a space of its own)")
        for a, b in inputs.pairs:
            for lang in (a, b):
                check_bleu(lang, f"--pairs {a}-{b}")
        text = prepared_text(inputs, args, lexicon, segmenters)
        # sizes from the real text: the word-by-word pairs of --lexicon repeat it
        words, characters = words_and_characters({**text, "train": {} if lexicon else text["train"]}, segmenters)
        precision = choose_precision(args.precision, hardware.device)
    except UserError as e:
        refuse(str(e))
    plan = make_plan(
        inputs.langs,
        list(inputs.pairs),
        "unsupervised" if args.unsupervised else "semi",
        args.tiny,
        minutes,
        precision,
        words,
        characters,
        args.vocab_size,
        lm,
        lexicon,
        hardware,
        size,
    )
    lines = plan.describe(words)
    print(f"== {name}: {work.resolve()}")
    for line in lines + (text["notes"] if args.plan else []):
        print(f"   {line}", flush=True)
    if args.plan:
        return 0
    if args.fresh and work.exists():
        shutil.rmtree(work)
    TrainingRun(args, inputs, text, plan, segmenters, lines, lm).run()
    return 0
