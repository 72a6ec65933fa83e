#!/usr/bin/env python3
"""Which unsupervised lexicon induction aligns en and de best from the text `--unsupervised` may read?

    python -m recipes.experiments.lexicon [--sizes x1,docs,...] [--methods coocmap,ppmi-svd,word2vec] [--out RECORD]

Texts (``--sizes``), each unpaired as ``recipes/train/corpus.py``'s ``unpaired`` makes the quickstart's: the
English of the first half of each parallel corpus, the German of the second, a German line dropped when any
of its translations is on the English side; no line of the quickstart's valid or test sets; at most 60 words:
  * ``x1``: the quickstart's ``--unsupervised`` text (the sample's mono files and its 20,000 pairs' halves);
  * ``docs``: + the shared manuals (``../shared/data/en-de/docs``, the sample's source corpus);
  * ``docs_gettext``: + the shared interface strings (``en-de/gettext``);
  * ``docs_gettext_fortunes``: + ``mono/fortunes`` of both languages.
The man pages and the German package descriptions stay out: they translate their English counterparts
without alignment, so no check could drop their hidden pairs.

Methods (``--methods``), all seeded by the strings spelled alike and nothing else:
  * ``coocmap``: ``preprocess/lexicon.py`` (co-occurrence rows over the dictionary's words, mutual-CSLS
    self-learning), what ``xlm-fairseq-lexicon induce`` runs;
  * ``ppmi-svd``: PPMI co-occurrence vectors reduced by SVD to 300 dimensions (Levy et al. 2015), an
    orthogonal map seeded by the identical words of 4+ letters (Smith et al. 2017), Procrustes alternating
    with CSLS neighbours of the 4,000 most frequent words both ways (Artetxe et al. 2018);
  * ``word2vec``: skip-gram vectors (gensim, 300 dimensions, window 5, 10 epochs; ``pip install gensim``)
    mapped the same way.
Scored on ``../shared/data/bli/de-en.dev.txt`` (de -> en): P@1 by NN and CSLS among all words and among the
1,000 and 2,000 most frequent words of each side; seconds of induction on this machine (2 cores)."""

import argparse
import json
import platform
import re
import statistics
import subprocess
import time
from pathlib import Path

import torch

from preprocess.lexicon import centred, csls_scores, induce, read_dictionary, score_vectors, tokens
from recipes.experiments import figures
from recipes.train.corpus import Pairs, unpaired

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "recipes" / "data" / "en-de-docs"
SHARED = ROOT.parent / "shared" / "data"
SIZES = ("x1", "docs", "docs_gettext", "docs_gettext_fortunes")
METHODS = ("coocmap", "ppmi-svd", "word2vec")
MAX_WORDS = 60
VOCABULARY, DIM, FREQUENT, ITERATIONS = 20000, 300, 4000, 5
SEED_WORD = re.compile(r"[^\W\d_]{4,}")


# ------------------------------------------------------------------------------------------------
# texts
# ------------------------------------------------------------------------------------------------


