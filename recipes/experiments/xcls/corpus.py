"""The pretraining text of the cross-lingual classification recipe (``recipes/experiments/xcls/recipe.py``), kept apart
from the classification data: no pretraining line is a sentence of any classification text.

Two corpora:
  * ``sample``: the shipped en-de sample (``recipes/data/en-de``: translated manuals, no package
    descriptions): monolingual ``mono.{en,de}`` and the parallel ``train.en-de`` pairs;
  * ``shared``: ``../shared/data`` without its package descriptions (``ddtp``): man pages, manuals
    (``docs.natural``) and interface strings (``gettext.natural``);
  * ``shared+ddtp``: ``shared`` and the package descriptions of every package outside the topic
    sections (``en-de/ddtp`` pairs, ``mono/ddtp.mono``): in-domain text from no classification
    package of any split. A line is left out when its hash is in ``TOPIC_HASHES``, every sentence of
    every topic package's description (``recipes/data/make_topic_sentences.py`` makes the list), or
    when it shares ``SHARED_WORDS`` words in a row with a classification text (a sister package's
    description in another section: ``libjets3t-java`` of ``jets3t``).

In both, every language's monolingual stream also holds its side of the parallel pairs, so MLM and
MLM+TLM pretraining read the same sentences and differ only in whether the pairs are seen aligned.
Interface strings and man pages quote package descriptions (AppStream metadata, NAME lines): every
line that is a sentence of a classification text (after lowercasing and collapsing spaces) is left
out, and how many were is reported.
"""

import csv
import gzip
import hashlib
import re
import unicodedata
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
VALID_PAIRS = 500  # the last pairs of the manuals, held out as valid data of the pretraining
# the Debian sections the classification set draws its topics from (the shared corpus' build_xcls.py)
TOPIC_SECTIONS = frozenset(
    "games graphics sound video science math gnu-r mail net web httpd comm fonts editors text tex education "
    "electronics hamradio database localization".split()
)
TOPIC_HASHES = Path(__file__).resolve().parents[2] / "data" / "xcls" / "topic_sentences.gz"
HASH_CHARS = 6
SHARED_WORDS = 8  # a description line sharing this many words in a row with a classification text is left out


def topic_hash(line: str) -> str:
    return hashlib.sha1(_key(unicodedata.normalize("NFC", line)).encode()).hexdigest()[:HASH_CHARS]


def topic_hashes(path: Path = TOPIC_HASHES) -> Set[str]:
    with gzip.open(path, "rt", encoding="ascii") as f:
        return set(f.read().split())


def _key(line: str) -> str:
    return " ".join(line.lower().split())


def grams(key: str, n: int = SHARED_WORDS) -> Set[str]:
    words = key.split()
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def classification_sentences(tsv_files: Iterable[Path]) -> Set[str]:
    """Every sentence (and every whole text) of the ``text``/``text_b`` columns of these TSVs."""
    found = set()
    for path in tsv_files:
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                for column in ("text", "text_b"):
                    text = row.get(column) or ""
                    found.add(_key(text))
                    found.update(_key(s) for s in SENTENCE_END.split(text))
    found.discard("")
    return found


