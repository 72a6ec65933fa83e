#!/usr/bin/env python3
"""Rebuild the Debian corpora that the recipes' tables were measured on, from Debian 12's own packages.

    python recipes/data/debian.py --out corpora                    # every stage, en-de and en-ro
    python recipes/data/debian.py --out corpora --stages docs --langs ro

Stages (each writes under OUT: UTF-8, one segment a line, parallel files line-aligned):
  gettext  en-L/gettext.{en,L}: msgid/msgstr pairs of the compiled .mo catalogs of the packages
           that ship one for L (found in the archive's Contents index)
  docs     en-L/docs.{en,L}: translated manuals aligned block by block along their document
           structure, then sentence by sentence: GIMP help, the installation guide, the Debian
           Handbook, LibreOffice help, Debian Reference, GNOME/MATE help (Mallard pages); and
           Firefox's interface strings, paired by their keys
  ddtp     en-de/ddtp.{en,de}: package descriptions and the Description Translation Project's
           German; mono/ddtp.mono.{en,de}: the descriptions' sentences
  mono     mono/fortunes.{en,de} (fortunes, fortunes-de), mono/manpages.{en,de,ro} (manpages*)
  bli      bli/de-en.txt: trans-de-en's (Ding's) single-word German->English translations, first
           sense group, both words at least --bli-min-count times in the other stages' text
Every parallel file gets PREFIX.src (each pair's document or catalog, for splits by document) and
PREFIX.natural.{en,L,src}: the pairs whose both sides read as sentences.

Packages come with `apt-get download` through an apt configuration of its own under --work
(bookworm main, the archive's signing keys), so the system's apt is untouched and no root is needed;
a rebuild downloads about 2 GB, one batch at a time, each deleted once read. Offline, --debs DIR
reads the .deb files in DIR and --indices DIR the archive's Translation-en/-de (uncompressed).
The tables' test and dictionary splits were drawn from these files (recipes/data/README.md), so a
rebuild gives their sources; the Debian archive's point releases change a few lines.
"""

import argparse
import collections
import difflib
import glob
import gzip
import lzma
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from recipes.data.make_topic_sentences import stanzas, units  # noqa: E402

STAGES = ("gettext", "docs", "ddtp", "xcls", "mono", "bli")
ENGLISH_DIRS = ("en", "en-US", "en-us", "C")  # how manuals name their English tree
DOC_PACKAGES = {  # manuals translated as a whole tree of documents
    "en": [
        "gimp-help-en",
        "libreoffice-help-en-us",
        "debian-reference-en",
        "installation-guide-amd64",
        "debian-handbook",
    ],
    "de": ["gimp-help-de", "libreoffice-help-de", "debian-reference-de"],
    "ro": ["gimp-help-ro"],
}
MOZILLA = "firefox-esr"  # English strings in its omni.ja files, L's in firefox-esr-l10n-L's langpack
MONO_PACKAGES = {
    "en": ["fortunes", "manpages", "manpages-dev"],
    "de": ["fortunes-de", "manpages-de", "manpages-de-dev"],
    "ro": ["manpages-ro"],
}
TOPICS = {  # Debian section -> the classification set's topic (recipes/data/README.md)
    **dict.fromkeys(["games"], "games"),
    **dict.fromkeys(["graphics"], "graphics"),
    **dict.fromkeys(["sound", "video"], "multimedia"),
    **dict.fromkeys(["science", "math", "gnu-r"], "science"),
    **dict.fromkeys(["net", "web", "mail", "httpd", "comm"], "network"),
    **dict.fromkeys(["editors", "text", "tex"], "text"),
    **dict.fromkeys(["fonts"], "fonts"),
    **dict.fromkeys(["electronics", "hamradio"], "electronics"),
    **dict.fromkeys(["database"], "database"),
}
XCLS_WORDS = 60
BLOCKS = {"p", "li", "dt", "dd", "td", "th", "title", "desc", "caption", "h1", "h2", "h3", "h4", "h5", "h6"}
SKIP = {"pre", "code", "screen", "script", "style", "tt", "kbd"}  # program text is not translated prose
DEB_BATCH = 40  # packages a batch: downloaded, read, deleted


def log(message):
    print(f"[debian] {message}", file=sys.stderr, flush=True)


def clean(text):
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text).replace("\u00ad", "")).strip()


