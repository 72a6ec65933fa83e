"""What the recipe tests share (tests/recipes/test_recipes.py, test_recipe_stages.py, test_wmt16_tools.py):

* running a recipe, and its --dry-run listing read as commands (:func:`dry_run`, :func:`opt`);
* tiny stand-ins for what the WMT16 and XNLI recipes download, made from the shipped samples
  (``recipes/data/{en-de,en-ro,xcls}``) in the downloads' own formats, so that a ``--smoke`` run with
  ``--data-dir`` takes the recipes' real path from "downloaded files" onward: gzipped News Crawl, a
  sacrebleu cache of the WMT test sets, the en-ro parallel corpora as .tgz / .zip archives, the XNLI
  and MultiNLI archives."""

import csv
import gzip
import hashlib
import io
import os
import shlex
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
SAMPLE = RECIPES / "data"
CHECKSUMS = RECIPES / "checksums.sha256"
TOOLS = ["python", "-m", "recipes.wmt16.tools"]  # how the listings call the WMT16 tools
ENDE, ENRO, XNLI = RECIPES / "wmt16_en_de.sh", RECIPES / "wmt16_en_ro.sh", RECIPES / "xnli.sh"

# ------------------------------------------------------------------------------------------------
# running recipes, reading their listings
# ------------------------------------------------------------------------------------------------


def env(**extra):
    """This environment's python, sacrebleu and fairseq-* first on PATH; the recipes run $PYTHON
    (default: python, found there)."""
    e = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    e.pop("PYTHON", None)
    e.update(**extra)
    return e


