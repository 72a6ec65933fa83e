"""--unsupervised's anchors (recipes/lib/word_by_word.py): a lexicon induced from two texts that share no
sentence, found again where the second language is a renaming of the first; the pseudo pairs it
writes; bad input; and the larger unpaired text of recipes/data/make_unpaired.py holds no pair."""

import random
import re
import sys

from conftest import ROOT, run

from recipes.lib.word_by_word import lexicon, word_by_word

DOCS = ROOT / "recipes" / "data" / "en-de-docs"
SHARED = ROOT.parent / "shared" / "data"


def _name(prefix, i):
    return prefix + "".join("abcdefghijklmnopqrstuvwxyz"[int(d)] for d in f"{i:03d}")


def _texts(n_sentences=6000, n_words=300, n_anchors=60, seed=0):
    """Two languages that are one Markov chain over words (each word has 4 likely successors),
    sampled apart; the second renames every word but the anchors, which are spelled alike."""
    rng = random.Random(seed)
    successors = [rng.sample(range(n_words), 4) for _ in range(n_words)]
    weights = [0.5, 0.25, 0.15, 0.1]

    def sentences():
        out = []
        for _ in range(n_sentences):
            w = rng.randrange(n_words)
            words = [w]
            for _ in range(11):
                w = rng.choices(successors[w], weights)[0] if rng.random() < 0.9 else rng.randrange(n_words)
                words.append(w)
            out.append(words)
        return out

    anchors = set(rng.sample(range(n_words), n_anchors))
    first = [_name("anchor" if w in anchors else "ka", w) for w in range(n_words)]
    second = [_name("anchor" if w in anchors else "zu", w) for w in range(n_words)]
    lines_a = [" ".join(first[w] for w in s) + " ." for s in sentences()]
    lines_b = [" ".join(second[w] for w in s) + " ." for s in sentences()]
    return lines_a, lines_b, dict(zip(first, second))


def test_lexicon_of_a_renamed_language_is_found_again():
    """Seeded by the anchors alone, the map finds the renamed words: ≥ 90 % of the non-anchor
    words of the first language get their own name in the second, and back (98 % measured; 90 of
    240 with 10 dimensions, 19 with 300: 300 words cannot fill 300 dimensions)."""
    lines_a, lines_b, truth = _texts()
    to_b, to_a, seeds = lexicon(lines_a, lines_b, dim=40)
    assert seeds == 60
    renamed = [w for w in truth if not w.startswith("anchor") and w in to_b]
    assert len(renamed) == 240
    right = sum(to_b[w] == truth[w] for w in renamed)
    back = sum(to_a[truth[w]] == w for w in renamed)
    assert right >= 0.9 * len(renamed) and back >= 0.9 * len(renamed), (right, back)


def test_word_by_word_keeps_what_it_does_not_translate():
    dictionary = {"datei": "file", "öffnen": "open"}
    assert word_by_word("Datei öffnen: /etc/fstab (3 Mal)!", dictionary) == "file open : / etc / fstab ( 3 Mal ) !"


def test_the_command_writes_each_line_beside_its_translation(tmp_path):
    lines_a, lines_b, truth = _texts(n_sentences=3000)
    (tmp_path / "mono.xa").write_text("".join(line + "\n" for line in lines_a))
    (tmp_path / "mono.xb").write_text("".join(line + "\n" for line in lines_b))
    out = tmp_path / "pseudo"
    proc = run(
        [
            sys.executable,
            "-m",
            "recipes.lib.word_by_word",
            "--mono",
            tmp_path / "mono.xa",
            "--mono",
            tmp_path / "mono.xb",
            "--langs",
            "xa,xb",
            "--out",
            out,
            "--dim",
            "40",
        ]
    )
    assert re.fullmatch(
        r"lexicon: 301 xa and 301 xb words, map seeded by 60 spelled alike \(.*\); 6000 "
        r"word-by-word pairs in \d+ s\n",
        proc.stdout,
    ), proc.stdout
    a, b = (out.with_suffix(f".{lang}").read_text().splitlines() for lang in ("xa", "xb"))
    assert a[:3000] == lines_a and b[3000:] == lines_b  # one side of every pair is a real line
    translated = [w for line in b[:3000] for w in line.split() if w != "."]
    assert sum(w in truth.values() for w in translated) >= 0.9 * len(translated)


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "a.txt").write_text("eins zwei\n")
    for args, message in (
        (["--mono", tmp_path / "a.txt", "--mono", tmp_path / "none.txt", "--langs", "en,de"], "none.txt"),
        (["--mono", tmp_path / "a.txt", "--langs", "en,de"], "--langs: two different languages, one --mono each"),
        (["--mono", tmp_path / "a.txt", "--mono", tmp_path / "a.txt", "--langs", "en,en"], "--langs"),
    ):
        proc = run([sys.executable, "-m", "recipes.lib.word_by_word", *args, "--out", tmp_path / "p"], ok=False)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and message in lines[-1] and not list(tmp_path.glob("p.*")), proc.stderr
        assert len(lines) == 1 or lines[0].startswith("usage:"), proc.stderr


def test_unpaired_text_holds_no_pair_and_no_held_out_line(tmp_path):
    """recipes/data/make_unpaired.py on the shared corpus: no training pair of the sample has its
    English in unpaired.en and its German in unpaired.de, no line of the sample's valid or test files
    is in either, and the English man pages only come with --manpages both."""
    proc = run([sys.executable, ROOT / "recipes/data/make_unpaired.py", "--out", tmp_path, SHARED])
    assert "unpaired.en: 56,384 lines" in proc.stdout, proc.stdout
    en, de = (set((tmp_path / f"unpaired.{lang}").read_text(encoding="utf-8").splitlines()) for lang in ("en", "de"))
    pairs = zip(*((DOCS / f"train.en-de.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "de")))
    assert not [(e, d) for e, d in pairs if e in en and d in de]
    for split in ("valid", "test"):
        for lang, text in (("en", en), ("de", de)):
            held = {line.lower() for line in (DOCS / f"{split}.en-de.{lang}").read_text(encoding="utf-8").splitlines()}
            assert not [line for line in text if line.lower() in held], (split, lang)
    manpage = (SHARED / "mono/manpages.en").read_text(encoding="utf-8").splitlines()[0]
    assert manpage not in en
