"""Cross-lingual classification, XNLI-style, offline: pretrain, fine-tune on English, predict German.

    bash recipes/xcls.sh [--tiny] [--experiment] [--inits random,mlm,mlm_tlm] [--lm-minutes 15,30]
    bash recipes/xcls.sh --experiment --device cuda --size 256x4 --pretrain-max-tokens 16384 \
        --lm-minutes 3 --lm-clock time --jobs 3     # one GPU: the three inits side by side

Task: the Debian package-description topics of ``recipes/data/xcls`` (9 labels; English training rows,
English and German validation rows of the same packages; ``--experiment``: the whole set in
``../shared/data/xcls``). German is never trained on: its accuracy is zero-shot transfer.

Runs, one per ``--inits`` entry:
  random    the classifier from random initialisation (the vocabulary and pipeline of the data-bin)
  mlm       pretrained with MLM on the en and de monolingual streams
  mlm_tlm   pretrained with MLM on them and TLM on the en-de pairs (the same sentences, aligned)
Pretraining text (``recipes/experiments/xcls/corpus.py``, ``--corpus``; its subwords: ``--vocab-size``) has no
description of a package of the set: none at all, or (``shared+ddtp``) those of the packages outside its
topics. Each LM trains to each of its budgets — updates (``--pretrain-updates``) or CPU-minutes
(``--lm-minutes``, counted in updates from the LM's speed measured alone, as the scaling sweep does) —
and is scored at each: XLM's perplexity, the lexicon probe, en-de sentence retrieval, and a classifier
fine-tuned on English (the epoch of best *English* accuracy kept; ``--finetune-budgets last``: the last
budget only), which scores German with German's language id (XLM) and with English's (``--lang-id en``).
The row of best German accuracy (English id) is fine-tuned again with ``--seeds``, each seed then self-trained
with ``--self-train ROUNDS`` on the German descriptions of the training packages, their labels never read
(``recipes/experiments/xcls/self_training.py``). TF-IDF + logistic regression and the majority class are the
references (``recipes/experiments/xcls/baselines.py``; recipes/README.md).

On a GPU (``--device cuda``) a small model's step is bound by launches, not arithmetic: ``--jobs N`` runs N inits
(then N seeds) side by side, ``--lm-clock time`` gives each LM its minutes of training time as they go.

Results: WORK/results.{md,json}, WORK/figures/xcls.png (``--self-train``: and xcls-self-training.png); a re-run
skips finished runs (``--fresh`` redoes all).
"""

from pathlib import Path

from preprocess.errors import ArgumentParser
from recipes.experiments import measure
from recipes.experiments.driver import ROOT
from recipes.experiments.xcls.recipe import Recipe
from recipes.experiments.xcls.settings import CORPORA


def main(argv=None):
    p = ArgumentParser(name="xcls", prog="recipes/xcls.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny data, model and budgets (a pipeline check; what CI runs)")
    p.add_argument(
        "--experiment",
        action="store_true",
        help="the shared corpora, the whole topic set, random, MLM, MLM+TLM, LMs of 15 and 30 CPU-minutes",
    )
    p.add_argument("--inits", help="comma-separated: random, mlm, mlm_tlm (default random,mlm_tlm; --experiment all)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--lm-minutes",
        type=measure.minutes_list,
        help="LM budgets in CPU-minutes, e.g. 30,60: each LM scored and fine-tuned at each "
        "(--experiment default 15,30)",
    )
    budget.add_argument("--pretrain-updates", type=int, help="one LM budget in updates (default 2500; --tiny 60)")
    p.add_argument(
        "--finetune-budgets",
        choices=("every", "last"),
        default="every",
        help="fine-tune the LM of every budget (default) or of the last only (the others scored as LMs; "
        "a re-run with 'every' adds their classifiers)",
    )
    p.add_argument(
        "--lm-clock",
        choices=("updates", "time"),
        default="updates",
        help="--lm-minutes as updates from the LM's speed measured alone (default: equal compute "
        "whatever else the machine does), or as minutes of training time (a GPU, --jobs)",
    )
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where training runs: cpu (fairseq's --cpu; the tables' machine) or cuda (TF32 matmuls)",
    )
    p.add_argument("--size", type=measure.model_size, help="the model as DIMSxLAYERS (default 128x3)")
    p.add_argument("--pretrain-max-tokens", type=int, help="tokens of one pretraining step (default 2048)")
    p.add_argument("--pretrain-lr", type=float, help="peak learning rate of pretraining (default 1e-3)")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="inits, then seeds, trained this many at a time (default 1; a GPU: 3, with --lm-clock time "
        "or --pretrain-updates)",
    )
    p.add_argument("--seeds", type=int, help="fine-tuning seeds of the best row (default 1; --experiment 3)")
    p.add_argument("--finetune-epochs", type=int, help="epochs of each fine-tuning (default 8; --experiment 6)")
    p.add_argument("--finetune-lr", type=float, help="peak learning rate of the fine-tuning (default 5e-4)")
    p.add_argument(
        "--self-train",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="then self-train the best row's seeds this many rounds on unlabelled German descriptions of "
        "the training packages (default 0; recipes/experiments/xcls/self_training.py)",
    )
    p.add_argument(
        "--corpus",
        choices=CORPORA,
        help="pretraining text: sample (shipped manuals; default), shared "
        "(no descriptions; --experiment's), shared+ddtp (and non-topic packages' descriptions)",
    )
    p.add_argument(
        "--vocab-size",
        dest="vocab",
        type=int,
        metavar="N",
        help="subwords of the sentencepiece model of the pretraining text (default 4000; --tiny 1000)",
    )
    p.add_argument("--work-dir", help="where everything goes (default runs/xcls-{sample,tiny,experiment})")
    p.add_argument(
        "--shared-data",
        default=str(ROOT.parent / "shared" / "data"),
        help="the Debian corpora (a folder recipes/data/debian.py wrote), for --experiment, --corpus "
        "shared*, the probe and --self-train's pool (default ../shared/data)",
    )
    p.add_argument("--fresh", action="store_true", help="delete the work directory first")
    args = p.parse_args(argv)
    if args.tiny and args.experiment:
        p.error("--tiny and --experiment exclude each other")
    if args.experiment and not (Path(args.shared_data) / "xcls" / "train.en.tsv").exists():
        p.error(f"--shared-data: {args.shared_data}/xcls/train.en.tsv not found")
    need = {"shared": "en-de/docs.natural.en", "shared+ddtp": "en-de/ddtp.en"}.get(args.corpus)  # what each reads
    if need and not (Path(args.shared_data) / need).exists():
        p.error(f"--corpus {args.corpus}: {args.shared_data}/{need} not found (see --shared-data)")
    if args.self_train < 0:
        p.error(f"--self-train: expected 0 or more rounds, got {args.self_train}")
    if args.self_train and not (Path(args.shared_data) / "en-de" / "ddtp.de").exists():
        p.error(f"--self-train: {args.shared_data}/en-de/ddtp.de not found (its pool; see --shared-data)")
    for name, value in (("--seeds", args.seeds), ("--jobs", args.jobs), ("--vocab-size", args.vocab)):
        if value is not None and value < 1:
            p.error(f"{name}: expected 1 or more, got {value}")
    if args.device == "cuda" and not __import__("torch").cuda.is_available():
        p.error("--device cuda: torch sees no GPU here (run without it for the CPU)")
    Recipe(args).main()
