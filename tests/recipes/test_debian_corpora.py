"""recipes/data/debian.py on .deb packages built here the way Debian lays them out (offline: --debs,
--indices): catalogs, manuals in HTML and Mallard, fortunes, a man page, package descriptions and
the Ding dictionary become the corpora the recipes' tables name."""

import gzip
import io
import subprocess
import sys
import zipfile

import polib
import pytest
from conftest import ROOT

SCRIPT = ROOT / "recipes" / "data" / "debian.py"

EN_DE = [
    ("Open the file in a new window.", "Öffnet die Datei in einem neuen Fenster."),
    ("The image could not be saved.", "Das Bild konnte nicht gespeichert werden."),
    ("Save %s", "%s speichern"),
]
HTML = """<?xml version="1.0" encoding="UTF-8"?>
<html><head><title>{title}</title></head><body><h1>{title}</h1>
<p>{p1} {p2}</p>{extra}<pre>gimp --batch</pre><ul><li><p>{item}</p></li></ul></body></html>"""
MALLARD = """<page xmlns="http://projectmallard.org/1.0/" id="index"><title>{title}</title>
<p>{p1}</p><code>gnome-foo --help</code><p>{note}</p></page>"""
MANPAGE = """.TH FOO 1
.SH NAME
foo \\- ein Beispiel
.SH BESCHREIBUNG
Dieses Programm zeigt eine kurze Nachricht auf dem Bildschirm an.
Es wird von der Kommandozeile aus gestartet.
"""
DING = """# Ding dictionary
Fenster {n}; Fenster {pl} :: window; windows | Scheibe {f} :: pane
Bild {n} :: image; picture
Datei {f} :: file
speichern :: to save
die Katze :: the cat
"""


def deb(folder, name, files):
    """A .deb of the given files (path -> bytes), built by dpkg-deb."""
    root = folder / f"{name}-root"
    (root / "DEBIAN").mkdir(parents=True)
    control = f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: t\n"
    (root / "DEBIAN" / "control").write_text(control)
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, folder / f"{name}_1.0_all.deb"],
        check=True,
        capture_output=True,
    )


# one-line messages, an attribute, a value that starts below its message's line, a value of two lines
FTL_EN = """menu-file = File
    .accesskey = F
menu-quit = Quit the browser now.
below =
    Its value below.
long = A first line
    goes on.
"""
FTL_DE = """menu-file = Datei
    .accesskey = D
menu-quit = Den Browser jetzt beenden.
below =
    Sein Wert darunter.
long = Eine Zeile
    und mehr.
"""