def texts(tsv: Path) -> str:
    """The ``text`` column of a classification TSV, one text a line (retrieval's input)."""
    with open(tsv, encoding="utf-8", newline="") as f:
        return "".join(row["text"] + "\n" for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _read(path: Path) -> List[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.strip() for line in f]


def build(kind: str, source: Path, out: Path, held_out: Set[str], max_lines: int = 0) -> Dict[str, int]:
    """Write ``out/{mono.en,mono.de,train.de-en.{de,en},valid.de-en.{de,en}}``; returns line counts
    and ``dropped`` (lines left out as classification text; ``shared+ddtp``: and the description
    lines and pairs of topic packages left out)."""
    if kind == "sample":
        mono = {lang: _read(source / "en-de" / f"mono.{lang}") for lang in ("en", "de")}
        pairs = list(zip(*(_read(source / "en-de" / f"train.en-de.{lang}") for lang in ("en", "de"))))
        valid = list(zip(*(_read(source / "en-de" / f"valid.en-de.{lang}") for lang in ("en", "de"))))
    elif kind in ("shared", "shared+ddtp"):
        mono = {lang: _read(source / "mono" / f"manpages.{lang}") for lang in ("en", "de")}
        manuals = list(zip(*(_read(source / "en-de" / f"docs.natural.{lang}") for lang in ("en", "de"))))
        strings = list(zip(*(_read(source / "en-de" / f"gettext.natural.{lang}") for lang in ("en", "de"))))
        pairs, valid = manuals[:-VALID_PAIRS] + strings, manuals[-VALID_PAIRS:]
    else:
        raise ValueError(f"unknown corpus {kind!r}")
    dropped, topic_lines = 0, 0
    if kind == "shared+ddtp":  # the descriptions of packages outside the topics
        topics, held_grams = topic_hashes(), set().union(*map(grams, held_out))
        ddtp = list(zip(*(_read(source / "en-de" / f"ddtp.{lang}") for lang in ("en", "de"))))

        def outside(line):  # also: generic lines shared with a topic package, and sister packages' lines
            key = _key(line)
            return topic_hash(line) not in topics and not {key, key + "."} & held_out and not grams(key) & held_grams

        kept = [(en, de) for en, de in ddtp if outside(en) and outside(de)]
        pairs, topic_lines = pairs + kept, len(ddtp) - len(kept)
        for lang in ("en", "de"):
            lines = _read(source / "mono" / f"ddtp.mono.{lang}")
            kept = [line for line in lines if outside(line)]
            mono[lang], topic_lines = mono[lang] + kept, topic_lines + len(lines) - len(kept)

    def keep_pairs(items: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
        nonlocal dropped
        kept, seen = [], set()
        for en, de in items:
            if not en or not de or (en, de) in seen:
                continue
            if _key(en) in held_out or _key(de) in held_out:
                dropped += 1
                continue
            seen.add((en, de))
            kept.append((en, de))
        return kept

    pairs, valid = keep_pairs(pairs), keep_pairs(valid)
    if max_lines:
        pairs = pairs[:max_lines]
    counts = {}
    out.mkdir(parents=True, exist_ok=True)
    for i, lang in enumerate(("en", "de")):
        lines = []
        for line in mono[lang]:
            if line and _key(line) in held_out:
                dropped += 1
            elif line:
                lines.append(line)
        if max_lines:
            lines = lines[:max_lines]
        lines += [pair[i] for pair in pairs]
        files = {f"mono.{lang}": lines, f"train.de-en.{lang}": [p[i] for p in pairs]}
        files[f"valid.de-en.{lang}"] = [p[i] for p in valid]
        for name, content in files.items():
            (out / name).write_text("".join(line + "\n" for line in content), encoding="utf-8")
            counts[name] = len(content)
    counts["dropped"] = dropped
    if kind == "shared+ddtp":
        counts["topic_package_lines_dropped"] = topic_lines
    return counts


def unlabelled_descriptions(source: Path, train_tsv: Path, held_tsvs: Iterable[Path], max_words: int = 60):
    """German descriptions of the training packages, shaped as the set's texts (the short description,
    then the paragraph's lines, at most ``max_words`` words), from the aligned DDTP lines (``en-de/ddtp``)
    whose English side is a sentence of a ``train_tsv`` text: the unlabelled pool of self-training.
    None shares a sentence or ``SHARED_WORDS`` words in a row with a ``held_tsvs`` text. Returns
    [(text, the English row's label)]: the label is never trained on, only the pseudo-labels' accuracy
    is read from it."""
    owner, labels = {}, []
    with open(train_tsv, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            for sentence in SENTENCE_END.split(row["text"]):
                owner.setdefault(_key(sentence).rstrip("."), len(labels))
            labels.append(row["label"])
    held = classification_sentences(held_tsvs)
    held_grams = set().union(*map(grams, held))
    documents, previous = [], None  # consecutive lines of one training package: one description
    for en, de in zip(*(_read(source / "en-de" / f"ddtp.{lang}") for lang in ("en", "de"))):
        row = owner.get(_key(en).rstrip("."))
        if row is not None and de:
            if row != previous:
                documents.append((row, []))
            documents[-1][1].append(de if de.endswith((".", "!", "?", ":")) else de + ".")
        previous = row
    pool, seen = [], set()
    for row, lines in documents:
        text = " ".join(" ".join(lines).split()[:max_words])
        key = _key(text)
        if key not in seen and not {_key(line) for line in lines} & held and not grams(key) & held_grams:
            seen.add(key)
            pool.append((text, labels[row]))
    return pool
