#!/usr/bin/env python3
"""Rebuild recipes/data/xcls/topic_sentences.gz: short hashes of every sentence of every Debian 12
package description (English and German) whose package is in a topic section, so that package
descriptions can be pretraining text of the classification recipe with no classification package in
them, whatever its split (train, validation, or the test kept apart).

    python recipes/data/make_topic_sentences.py DIR [SHARED_DATA_DIR] [--out recipes/data/xcls/topic_sentences.gz]

DIR holds Debian 12 (bookworm) main's indices, uncompressed, as the shared corpus was built from them:
    http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/Packages.xz
    http://deb.debian.org/debian/dists/bookworm/main/i18n/Translation-en.xz
    http://deb.debian.org/debian/dists/bookworm/main/i18n/Translation-de.bz2

A topic section is any section the classification set draws from (``build/tools/build_xcls.py`` of
the shared corpus: games, graphics, sound, video, science, math, net, web, mail, ...). Sentences are
split by the shared corpus' own splitter (``build/tools/textutil.py``) per paragraph, per list item
and over the whole description, so each line the DDTP files were cut into is among them. A hash is
the first HASH_CHARS hex digits of SHA-1 of the sentence lower-cased, spaces collapsed
(``recipes.experiments.xcls.corpus.topic_hash``): 0.5 % of other lines match by chance (and are left out too).
"""

import argparse
import gzip
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from recipes.experiments.xcls.corpus import TOPIC_SECTIONS, topic_hash  # noqa: E402

BULLET = re.compile(r"\s*([*+\-o•]|\d+[.)])\s")


def stanzas(path):
    """The stanzas of a Debian control-style index as dicts (continuation lines joined by newlines)."""
    stanza, key = {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if stanza:
                    yield stanza
                stanza, key = {}, None
            elif line[0] in " \t" and key:
                stanza[key] += "\n" + line
            else:
                key, _, value = line.partition(":")
                stanza[key] = value.strip()
    if stanza:
        yield stanza


def units(description):
    """The short description, then the long one's paragraphs and list items, then the whole of it."""
    lines = description.split("\n")
    body = [line[1:] if line.startswith(" ") else line for line in lines[1:]]
    out, current = [lines[0]], []
    for line in body + ["."]:
        if line.strip() == "." or BULLET.match(line):
            out.append(" ".join(current))
            current = [BULLET.sub("", line, count=1)] if line.strip() != "." else []
        else:
            current.append(line.strip())
    return out + [" ".join(line.strip() for line in body if line.strip() != ".")]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("indices", type=Path, help="directory with Packages, Translation-en and Translation-de")
    p.add_argument("shared_data", type=Path, nargs="?", default=ROOT.parent / "shared" / "data")
    p.add_argument("--out", type=Path, default=ROOT / "recipes" / "data" / "xcls" / "topic_sentences.gz")
    args = p.parse_args()
    sys.path.insert(0, str(args.shared_data / "build" / "tools"))
    from textutil import split_sentences  # the splitter the DDTP files were cut with

    topic = {
        s["Description-md5"]
        for s in stanzas(args.indices / "Packages")
        if s.get("Section", "").split("/")[-1] in TOPIC_SECTIONS
    }
    hashes, counts = set(), {}
    for lang in ("en", "de"):
        found = [
            s[f"Description-{lang}"]
            for s in stanzas(args.indices / f"Translation-{lang}")
            if s.get("Description-md5") in topic and f"Description-{lang}" in s
        ]
        counts[lang] = len(found)
        for description in found:
            short, *rest = units(description)  # a short description is a line of its own
            hashes.update(topic_hash(s) for unit in rest for s in [short, *split_sentences(unit)] if s.strip())
    with open(args.out, "wb") as raw, gzip.GzipFile("", "wb", fileobj=raw, mtime=0) as f:  # no name, no time:
        f.write("".join(h + "\n" for h in sorted(hashes)).encode())  # the same input gives the same bytes
    print(f"{len(topic)} topic descriptions; {counts} with text; {len(hashes)} sentence hashes -> {args.out}")


if __name__ == "__main__":
    main()