def zipped(files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buffer.getvalue()


def catalog(tmp_path, pairs):
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for en, de in pairs:
        po.append(polib.POEntry(msgid=en, msgstr=de))
    po.append(polib.POEntry(msgid="_Quit", msgstr="_Beenden"))  # the access key's marker goes
    # two sentences each side: two pairs
    po.append(
        polib.POEntry(
            msgid="Size of the packet. The header is not counted.", msgstr="Größe des Pakets. Der Kopf zählt nicht."
        )
    )
    po.save_as_mofile(str(tmp_path / "x.mo"))
    return (tmp_path / "x.mo").read_bytes()


@pytest.fixture
def archive(tmp_path):
    debs, indices = tmp_path / "debs", tmp_path / "indices"
    debs.mkdir()
    indices.mkdir()
    deb(debs, "hello", {"usr/share/locale/de/LC_MESSAGES/hello.mo": catalog(tmp_path, EN_DE)})
    en = dict(
        title="Getting started",
        p1="Start the program from the menu.",
        p2="A window opens.",
        item="Close the window when you are done.",
        extra="",
        note="Help pages are written in Mallard.",
    )
    de = dict(
        title="Erste Schritte",
        p1="Starten Sie das Programm aus dem Menü.",
        p2="Ein Fenster öffnet sich.",
        item="Schließen Sie das Fenster, wenn Sie fertig sind.",
        extra="<p>Nur auf Deutsch.</p>",
        note="Hilfeseiten sind in Mallard geschrieben.",
    )
    deb(debs, "gimp-help-en", {"usr/share/gimp/2.0/help/en/intro.html": HTML.format(**en).encode()})
    deb(debs, "gimp-help-de", {"usr/share/gimp/2.0/help/de/intro.html": HTML.format(**de).encode()})
    deb(
        debs,
        "gnome-foo",
        {
            "usr/share/help/C/foo/index.page": MALLARD.format(**en).encode(),
            "usr/share/help/de/foo/index.page": MALLARD.format(**de).encode(),
        },
    )
    deb(
        debs,
        "fortunes",
        {
            "usr/share/games/fortunes/wisdom": b"Know thyself.\n%\nLess is\nmore. Think twice.\n%\n",
            "usr/share/games/fortunes/wisdom.dat": b"\x00\x01",
        },
    )
    properties = "save=Save the page as a file.\n"
    omni = {
        "localization/en-US/toolkit/main.ftl": FTL_EN,
        "chrome/en-US/locale/en-US/global/page.properties": properties,
    }
    deb(
        debs,
        "firefox-esr",
        {
            "usr/lib/firefox-esr/omni.ja": zipped(omni),
            "usr/lib/firefox-esr/browser/omni.ja": zipped(
                {"localization/en-US/browser/menu.ftl": "menu-new = New window\n"}
            ),
        },
    )
    langpack = {
        "localization/de/toolkit/main.ftl": FTL_DE,
        "browser/localization/de/browser/menu.ftl": "menu-new = Neues Fenster\n",
        "chrome/de/locale/de/global/page.properties": "# a comment\nsave = Seite als Datei speichern.\n",
    }
    xpi = "usr/lib/firefox-esr/browser/extensions/langpack-de@firefox-esr.mozilla.org.xpi"
    deb(debs, "firefox-esr-l10n-de", {xpi: zipped(langpack)})
    zitate = "Erkenne dich selbst.\n%\nÜbung macht den Meister.\n%\n"
    deb(
        debs,
        "fortunes-de",
        {  # Latin-1 beside its UTF-8 twin, as fortunes-de ships them; no pictures
            "usr/share/games/fortunes/de/zitate": zitate.encode("latin-1"),
            "usr/share/games/fortunes/de/zitate.u8": zitate.encode(),
            "usr/share/games/fortunes/de/asciiart": b"  /\\_/\\\n ( o.o )\n%\n",
        },
    )
    deb(debs, "manpages-de", {"usr/share/man/de/man1/foo.1.gz": gzip.compress(MANPAGE.encode())})
    deb(debs, "trans-de-en", {"usr/share/trans/de-en": DING.encode()})
    (indices / "Translation-en").write_text(
        "Package: foo\nDescription-md5: 1\nDescription-en: image viewer\n"
        " This program shows an image in a window.\n .\n It can save the image as a file.\n\n"
        "Package: bar\nDescription-md5: 2\nDescription-en: only English\n Nobody translated this one.\n\n"
        "Package: aevol-data\nDescription-md5: 3\nDescription-en: data\n Its family validates the shipped sample.\n\n"
    )
    (indices / "binary-amd64_Packages").write_text(
        "Package: foo\nSection: graphics\nDescription-md5: 1\n\nPackage: bar\nSection: games\nDescription-md5: 2\n\n"
        "Package: aevol-doc\nSection: doc\nDescription-md5: 3\n\nPackage: aevol-data\nSection: science\n"
        "Description-md5: 3\n\nPackage: baz\nSection: libs\nDescription-md5: 1\n\n"
    )
    (indices / "Translation-de").write_text(
        "Package: foo\nDescription-md5: 1\nDescription-de: Bildbetrachter\n"
        " Dieses Programm zeigt ein Bild in einem Fenster an.\n .\n Es kann das Bild als Datei speichern.\n\n"
    )
    return debs, indices


def build(archive, out, *extra):
    debs, indices = archive
    cmd = [sys.executable, SCRIPT, "--out", out, "--debs", debs, "--indices", indices, "--langs", "de", *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_every_stage_from_packages(archive, tmp_path):
    out = tmp_path / "corpora"
    done = build(archive, out, "--bli-min-count", "1")
    assert done.returncode == 0, done.stderr
    gettext = list(zip(lines(out / "en-de" / "gettext.en"), lines(out / "en-de" / "gettext.de")))
    split = [("Size of the packet.", "Größe des Pakets."), ("The header is not counted.", "Der Kopf zählt nicht.")]
    assert sorted(gettext) == sorted([*EN_DE, ("Quit", "Beenden"), *split])  # a catalog keeps its entries sorted
    natural = sorted([EN_DE[0][0], EN_DE[1][0], split[1][0]])  # "Save %s" is no sentence, 4 words too few
    assert sorted(lines(out / "en-de" / "gettext.natural.en")) == natural
    docs = list(zip(lines(out / "en-de" / "docs.en"), lines(out / "en-de" / "docs.de")))
    # GIMP's page and the Mallard page, aligned by structure: the German-only paragraph and the
    # program text left out, the paragraph of two sentences paired sentence by sentence
    assert ("Start the program from the menu.", "Starten Sie das Programm aus dem Menü.") in docs
    assert ("A window opens.", "Ein Fenster öffnet sich.") in docs
    assert ("Close the window when you are done.", "Schließen Sie das Fenster, wenn Sie fertig sind.") in docs
    assert ("Getting started", "Erste Schritte") in docs
    assert ("Help pages are written in Mallard.", "Hilfeseiten sind in Mallard geschrieben.") in docs
    sources = lines(out / "en-de" / "docs.src")  # each pair's page, for splits by document
    assert {"usr/share/gimp/2.0/help/de/intro.html", "usr/share/help/de/foo/index.page"} < set(sources)
    assert len(sources) == len(docs)
    # Firefox's strings by resource and key: one-line values only, no access keys
    firefox = sorted(pair for pair, source in zip(docs, sources) if source.startswith("firefox-esr:"))
    assert firefox == [
        ("File", "Datei"),
        ("New window", "Neues Fenster"),
        ("Quit the browser now.", "Den Browser jetzt beenden."),
        ("Save the page as a file.", "Seite als Datei speichern."),
    ]
    text = (out / "en-de" / "docs.en").read_text() + (out / "en-de" / "docs.de").read_text()
    assert "Nur auf Deutsch" not in text and "--batch" not in text and "--help" not in text
    assert len(docs) == len(set(docs)) == 5 + 4  # the same pairs on both pages: once each
    ddtp = list(zip(lines(out / "en-de" / "ddtp.en"), lines(out / "en-de" / "ddtp.de")))
    assert ("This program shows an image in a window.", "Dieses Programm zeigt ein Bild in einem Fenster an.") in ddtp
    assert "Nobody translated this one." in lines(out / "mono" / "ddtp.mono.en")
    # topic rows: short description + first paragraph; the shipped validation's families (aevol) not trained on
    topics = [
        "id\tlabel\ttext",
        "aevol-data\tscience\tdata. Its family validates the shipped sample.",
        "bar\tgames\tonly English. Nobody translated this one.",
        "foo\tgraphics\timage viewer. This program shows an image in a window.",
    ]
    assert lines(out / "xcls" / "topics.en.tsv") == topics
    assert lines(out / "xcls" / "train.en.tsv") == [topics[0], *topics[2:]]
    assert lines(out / "xcls" / "topics.de.tsv")[1:] == [
        "foo\tgraphics\tBildbetrachter. Dieses Programm zeigt ein Bild in einem Fenster an."
    ]
    assert lines(out / "mono" / "fortunes.en") == [
        "Know thyself.",
        "Less is more.",
        "Think twice.",
    ]  # a sentence a line
    assert lines(out / "mono" / "fortunes.de") == ["Erkenne dich selbst.", "Übung macht den Meister."]
    man = lines(out / "mono" / "manpages.de")
    assert "Dieses Programm zeigt eine kurze Nachricht auf dem Bildschirm an." in man
    assert not any("BESCHREIBUNG" in line for line in man)
    # first sense group only (no "pane"), single words, "to " of verbs gone; phrases and words the text
    # lacks (picture, windows) out
    assert lines(out / "bli" / "de-en.txt") == ["bild image", "datei file", "fenster window", "speichern save"]


def test_bad_input_is_one_line(archive, tmp_path):
    out = tmp_path / "corpora"
    bad = build(archive, out, "--stages", "docs,typo")
    assert bad.returncode == 2 and "--stages: unknown stage 'typo'" in bad.stderr and not out.exists()
    debs, indices = archive
    missing = subprocess.run(
        [sys.executable, SCRIPT, "--out", out, "--debs", tmp_path / "nothing"], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "--debs: no folder" in missing.stderr.splitlines()[-1]