PLACEHOLDER = re.compile(r"%[-#0-9.*]*[a-zA-Z]|%\(\w+\)|\{[^}]*\}|\$\{?\w+|<[^>]+>|\w_\w|[/\\=|@#~^*]|\[[^]]*\]")
MNEMONIC = re.compile(r"(?<![\w&_])[&_](?=\w)")  # "_Open", "&Save": the access key's marker
SENTENCE_END = re.compile(r"[.!?…][\"'»“”)]?$")


def natural(line, min_words=5):
    """Reads as a sentence: enough words, a capital first, a full stop last, letters, no markup or code."""
    if not min_words <= len(line.split()) <= 80 or PLACEHOLDER.search(line) or not SENTENCE_END.search(line):
        return False
    first = next((c for c in line if c.isalnum()), "")
    return first.isupper() and sum(c.isalpha() or c == " " for c in line) >= 0.8 * len(line)


class Corpus:
    """Line-aligned pairs written once each, and the .natural subset beside them."""

    def __init__(self, out: Path, lang: str, name: str):
        self.prefix, self.lang, self.seen = out / f"en-{lang}" / name, lang, set()
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        names = (".en", f".{lang}", ".src", ".natural.en", f".natural.{lang}", ".natural.src")
        self.files = {k: open(f"{self.prefix}{k}", "w", encoding="utf-8") for k in names}

    def add(self, en, other, source):
        en, other = clean(en), clean(other)
        if not en or not other or (en, other) in self.seen or en.casefold() == other.casefold():
            return  # empty, again, or untranslated
        if max(len(en), len(other)) > 20 and not 0.4 <= len(en) / len(other) <= 2.5:
            return  # lengths of different sentences
        self.seen.add((en, other))
        self.files[".en"].write(en + "\n")
        self.files[f".{self.lang}"].write(other + "\n")
        self.files[".src"].write(source + "\n")
        if natural(en) and natural(other, 3):
            self.files[".natural.en"].write(en + "\n")
            self.files[f".natural.{self.lang}"].write(other + "\n")
            self.files[".natural.src"].write(source + "\n")

    def close(self):
        for f in self.files.values():
            f.close()
        log(f"{self.prefix}: {len(self.seen):,} pairs")


def sentences(lang, text):
    from sentencex import segment

    return [s.strip() for s in segment(lang, text) if s.strip()]


def add_aligned(corpus, en, other, source):
    """A block pair as sentence pairs when both split alike, else whole when it is short."""
    a, b = sentences("en", en), sentences(corpus.lang, other)
    if len(a) == len(b):
        for x, y in zip(a, b):
            corpus.add(x, y, source)
    elif len(a) <= 2 and len(b) <= 2:
        corpus.add(en, other, source)