def recipe(script, *args, cwd, timeout=120):
    return subprocess.run(
        ["bash", str(script), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env()
    )


def tree(directory):
    return sorted(str(p.relative_to(directory)) for p in Path(directory).rglob("*"))


def dry_run(tmp_path, script, *args):
    """Run --dry-run in an empty directory (default --work-dir is relative to it); check it exits
    0 and writes nothing; return the commands (comment lines dropped) as token lists, and the text."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    before, repo_before = tree(cwd), tree(RECIPES)
    result = recipe(script, "--dry-run", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert tree(cwd) == before, "--dry-run created files"
    assert tree(RECIPES) == repo_before
    commands = []
    for line in result.stdout.splitlines():
        assert line.strip(), "empty line in the listing"
        if not line.startswith("#"):
            commands.append(shlex.split(line))
    return commands, result.stdout


def find(commands, *prefix):
    return [c for c in commands if c[: len(prefix)] == list(prefix)]


def find_one(commands, *prefix, having=None):
    hits = [c for c in find(commands, *prefix) if having is None or opt(c, having[0]) == having[1]]
    assert len(hits) == 1, (prefix, having, hits)
    return hits[0]


def opt(command, name):
    """The value after option ``name`` (None if absent, True if it is a flag)."""
    if name not in command:
        return None
    i = command.index(name)
    if i + 1 < len(command) and not command[i + 1].startswith("--"):
        return command[i + 1]
    return True


def assert_options(command, **expected):
    for key, value in expected.items():
        name = "--" + key.replace("_", "-")
        assert opt(command, name) == value, (name, opt(command, name), value, " ".join(command))


def downloads(commands):
    """Basenames of every file fetched (curl -o DEST.part URL)."""
    return [c[-1].rsplit("/", 1)[-1] for c in find(commands, "curl")]


def published_names():
    names = set()
    for line in CHECKSUMS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            assert digest == "UNVERIFIED" or len(digest) == 64, line
            names.add(name)
    return names


# ------------------------------------------------------------------------------------------------
# stand-ins of the downloads
# ------------------------------------------------------------------------------------------------

# News Crawl as the recipes name it: language -> the files its text is spread over, in order
NEWS = {
    "en-de": {
        "en": ("news.2007.en.shuffled.gz", "news.2008.en.shuffled.gz"),
        "de": ("news.2007.de.shuffled.gz", "news.2008.de.shuffled.gz"),
    },
    "en-ro": {"en": ("news.2007.en.shuffled.gz", "news.2008.en.shuffled.gz"), "ro": ("news.2015.ro.shuffled.gz",)},
}
# the sacrebleu test sets of each recipe: (valid, test)
TESTSETS = {"en-de": ("wmt13", "wmt16"), "en-ro": ("wmt16/dev", "wmt16")}


def lines(path, n=None):
    text = Path(path).read_text(encoding="utf-8").splitlines()
    return text[:n] if n else text


def sacrebleu_set(cache, name, langpair, src, ref):
    """A test set as sacrebleu keeps it once downloaded and extracted: NAME/NAME.PAIR.FIELD."""
    d = Path(cache) / name
    d.mkdir(parents=True, exist_ok=True)
    fields = {"src": src, "ref": ref, "docid": ["d"] * len(src), "genre": ["news"] * len(src)}
    for field, rows in {**fields, "origlang": ["en"] * len(src)}.items():
        (d / f"{name.replace('/', '_')}.{langpair}.{field}").write_text("".join(x + "\n" for x in rows))


def add_member(tar, name, data: bytes):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def wmt16_mirror(out: Path, pair: str, mono=2500, valid=40, test=40, para=600) -> Path:
    """A --data-dir for recipes/wmt16_{en_de,en_ro}.sh: News Crawl, the sacrebleu cache of its test
    sets (valid and test from the sample's held-out documents) and, for en-ro, Europarl and SETimes."""
    out.mkdir(parents=True, exist_ok=True)
    other = pair.split("-")[1]
    sample = SAMPLE / pair
    for lang, files in NEWS[pair].items():
        text = lines((SAMPLE / "en-de" if lang == "en" else sample) / f"mono.{lang}", mono)
        share = -(-len(text) // len(files))
        for i, name in enumerate(files):
            with gzip.open(out / name, "wb") as f:
                f.write("".join(x + "\n" for x in text[i * share : (i + 1) * share]).encode("utf-8"))
    for name, split, n in zip(TESTSETS[pair], ("valid", "test"), (valid, test)):
        en, xx = (lines(sample / f"{split}.{pair}.{lang}", n) for lang in ("en", other))
        sacrebleu_set(out / "sacrebleu", name, f"en-{other}", en, xx)
        sacrebleu_set(out / "sacrebleu", name, f"{other}-en", xx, en)
    if pair == "en-ro":  # the parallel data of --supervised: the sample's pairs, half in each archive
        en, ro = (lines(sample / f"train.en-ro.{lang}", para) for lang in ("en", "ro"))
        half = len(en) // 2
        with tarfile.open(out / "training-parallel-ep-v8.tgz", "w:gz") as tar:
            for lang, side in (("en", en), ("ro", ro)):
                data = "".join(x + "\n" for x in side[:half]).encode("utf-8")
                add_member(tar, f"training-parallel-ep-v8/europarl-v8.ro-en.{lang}", data)
        with zipfile.ZipFile(out / "en-ro.txt.zip", "w") as z:
            for lang, side in (("en", en), ("ro", ro)):
                z.writestr(f"SETIMES.en-ro.{lang}", "".join(x + "\n" for x in side[half:]))
    return out


XNLI_HEADER = [
    "language",
    "gold_label",
    "sentence1_binary_parse",
    "sentence2_binary_parse",
    "sentence1_parse",
    "sentence2_parse",
    "sentence1",
    "sentence2",
    "promptID",
    "pairID",
    "genre",
    "label1",
    "label2",
    "label3",
    "label4",
    "label5",
    "sentence1_tokenized",
    "sentence2_tokenized",
    "match",
]
MNLI_HEADER = [h for h in XNLI_HEADER if h not in ("language", "sentence1_tokenized", "sentence2_tokenized", "match")]
LABELS = ("entailment", "neutral", "contradiction")


def _descriptions(name, n):
    """The texts of the xcls sample's first n rows (package descriptions), split into sentences."""
    with open(SAMPLE / "xcls" / name, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[:n]
    return [r["text"].split(". ") for r in rows]


def _pairs(name, n):
    """Premise / hypothesis / label: the first sentence of a description with its second (entailment),
    with another package's (contradiction) or with its own later text (neutral)."""
    texts = _descriptions(name, n + 1)
    for i, sentences in enumerate(texts[:n]):
        label = LABELS[i % 3]
        second = {"entailment": sentences[1:2], "neutral": sentences[-1:]}.get(label, texts[i + 1][:1])
        yield sentences[0], " ".join(second) or sentences[0], label


def _table(header, rows):
    return "\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows)


def xnli_mirror(out: Path, langs=("en", "de"), rows=60, train=400) -> Path:
    """A --data-dir for recipes/xnli.sh: XNLI-1.0.zip (dev and test sets in ``langs``; German rows from
    the sample's German descriptions, other languages' from the English ones) and multinli_1.0.zip."""
    out.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, offset in (("dev", 0), ("test", rows)):
        table = []
        for lang in langs:
            source = "valid.de.tsv" if lang == "de" else "valid.en.tsv"
            pairs = list(_pairs(source, offset + rows))[offset:]
            for k, (premise, hypothesis, label) in enumerate(pairs):
                fields = dict(
                    language=lang,
                    gold_label=label,
                    sentence1=premise,
                    sentence2=hypothesis,
                    promptID=str(k),
                    pairID=f"{split}{k}",
                    genre="packages",
                )
                table.append([fields.get(h, "-" if h.endswith("parse") else label) for h in XNLI_HEADER])
        splits[split] = _table(XNLI_HEADER, table)
    with zipfile.ZipFile(out / "XNLI-1.0.zip", "w") as z:
        z.writestr("XNLI-1.0/xnli.dev.tsv", splits["dev"])
        z.writestr("XNLI-1.0/xnli.test.tsv", splits["test"])
    table = []
    for k, (premise, hypothesis, label) in enumerate(_pairs("train.en.tsv", train)):
        fields = dict(
            gold_label=label, sentence1=premise, sentence2=hypothesis, promptID=str(k), pairID=f"t{k}", genre="packages"
        )
        table.append([fields.get(h, "-" if h.endswith("parse") else label) for h in MNLI_HEADER])
    with zipfile.ZipFile(out / "multinli_1.0.zip", "w") as z:
        z.writestr("multinli_1.0/multinli_1.0_train.txt", _table(MNLI_HEADER, table))
    return out


def checksums_file(path: Path, files) -> Path:
    """The SHA-256 of ``files`` in sha256sum format (what --checksums FILE reads)."""
    path.write_text("".join(f"{hashlib.sha256(Path(f).read_bytes()).hexdigest()}  {Path(f).name}\n" for f in files))
    return path
