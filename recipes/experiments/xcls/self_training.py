"""Self-training of the classification recipe (``recipe.py --self-train ROUNDS``): German is still
never labelled by anyone but the model.

The pool is the German descriptions of the training packages (``corpus.unlabelled_descriptions``),
read without labels. Round k: the previous classifier (round 0: the English-only one) labels the pool
as German is scored, with English's language id; the ``k * STEP`` most confident part of it joins the
English rows, and a classifier is fine-tuned afresh from the same LM on both, every row read with English's id. The
pseudo-labels' accuracy against the English twins' labels is reported, never trained on."""

import csv
from pathlib import Path

from recipes.experiments.xcls import corpus, report
from recipes.experiments.xcls.report import FINETUNE_LANG
from recipes.train.stages import copy_file, write_json, write_text

STEP = 0.3  # of the pool added per round: the most confident third is ~87 % right at 60 % accuracy
POOL = "pool.de.tsv"


def _rows(tsv: Path):
    with open(tsv, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def make_pool(recipe) -> Path:
    """WORK/self_train/pool.de.tsv (id, text) and its hidden labels beside it, made once."""
    out = recipe.work / "self_train"
    if not (out / POOL).exists():
        xcls = recipe.xcls
        pool = corpus.unlabelled_descriptions(
            recipe.shared, xcls / "train.en.tsv", [xcls / "valid.en.tsv", xcls / "valid.de.tsv"]
        )
        if not pool:
            recipe.fail(f"--self-train: no German description of a training package in {recipe.shared}/en-de/ddtp.de")
        write_text(out / "pool.labels", "".join(label + "\n" for _, label in pool))
        write_text(out / POOL, "id\ttext\n" + "".join(f"pool{i}\t{text}\n" for i, (text, _) in enumerate(pool)))
        recipe.log(f"self-training pool: {len(pool)} German descriptions of training packages, unlabelled")
    return out


def pseudo_labels(recipe, teacher: Path, pool_dir: Path, fraction: float):
    """The teacher's labels of the most confident ``fraction`` of the pool: [(row, label)] and their
    accuracy against the hidden labels (%)."""
    predicted = teacher / "pool_predictions" / "pool.de.pred.tsv"
    if not predicted.exists():
        recipe.classify(teacher, [pool_dir / POOL], FINETUNE_LANG, predicted.parent, teacher / "pool_predictions.log")
    pool, scored = _rows(pool_dir / POOL), _rows(predicted)
    order = sorted(range(len(pool)), key=lambda i: -float(scored[i]["probability"]))
    count = min(len(pool), round(fraction * len(pool)))
    chosen = sorted(order[:count])
    hidden = (pool_dir / "pool.labels").read_text(encoding="utf-8").split("\n")
    right = sum(scored[i]["prediction"] == hidden[i] for i in chosen)
    return [(pool[i], scored[i]["prediction"]) for i in chosen], round(100 * right / max(1, len(chosen)), 2)


def run(recipe, row: str, pretrained: str, seed: int, rounds: int) -> list:
    """``rounds`` rounds from the seed's English-only classifier; returns each round's evaluation,
    with its pseudo-labels' count and accuracy."""
    pool_dir = make_pool(recipe)
    teacher, out = recipe.classifier_dir(row, seed), []
    for k in range(1, rounds + 1):
        data = recipe.work / "self_train" / (f"{row}_round{k}" + ("" if seed == 1 else f"_seed{seed}"))
        chosen, accuracy = pseudo_labels(recipe, teacher, pool_dir, min(1.0, k * STEP))
        data.mkdir(parents=True, exist_ok=True)
        for name in ("train.en.tsv", "valid.en.tsv", "valid.de.tsv"):
            copy_file(recipe.xcls / name, data / name)
        lines = "".join(f"{r['id']}\t{label}\t{r['text']}\n" for r, label in chosen)
        write_text(data / "train.de.tsv", "id\tlabel\ttext\n" + lines)
        name = f"{row}_self{k}"
        result = recipe.finetune(name, pretrained, seed, data=data)
        result.update(pseudo_rows=len(chosen), pseudo_accuracy=accuracy)
        write_json(recipe.classifier_dir(name, seed) / "self_training.json", result)
        out.append(result)
        teacher = recipe.classifier_dir(name, seed)
    return out


def summary(row: str, seeds, english_only, trained) -> dict:
    """Each round over the seeds (``trained``: each seed's rounds; ``english_only``: each seed's classifier
    before them): the accuracies' spread, German's runs (English id), and the pseudo-labelled rows and
    their accuracy against the hidden labels."""
    rounds = []
    for k, runs in enumerate(zip(*trained), 1):
        pseudo = {key: [r[key] for r in runs] for key in ("pseudo_rows", "pseudo_accuracy")}
        german = [r["acc_de_en_id"] for r in runs]
        rounds.append({"round": k, **pseudo, **report.spreads(runs), "acc_de_en_id_runs": german})
    german = [r["acc_de_en_id"] for r in english_only]
    return {
        "row": row,
        "seeds": list(seeds),
        "fraction_per_round": STEP,
        "english_only_acc_de_en_id": german,
        "rounds": rounds,
    }