class Archive:
    """Debian packages and indices: downloaded with an apt of its own, or read from folders (offline)."""

    def __init__(self, work: Path, mirror: str, release: str, debs: Path | None, indices: Path | None):
        self.work, self.debs, self.indices = work, debs, indices
        self.apt = None
        if debs is None or indices is None:
            self.apt = self._configure(mirror, release)

    def _configure(self, mirror, release):
        a = self.work / "apt"
        for d in ("lists/partial", "cache/archives/partial"):
            (a / d).mkdir(parents=True, exist_ok=True)
        keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
        signed = f"[signed-by={keyring}] " if os.path.exists(keyring) else ""
        (a / "sources.list").write_text(f"deb {signed}{mirror} {release} main\n")
        (a / "apt.conf").write_text(
            f'Dir::Etc::SourceList "{a}/sources.list";\nDir::Etc::SourceParts "/nonexistent";\n'
            f'Dir::State::Lists "{a}/lists";\nDir::State::status "/dev/null";\nDir::Cache "{a}/cache";\n'
            '#clear Acquire::Languages;\nAcquire::Languages { "en"; "de"; "ro"; };\n'  # images often set "none"
            'Acquire::GzipIndexes "false";\n'
            'Acquire::IndexTargets::deb::Contents-deb { MetaKey "$(COMPONENT)/Contents-$(ARCHITECTURE)"; '
            'ShortDescription "Contents-$(ARCHITECTURE)"; Description "$(RELEASE) Contents $(ARCHITECTURE)"; '
            'KeepCompressed "true"; };\n'
            f'APT::Sandbox::User "{"root" if os.geteuid() == 0 else os.environ.get("USER", "nobody")}";\n'
        )
        apt = ["apt-get", "-q", "-c", str(a / "apt.conf")]
        if not (a / "updated").exists():
            log(f"apt-get update ({mirror} {release} main, its lists under {a})")
            subprocess.run([*apt, "update"], check=True, stdout=subprocess.DEVNULL)
            (a / "updated").touch()
        return apt

    def index(self, name):
        """Plain-text copies of an index (Translation-de, Contents-amd64, ...), whatever apt compressed it with."""
        if self.indices is not None:
            return [self.indices / name]
        plain = []
        for path in sorted(glob.glob(str(self.work / "apt" / "lists" / f"*_{name}*"))):
            if not path.endswith((".lz4", ".gz", ".xz")):
                plain.append(Path(path))
                continue
            copy = self.work / "indices" / Path(path).name.rsplit(".", 1)[0]
            if not copy.exists():
                copy.parent.mkdir(parents=True, exist_ok=True)
                with open(copy, "wb") as f:
                    if path.endswith(".lz4"):
                        subprocess.run(["lz4cat", path], stdout=f, check=True)
                    else:
                        with (gzip.open if path.endswith(".gz") else lzma.open)(path) as z:
                            shutil.copyfileobj(z, f)
            plain.append(copy)
        if not plain:
            sys.exit(f"error: apt has no {name} index under {self.work / 'apt' / 'lists'}")
        return plain

    def contents(self, pattern):
        """Packages with a file whose path matches pattern, from the Contents indices (or the offline .debs)."""
        if self.debs is not None:
            return sorted({p.name.split("_")[0] for p in self.debs.glob("*.deb")})
        found, path_re = set(), re.compile(pattern)
        for index in self.index("Contents-"):
            with open(index, encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    path, _, packages = line.rstrip("\n").rpartition(" ")
                    if path_re.search(path.strip()):
                        found.update(p.rsplit("/", 1)[-1] for p in packages.split(","))
        return sorted(found)

    def small(self, packages, max_mb):
        """The packages whose .deb is at most max_mb (Packages index; offline, all of them)."""
        if self.debs is not None:
            return packages
        size = {s["Package"]: int(s.get("Size", 0)) for p in self.index("binary-amd64_Packages") for s in stanzas(p)}
        return [p for p in packages if size.get(p, 0) <= max_mb * 1e6]

    def unpack(self, packages, dest: Path, patterns, each=None):
        """Unpacks the files matching patterns of each package into dest (one tree, as installed);
        with each, calls each(dest) after every batch and empties dest (for stages too big to keep)."""
        packages = list(packages)
        for start in range(0, len(packages), DEB_BATCH):
            batch = packages[start : start + DEB_BATCH]
            for deb in self._debs(batch):
                tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
                wanted = ["--wildcards", "--no-anchored", *patterns]
                subprocess.run(["tar", "-x", "-C", str(dest), *wanted], stdin=tar.stdout, stderr=subprocess.DEVNULL)
                tar.wait()
                if self.debs is None:
                    deb.unlink()
            if each is not None:
                each(dest)
                shutil.rmtree(dest)
                dest.mkdir(parents=True)

    def _debs(self, batch):
        dest = self.work / "debs"
        if self.debs is not None:
            return [p for p in sorted(self.debs.glob("*.deb")) if p.name.split("_")[0] in batch]
        dest.mkdir(parents=True, exist_ok=True)
        got = subprocess.run([*self.apt, "download", *batch], cwd=dest, capture_output=True, text=True)
        if got.returncode != 0:  # one unknown name fails the batch: fetch the rest one by one
            for name in batch:
                one = subprocess.run([*self.apt, "download", name], cwd=dest, capture_output=True, text=True)
                if one.returncode != 0:
                    log(f"not downloaded: {name} ({one.stderr.strip().splitlines()[-1:]})")
        return sorted(dest.glob("*.deb"))


def gettext_stage(archive, out, langs, max_mb):
    import polib  # the compiled catalogs' reader

    catalog = r"/locale/(%s)(_[A-Z]{2})?(@\w+)?/LC_MESSAGES/[^/]+\.mo$"
    shipping = archive.contents(catalog % "|".join(langs))
    packages = archive.small(shipping, max_mb)
    log(f"gettext: {len(shipping):,} packages ship a catalog in {','.join(langs)}; {len(packages):,} <= {max_mb} MB")
    corpora = {lang: Corpus(out, lang, "gettext") for lang in langs}

    def read(tree):
        for mo in sorted(tree.rglob("*.mo")):
            lang = re.search(catalog % "|".join(langs), "/" + str(mo.relative_to(tree)))
            if not lang or lang.group(2) or lang.group(3):  # de_AT, sr@latin: not the language's main catalog
                continue
            try:
                entries = polib.mofile(str(mo))
            except (OSError, ValueError, UnicodeDecodeError) as e:
                log(f"unreadable catalog {mo}: {e}")
                continue
            for e in entries:
                text = e.msgstr or (e.msgstr_plural or {}).get(0, "")
                if e.msgid and text:
                    source = str(mo.relative_to(tree))
                    add_aligned(corpora[lang.group(1)], MNEMONIC.sub("", e.msgid), MNEMONIC.sub("", text), source)

    tree = archive.work / "mo"
    tree.mkdir(parents=True, exist_ok=True)
    archive.unpack(packages, tree, ["*/LC_MESSAGES/*.mo"], each=read)
    for c in corpora.values():
        c.close()


def blocks(path: Path):
    """(signature, text) of a document's blocks in order: the innermost block elements, program text
    left out; the signature (the element's ancestry and the numbers in its text) is what aligns."""
    from lxml import etree, html

    raw = path.read_bytes()
    try:
        if path.suffix == ".page":  # Mallard: XML that says its encoding
            root = etree.fromstring(raw)
        else:  # HTML: the charset its head names, else UTF-8 (lxml alone would guess Latin-1)
            charset = re.search(rb"charset=[\"']?([\w-]+)", raw[:4096])
            parser = html.HTMLParser(encoding=charset[1].decode() if charset else "utf-8")
            root = html.document_fromstring(raw, parser=parser)  # bytes: an XML declaration is no error
    except (etree.LxmlError, LookupError, ValueError):
        return []
    for bad in root.iter(*SKIP, *(f"{{*}}{t}" for t in SKIP)):
        bad.text = None
        for child in bad:
            bad.remove(child)
    found = []
    for el in root.iter():
        tag = etree.QName(el).localname if isinstance(el.tag, str) else ""
        inner = (etree.QName(d).localname for d in el.iterdescendants() if isinstance(d.tag, str))
        if tag in BLOCKS and not any(t in BLOCKS for t in inner):
            text = clean("".join(el.itertext()))
            if text:
                ancestry = "/".join(etree.QName(a).localname for a in reversed(list(el.iterancestors())))
                found.append((f"{ancestry}/{tag} {re.findall(r'[0-9]+', text)}", text))
    return found


def english_twin(tree: Path, path: Path, lang: str):
    """The English document of a translated one: the same path with the language's folder or suffix
    (de, de-DE, .de.html) as English's (en, en-US, C, .en.html), if one exists."""
    parts = path.parts
    for i, part in enumerate(parts):
        if part.split("-")[0].split("_")[0] == lang and i < len(parts) - 1:
            for en in ENGLISH_DIRS:
                twin = Path(*parts[:i], en, *parts[i + 1 :])
                if (tree / twin).is_file():
                    return twin
    twin = path.with_name(re.sub(rf"\.{lang}(\.x?html?)$", r".en\1", path.name))
    return twin if twin != path and (tree / twin).is_file() else None


def align_documents(corpus, en_doc, doc, source):
    """Blocks paired where the two documents' structure (the sequence of block signatures) agrees."""
    a, b = blocks(en_doc), blocks(doc)
    matcher = difflib.SequenceMatcher(None, [t for t, _ in a], [t for t, _ in b], autojunk=False)
    for i, j, n in matcher.get_matching_blocks():
        for (_, x), (_, y) in zip(a[i : i + n], b[j : j + n]):
            add_aligned(corpus, x, y, source)


def docs_stage(archive, out, langs):
    help_re = r"usr/share/help/(%s)/" % "|".join(langs)
    packages = set(archive.contents(help_re)) | {p for lang in ("en", *langs) for p in DOC_PACKAGES.get(lang, [])}
    packages |= {MOZILLA, *(f"{MOZILLA}-l10n-{lang}" for lang in langs)}
    tree = archive.work / "docs"
    tree.mkdir(parents=True, exist_ok=True)
    log(f"docs: {len(packages)} packages of manuals")
    archive.unpack(sorted(packages), tree, ["*.html", "*.xhtml", "*.page", "*omni.ja", "*/langpack-*.xpi"])
    pages = sorted(p for p in tree.rglob("*") if p.suffix in (".html", ".xhtml", ".page") and p.is_file())
    english = {k: v for omni in sorted(tree.rglob("omni.ja")) for k, v in mozilla_strings(omni).items()}
    for lang in langs:  # the tree walked and Firefox's English read once, for every language
        corpus, documents = Corpus(out, lang, "docs"), 0
        for doc in pages:
            en_doc = english_twin(tree, doc.relative_to(tree), lang)
            if en_doc is not None:
                align_documents(corpus, tree / en_doc, doc, str(doc.relative_to(tree)))
                documents += 1
        log(f"docs: {documents:,} {lang} documents with an English twin")
        for langpack in sorted(tree.rglob(f"langpack-{lang}@*.xpi")):
            for key, text in mozilla_strings(langpack).items():
                if key in english:
                    corpus.add(english[key], text, f"{MOZILLA}:{key[0]}")
        corpus.close()


FLUENT = re.compile(r"^(-?[A-Za-z][\w-]*) *= *(\S.*)$")  # a message on one line
FLUENT_ATTRIBUTE = re.compile(r"^\s+\.([\w-]+) *= *(\S.*)$")
PROPERTY = re.compile(r"^([^#!\s][^=:\s]*) *[=:] *(\S.*)$")
RESOURCE = re.compile(r"(?:^|/)(?:localization|locale)/(?:[a-z]{2,3}(?:-[A-Z]{2})?/)?(.+\.(?:ftl|properties))$")


def mozilla_strings(path: Path):
    """{(resource, key): text} of the Fluent (.ftl) and .properties files in a Mozilla zip (omni.ja,
    a langpack), each resource named as Mozilla's localization finds it (browser/menubar.ftl)."""
    import zipfile

    found = {}
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        return found
    for name in archive.namelist():
        resource = RESOURCE.search(name)
        if not resource:
            continue
        message = key = None
        for line in archive.read(name).decode("utf-8", "replace").splitlines():
            if name.endswith(".properties"):
                entry = PROPERTY.match(line)
                key = entry and (resource[1], entry[1])
            elif entry := FLUENT.match(line):
                message, key = entry[1], (resource[1], entry[1])
            elif (entry := FLUENT_ATTRIBUTE.match(line)) and message:
                key = (resource[1], f"{message}.{entry[1]}")
            elif line.startswith(" ") and line.strip() and key:
                found.pop(key, None)  # a value of several lines: its first alone is no translation
                continue
            else:
                if not line.startswith(" "):  # a comment, a blank, a message whose value starts below
                    message = key = None
                continue
            if entry and not key[1].lower().endswith("key"):  # access keys and shortcuts are letters
                found[key] = entry[2]
    return found


def ddtp_stage(archive, out, langs):
    english = {}
    for index in archive.index("Translation-en"):
        english.update((s["Description-md5"], s["Description-en"]) for s in stanzas(index) if "Description-en" in s)
    mono = out / "mono"
    mono.mkdir(parents=True, exist_ok=True)
    for lang in ("de",):  # the DDTP has 3 Romanian descriptions
        if lang not in langs:
            continue
        corpus, own = Corpus(out, lang, "ddtp"), []
        for index in archive.index(f"Translation-{lang}"):
            for s in stanzas(index):
                other, en = s.get(f"Description-{lang}"), english.get(s.get("Description-md5"))
                if other is None:
                    continue
                own.extend(x for unit in units(other)[:-1] for x in sentences(lang, unit))
                if en is not None:
                    a, b = units(en)[:-1], units(other)[:-1]  # short description, paragraphs, list items
                    for x, y in zip(a, b) if len(a) == len(b) else []:
                        add_aligned(corpus, x, y, s["Package"])
        corpus.close()
        _write_lines(mono / f"ddtp.mono.{lang}", own)
    _write_lines(
        mono / "ddtp.mono.en", (x for d in english.values() for unit in units(d)[:-1] for x in sentences("en", unit))
    )


def xcls_stage(archive, out, langs):
    """Package descriptions labelled with their section's topic; train.en.tsv leaves out the package
    families (the name before the first '-') of the validation rows that recipes/data/xcls ships."""
    sections = {}
    for index in archive.index("binary-amd64_Packages"):
        for s in stanzas(index):
            topic = TOPICS.get(s.get("Section", "").split("/")[-1])
            if topic and "Description-md5" in s:
                sections[s["Package"]] = (topic, s["Description-md5"])
    valid = ROOT / "recipes" / "data" / "xcls" / "valid.en.tsv"
    held = {line.split("\t")[0].split("-")[0] for line in valid.read_text(encoding="utf-8").splitlines()[1:]}
    (out / "xcls").mkdir(parents=True, exist_ok=True)
    for lang in ("en", *(x for x in langs if x == "de")):  # the DDTP translates to German, hardly Romanian
        text = {}
        for index in archive.index(f"Translation-{lang}"):
            text.update(
                (s["Description-md5"], s[f"Description-{lang}"]) for s in stanzas(index) if f"Description-{lang}" in s
            )
        rows = []
        for package, (topic, md5) in sorted(sections.items()):
            if md5 in text:
                short, first = (units(text[md5]) + [""])[:2]
                words = f"{short.rstrip('.')}. {first}".split()[:XCLS_WORDS]
                rows.append((package, topic, " ".join(words)))
        _write_tsv(out / "xcls" / f"topics.{lang}.tsv", rows)
        if lang == "en":
            _write_tsv(out / "xcls" / "train.en.tsv", [r for r in rows if r[0].split("-")[0] not in held])
    for name in (
        "valid.en.tsv",
        "valid.de.tsv",
    ):  # shipped whole: the folder serves recipes/experiments/xcls/recipe.py as it is
        shutil.copyfile(valid.parent / name, out / "xcls" / name)


def _write_tsv(path, rows):
    path.write_text("id\tlabel\ttext\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    log(f"{path}: {len(rows):,} rows")


def _write_lines(path, lines):
    seen = [x for x in dict.fromkeys(clean(x) for x in lines) if x]
    path.write_text("".join(x + "\n" for x in seen), encoding="utf-8")
    log(f"{path}: {len(seen):,} lines")


def mono_stage(archive, out, langs):
    tree = archive.work / "mono"
    tree.mkdir(parents=True, exist_ok=True)
    packages = [p for lang in ("en", *langs) for p in MONO_PACKAGES.get(lang, [])]
    archive.unpack(packages, tree, ["*/games/fortunes/*", "*/share/man/*"])
    (out / "mono").mkdir(parents=True, exist_ok=True)
    fortunes = tree / "usr" / "share" / "games" / "fortunes"
    for lang, folder in (("en", fortunes), ("de", fortunes / "de")):
        if lang in ("en", *langs) and folder.is_dir():
            quotes = []
            for f in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix not in (".dat", ".u8")):
                if f.name not in ("art", "ascii-art", "asciiart"):  # pictures made of letters are no text
                    utf8 = f.with_name(f.name + ".u8")  # fortunes-de's files are Latin-1, their .u8 twins UTF-8
                    text = (utf8 if utf8.exists() else f).read_text(encoding="utf-8", errors="replace")
                    quotes += text.split("\n%\n")
            _write_lines(out / "mono" / f"fortunes.{lang}", (x for q in quotes for x in sentences(lang, clean(q))))
    man = tree / "usr" / "share" / "man"
    for lang in ("en", *langs):
        folder = man if lang == "en" else man / lang
        pages = sorted(p for p in folder.glob("man*/*") if p.is_file())
        if pages:
            _write_lines(out / "mono" / f"manpages.{lang}", (s for p in pages for s in man_sentences(p, lang)))


def man_sentences(page: Path, lang):
    """A man page's paragraphs as groff renders them, cut into sentences."""
    env = {**os.environ, "MANWIDTH": "2000", "MAN_KEEP_FORMATTING": "0", "LC_ALL": "C.UTF-8"}
    shown = subprocess.run(
        ["man", "-l", "-E", "UTF-8", str(page)], capture_output=True, env=env, text=True, errors="replace"
    )
    text = re.sub(r".\x08", "", shown.stdout)  # overstrike bold and underline
    paragraph = []
    for line in [*text.splitlines(), ""]:
        if line.startswith(" ") and not line.startswith(" " * 12):  # body text; headings stand at the margin
            paragraph.append(line.strip())  # and examples deeper in
            continue
        yield from (s for s in sentences(lang, " ".join(paragraph)) if natural(s, 4))
        paragraph = []


def bli_stage(archive, out, min_count):
    tree = archive.work / "bli"
    tree.mkdir(parents=True, exist_ok=True)
    archive.unpack(["trans-de-en"], tree, ["*/trans/*"])
    ding = next(tree.rglob("de-en"), None)
    if ding is None:
        sys.exit("error: trans-de-en has no usr/share/trans/de-en")
    counts = {"en": collections.Counter(), "de": collections.Counter()}
    for lang in counts:
        for f in sorted(out.glob(f"**/*.{lang}")):
            if ".natural." not in f.name:
                with open(f, encoding="utf-8") as lines:
                    for line in lines:
                        counts[lang].update(re.findall(r"\w+", line.lower()))
    pairs = {}
    for line in ding.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("#") or "::" not in line:
            continue
        de, en = (side.split("|")[0] for side in line.split("::", 1))  # first sense group
        for d in de.split(";"):
            for e in en.split(";"):
                d2, e2 = _headword(d), _headword(e)
                if d2 and e2 and d2 != e2 and min(counts["de"][d2], counts["en"][e2]) >= min_count:
                    pairs[(d2, e2)] = None
    (out / "bli").mkdir(parents=True, exist_ok=True)
    (out / "bli" / "de-en.txt").write_text("".join(f"{d} {e}\n" for d, e in sorted(pairs)), encoding="utf-8")
    log(f"{out / 'bli' / 'de-en.txt'}: {len(pairs):,} pairs")


def _headword(entry):
    """A single word, with Ding's annotations ({f}, [Br.], (sth.)) and 'to ' of verbs removed."""
    word = re.sub(r"\{[^}]*\}|\[[^]]*\]|\([^)]*\)", "", entry).strip().lower()
    word = re.sub(r"^to ", "", word)
    return word if re.fullmatch(r"[^\W\d_]+", word) else None


def main(argv=None):
    raw = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=raw, epilog=__doc__.split("\n\n", 2)[2]
    )
    p.add_argument("--out", type=Path, required=True, help="folder of the corpora (made; files in it are rewritten)")
    p.add_argument("--langs", default="de,ro", help="languages paired with English (default de,ro)")
    p.add_argument("--stages", default=",".join(STAGES), help=f"default {','.join(STAGES)}")
    p.add_argument("--work", type=Path, help="downloads and unpacked trees (default OUT/.work)")
    p.add_argument("--mirror", default="http://deb.debian.org/debian")
    p.add_argument("--release", default="bookworm", help="Debian release (default bookworm: Debian 12)")
    p.add_argument("--debs", type=Path, help="offline: read the .deb files in this folder instead of downloading")
    p.add_argument("--indices", type=Path, help="offline: a folder with Translation-en and Translation-de")
    p.add_argument("--max-package-mb", type=float, default=15, help="gettext: larger packages left out (default 15)")
    p.add_argument("--bli-min-count", type=int, default=20, help="a dictionary word's count in the text (default 20)")
    args = p.parse_args(argv)
    langs = [x for x in args.langs.split(",") if x]
    stages = [x for x in args.stages.split(",") if x]
    for name in stages:
        if name not in STAGES:
            p.error(f"--stages: unknown stage {name!r} (known: {', '.join(STAGES)})")
    for option, folder in (("--debs", args.debs), ("--indices", args.indices)):
        if folder is not None and not folder.is_dir():
            p.error(f"{option}: no folder {folder}")
    for tool in ("dpkg-deb", "tar", "man") if "mono" in stages else ("dpkg-deb", "tar"):
        if shutil.which(tool) is None:
            p.error(f"{tool} not found: this needs a Debian or Ubuntu system (apt install dpkg man-db)")
    work = args.work or args.out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    archive = Archive(work, args.mirror, args.release, args.debs, args.indices)
    for name in STAGES:  # in this order: the dictionary counts the others' words
        if name in stages:
            log(f"stage {name}")
            if name == "bli":
                bli_stage(archive, args.out, args.bli_min_count)
            elif name == "gettext":
                gettext_stage(archive, args.out, langs, args.max_package_mb)
            else:
                globals()[f"{name}_stage"](archive, args.out, langs)


if __name__ == "__main__":
    main()