def _lines(path: Path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _normal(line: str) -> str:
    return re.sub(r"\s+", " ", line.strip().lower())


def texts(size: str) -> dict:
    """{lang: lines} of one text size (see the docstring)."""
    held = {
        _normal(x)
        for split in ("valid", "test")
        for lang in ("en", "de")
        for x in _lines(SAMPLE / f"{split}.en-de.{lang}")
    }

    def usable(line):
        return line.strip() and len(line.split()) <= MAX_WORDS and _normal(line) not in held

    def corpus(name):
        pairs = [
            (e, d)
            for e, d in zip(_lines(SHARED / f"en-de/{name}.en"), _lines(SHARED / f"en-de/{name}.de"))
            if usable(e) and usable(d)
        ]
        return Pairs("en", "de", [e for e, _ in pairs], [d for _, d in pairs])

    sample = Pairs("en", "de", _lines(SAMPLE / "train.en-de.en"), _lines(SAMPLE / "train.en-de.de"))
    mono = {lang: _lines(SAMPLE / f"mono.{lang}") for lang in ("en", "de")}
    corpora = [sample]
    if size != "x1":
        corpora = [sample + corpus("docs")]
    if "gettext" in size:
        corpora.append(corpus("gettext"))
    if "fortunes" in size:
        mono = {lang: lines + _lines(SHARED / f"mono/fortunes.{lang}") for lang, lines in mono.items()}
    text, _ = unpaired(mono, corpora)
    return {lang: [line for line in lines if usable(line)] for lang, lines in text.items()}


# ------------------------------------------------------------------------------------------------
# the two comparison methods: dense vectors + an orthogonal map
# ------------------------------------------------------------------------------------------------


def ppmi_svd_vectors(lines, size=VOCABULARY, window=5, dim=DIM):
    """(words, vectors): PPMI co-occurrence rows (1/distance, context counts smoothed by 0.75), SVD."""
    sentences = [tokens(line) for line in lines]
    counts = {}
    for s in sentences:
        for w in s:
            counts[w] = counts.get(w, 0) + 1
    words = [w for w in sorted(counts, key=counts.get, reverse=True)[:size] if counts[w] >= 3]
    index = {w: i for i, w in enumerate(words)}
    rows, cols, weights = [], [], []
    for s in sentences:
        ids = [index.get(w, -1) for w in s]
        for i, a in enumerate(ids):
            if a < 0:
                continue
            for j in range(max(0, i - window), min(len(ids), i + window + 1)):
                if j != i and ids[j] >= 0:
                    rows.append(a)
                    cols.append(ids[j])
                    weights.append(1.0 / abs(i - j))
    n = len(words)
    m = torch.sparse_coo_tensor([rows, cols], torch.tensor(weights, dtype=torch.float64), (n, n)).coalesce()
    (r, c), v = m.indices(), m.values()
    total = v.sum()
    word_sum = torch.zeros(n, dtype=torch.float64).index_add_(0, r, v)
    context = torch.zeros(n, dtype=torch.float64).index_add_(0, c, v) ** 0.75
    pmi = torch.log(v * total / word_sum[r] / (context[c] / context.sum() * total))
    keep = pmi > 0
    ppmi = torch.sparse_coo_tensor(torch.stack([r[keep], c[keep]]), pmi[keep].float(), (n, n)).coalesce()
    torch.manual_seed(0)
    u, s, _ = torch.svd_lowrank(ppmi, q=min(dim, n - 1), niter=4)
    return words, centred(u * s.sqrt())


def word2vec_vectors(lines, size=VOCABULARY, dim=DIM):
    from gensim.models import Word2Vec

    model = Word2Vec(
        [tokens(line) for line in lines],
        vector_size=dim,
        window=5,
        min_count=3,
        sg=1,
        epochs=10,
        workers=2,
        seed=0,
        max_final_vocab=size,
    )
    words = list(model.wv.index_to_key)
    return words, centred(torch.tensor(model.wv.vectors[: len(words)]))


def csls_nearest(src, tgt):
    similarity = src @ tgt.T
    return csls_scores(similarity, similarity, similarity.T).argmax(1)


def procrustes_map(src_words, src, tgt_words, tgt):
    """src's vectors mapped orthogonally into tgt's: seeded by identical words of 4+ letters, then
    Procrustes on the CSLS neighbours of the frequent words, both ways."""
    tgt_index = {w: i for i, w in enumerate(tgt_words)}
    pairs = torch.tensor(
        [(i, tgt_index[w]) for i, w in enumerate(src_words) if w in tgt_index and SEED_WORD.fullmatch(w)]
    )
    f = min(FREQUENT, len(src), len(tgt))
    for _ in range(ITERATIONS):
        u, _, vt = torch.linalg.svd(src[pairs[:, 0]].T @ tgt[pairs[:, 1]])
        mapped = src[:f] @ (u @ vt)
        forward, backward = csls_nearest(mapped, tgt[:f]), csls_nearest(tgt[:f], mapped)
        pairs = torch.cat(
            [torch.stack([torch.arange(f), forward], 1), torch.stack([backward, torch.arange(f)], 1)]
        ).unique(dim=0)
    return src @ (u @ vt)


# ------------------------------------------------------------------------------------------------


def run_method(method: str, text: dict, gold: dict) -> dict:
    start = time.time()
    if method == "coocmap":
        lexicon = induce("de", text["de"], "en", text["en"])
        src_words, src, tgt_words, tgt = lexicon.src_words, lexicon.src_vectors, lexicon.tgt_words, lexicon.tgt_vectors
    else:
        vectors = ppmi_svd_vectors if method == "ppmi-svd" else word2vec_vectors
        src_words, src = vectors(text["de"])
        tgt_words, tgt = vectors(text["en"])
        src = procrustes_map(src_words, src, tgt_words, tgt)
    seconds = round(time.time() - start, 1)
    return {"method": method, "seconds": seconds, "precision": score_vectors(src_words, src, tgt_words, tgt, gold)}


def machine() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = re.search(r"Model name:\s*(.+)", lscpu).group(1).strip()
        flags = re.search(r"Flags:\s*(.+)", lscpu).group(1).split()
        isa = "AMX" if "amx_bf16" in flags else "AVX-512 BF16" if "avx512_bf16" in flags else "AVX2"
        return f"{name}, {torch.get_num_threads()} threads, {isa}"
    except (OSError, AttributeError):
        return platform.processor()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m recipes.experiments.lexicon", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(SIZES), help=f"texts, of {', '.join(SIZES)} (default all)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"of {', '.join(METHODS)} (default all)")
    p.add_argument("--dict", default=str(SHARED / "bli" / "de-en.dev.txt"), help="de-en MUSE dictionary")
    p.add_argument("--out", type=Path, help="write the record (JSON) here")
    p.add_argument("--figure", type=Path, help="draw the record's figure here (PNG)")
    p.add_argument("--table", type=Path, metavar="RECORD", help="print RECORD's table (and --figure) and stop")
    p.add_argument(
        "--levers",
        type=Path,
        nargs="+",
        metavar="REPORT",
        help="instead: the table (and --figure) of train.sh --unsupervised runs' report.json files, by what "
        "--lexicon fed (e.g. recipes/results/train-*-quickstart-unsupervised*.json)",
    )
    args = p.parse_args(argv)
    if args.levers:
        runs = sorted(
            (run for path in args.levers for run in lever_runs(path) if run["supervision"] == "unsupervised"),
            key=lambda r: (r["pair"], r["uses"] != "none", r["uses"], r["precision"], r["machine"], r["file"]),
        )
        print(levers(runs))
        if args.figure:
            figures.levers(runs, args.figure)
        return
    if args.table:
        record = json.loads(args.table.read_text(encoding="utf-8"))
        print(table(record))
        if args.figure:
            figures.lexicon(record, args.figure)
        return
    sizes, methods = args.sizes.split(","), args.methods.split(",")
    for name, values, known in (("--sizes", sizes, SIZES), ("--methods", methods, METHODS)):
        unknown = [v for v in values if v not in known]
        if unknown:
            p.error(f"{name}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    gold = read_dictionary(args.dict)
    record = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "dict": args.dict, "rows": []}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    record["commit"] = commit
    for size in sizes:
        text = texts(size)
        words = {lang: sum(len(line.split()) for line in lines) for lang, lines in text.items()}
        for method in methods:
            row = {"text": size, "words": words, **run_method(method, text, gold)}
            record["rows"].append(row)
            bands = " ".join(f"{b}: {r['nn_p@1']:.1f}/{r['csls_p@1']:.1f}" for b, r in row["precision"].items())
            print(
                f"{size} ({words['en']:,} en / {words['de']:,} de words) {method}: {row['seconds']} s; "
                f"P@1 NN/CSLS {bands}",
                flush=True,
            )
            if args.out:
                args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(table(record))
    if args.figure:
        figures.lexicon(record, args.figure)


