"""Predict with a fine-tuned classifier (``--task xlm_classification``) on classification TSV files,
and score the predictions where the file has labels::

    xlm-fairseq-classify ckpt/xcls --checkpoint-file checkpoint_best.pt \\
        DATA/valid.en.tsv DATA/valid.de.tsv [--out-dir preds/] [--json results.json]

The language of a file is its name's (``{split}.{lang}.tsv``) unless ``--lang`` says otherwise.
Prints one line per file (rows, accuracy); ``--out-dir`` gets ``{file name}.pred.tsv`` per file
(``id``, ``prediction``, ``probability``, and ``label`` when known), ``--json`` the accuracies.
Outputs are written whole or not at all."""

import json
import os
import sys

from preprocess.classification import read_tsv
from preprocess.errors import ArgumentParser, UserError, run_command
from preprocess.files import atomic_write


def file_lang(path: str, lang=None) -> str:
    if lang:
        return lang
    parts = os.path.basename(path).split(".")
    if len(parts) == 3 and parts[2] == "tsv":
        return parts[1]
    raise UserError(f"{path}: cannot tell its language from the name (not SPLIT.LANG.tsv); give --lang")


def classify_file(clf, path: str, lang: str, max_tokens: int = 4096):
    """(rows, predictions, probabilities of the predictions, accuracy in % or None)."""
    rows = read_tsv(path, need_label=False)
    if rows.labels is not None:
        unknown = sorted(set(rows.labels) - set(clf.labels))
        if unknown:
            raise UserError(f"{path}: label '{unknown[0]}' is not one of the model's ({','.join(clf.labels)})")
    probs = clf.probabilities(rows.texts, lang, rows.texts_b, max_tokens=max_tokens)
    best, index = probs.max(-1)
    predictions = [clf.labels[i] for i in index.tolist()]
    accuracy = None
    if rows.labels is not None:
        accuracy = 100.0 * sum(p == g for p, g in zip(predictions, rows.labels)) / len(rows)
    return rows, predictions, best.tolist(), accuracy


def main(argv=None) -> int:
    p = ArgumentParser(
        name="classify",
        prog="xlm-fairseq-classify",
        description=__doc__.split("\n\n")[0],
        examples=["xlm-fairseq-classify ckpt/xcls DATA/valid.en.tsv DATA/valid.de.tsv --out-dir preds/"],
    )
    p.add_argument("model", help="a save dir, model dir or checkpoint of --task xlm_classification")
    p.add_argument("tsv", nargs="+", help="classification files (id, text [, text_b] [, label] columns)")
    p.add_argument("--checkpoint-file", default="checkpoint_best.pt", help="in the model dir (default: %(default)s)")
    p.add_argument("--lang", help="the language of every file (default: from each name, SPLIT.LANG.tsv)")
    p.add_argument(
        "--lang-id",
        help="the language id of every row: own (each file its language's) or a language, "
        "e.g. en (default: what the classifier was fine-tuned with, --lang-id of xlm_classification)",
    )
    p.add_argument("--out-dir", help="write FILE.pred.tsv here for each file")
    p.add_argument("--json", help="write the accuracies to this JSON file")
    p.add_argument("--max-tokens", type=int, default=4096, help="tokens per batch (default: %(default)s)")
    p.add_argument("--cpu", action="store_true", help="stay on the CPU even if a GPU is there")

    def run(argv):
        args = p.parse_args(argv)
        langs = [file_lang(path, args.lang) for path in args.tsv]
        import torch

        from xlm_fairseq.inference.classification_hub import XLMClassificationHubInterface

        clf = XLMClassificationHubInterface.from_pretrained(
            args.model, checkpoint_file=args.checkpoint_file, lang_id=args.lang_id
        )
        if torch.cuda.is_available() and not args.cpu:
            clf.cuda()
        results = {}
        for path, lang in zip(args.tsv, langs):
            rows, predictions, best, accuracy = classify_file(clf, path, lang, args.max_tokens)
            name = os.path.basename(path)
            results[name] = {"lang": lang, "rows": len(rows), "accuracy": accuracy}
            score = "no labels" if accuracy is None else f"accuracy {accuracy:.2f} %"
            print(f"{name} ({lang}): {len(rows)} rows, {score}")
            if args.out_dir:
                with atomic_write(os.path.join(args.out_dir, name[: -len(".tsv")] + ".pred.tsv")) as f:
                    columns = ["id", "prediction", "probability"] + (["label"] if rows.labels else [])
                    f.write("\t".join(columns) + "\n")
                    for i, (pred, prob) in enumerate(zip(predictions, best)):
                        gold = [rows.labels[i]] if rows.labels else []
                        f.write("\t".join([rows.ids[i], pred, f"{prob:.4f}", *gold]) + "\n")
        if args.json:
            with atomic_write(args.json) as f:
                json.dump(results, f, indent=1)
        return 0

    return run_command("classify", run, argv)


if __name__ == "__main__":
    sys.exit(main())