def table(record: dict) -> str:
    """The record as a markdown table: P@1 NN / CSLS per text and method, and seconds."""
    lines = [
        f"{record['machine']}, {record['date']}, commit {record['commit']}; de→en on `{Path(record['dict']).name}`, "
        "P@1 % NN / CSLS (queries: German words with a listed translation among the candidates)",
        "",
        "| text | words en / de | method | seconds | 1,000 most frequent | 2,000 most frequent | all words |",
        "|---|---|---|---:|---|---|---|",
    ]
    for row in record["rows"]:
        cells = []
        for band in ("1000", "2000", "all"):
            r = row["precision"].get(band)
            cells.append(f"{r['nn_p@1']:.1f} / **{r['csls_p@1']:.1f}** ({r['queries']})" if r else "—")
        words = f"{row['words']['en'] / 1e6:.2f} M / {row['words']['de'] / 1e6:.2f} M"
        lines.append(f"| {row['text']} | {words} | {row['method']} | {row['seconds']:.0f} | {' | '.join(cells)} |")
    return "\n".join(lines)


def lever_runs(path: Path) -> list:
    """The runs of a report.json (one) or of a .jsonl of reports (one a line), as rows (:func:`lever_run`)."""
    text = path.read_text(encoding="utf-8")
    reports = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if path.suffix == ".jsonl"
        else [json.loads(text)]
    )
    return [
        lever_run(report, path.name if len(reports) == 1 else f"{path.name}:{n}") for n, report in enumerate(reports, 1)
    ]


def lever_run(report: dict, name: str) -> dict:
    """One run's report as a row: its pair, what --lexicon fed, precision, budget, model, updates, BLEU and
    copying per direction."""
    uses = report.get("lexicon_uses")
    if uses is None:  # reports written before they named their uses: TLM was the only one
        uses = ["tlm"] if any("word-by-word pairs for TLM" in note for note in report["notes"]) else []
    uses = [f"{u} (whitened)" if u == "emb" and report.get("lexicon_embeddings") == "whitened" else u for u in uses]
    updates = {}
    for line in report["trained"]:
        found = re.match(r"(pretrain|translate) last validated at update (\d+)", line)
        if found:
            updates[found.group(1)] = int(found.group(2))
    test = {r["direction"]: r for r in report["bleu"] if r["set"] == "test"}
    return {
        "file": name,
        "pair": "-".join(sorted(report["langs"])),
        "supervision": report.get("supervision", "unsupervised"),
        "machine": report["machine"],
        "uses": ",".join(uses) or "none",
        "precision": "/".join(report["precision"]),
        "date": report["date"],
        "minutes": report["seconds"] / 60,
        "budget": report.get("minutes"),
        "model": "{dim} x {layers}".format(**report["model"]) if report.get("model") else "?",
        "command": report["command"],
        "updates": updates,
        "bleu": {d: r["bleu"] for d, r in test.items()},
        "copy": {d: r["copy"] for d, r in test.items()},
    }


def levers(runs: list) -> str:
    """Markdown: one row per run, then the median of the runs of each pair, use, precision and machine (a
    median is of one machine's runs), BLEU beside copying the source."""

    def cells(values):
        return " · ".join(f"{d} {b}" for d, b in sorted(values.items()))

    lines = [
        "| pair | --lexicon | precision | machine | run | minutes | pretrain / translate updates | test BLEU (copy) |",
        "|---|---|---|---|---|---:|---|---|",
    ]
    groups: dict = {}
    for run in runs:
        groups.setdefault((run["pair"], run["uses"], run["precision"], run["machine"]), []).append(run)
        shown = {d: f"{run['bleu'][d]:.2f} ({run['copy'][d]:.2f})" for d in run["bleu"]}
        u = run["updates"]
        lines.append(
            f"| {run['pair']} | {run['uses']} | {run['precision']} | {run['machine']} | `{run['file']}` | "
            f"{run['minutes']:.1f} | "
            f"{u.get('pretrain', '?')} / {u.get('translate', '?')} | {cells(shown)} |"
        )
    lines += [
        "",
        "| pair | --lexicon | precision | machine | runs | median test BLEU (over copy) |",
        "|---|---|---|---|---:|---|",
    ]
    for (pair, uses, precision, machine), group in groups.items():
        medians = {}
        for d in group[0]["bleu"]:
            median = statistics.median(run["bleu"][d] for run in group)
            medians[d] = f"{median:.2f} ({median - group[0]['copy'][d]:+.2f})"
        lines.append(f"| {pair} | {uses} | {precision} | {machine} | {len(group)} | {cells(medians)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
