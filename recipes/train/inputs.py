"""What the user gave ``recipes/train.sh``: every file its options name read whole and checked, before anything
runs, with one line naming the option and the file for a bad one (:class:`preprocess.errors.UserError`)."""

from collections import defaultdict
from typing import Dict, List, Tuple

from preprocess.errors import UserError
from recipes.train import corpus
from recipes.train.corpus import Pairs
from recipes.train.plan import TINY


class Inputs:
    """The user's text, read whole and checked, and what each split gets."""

    def __init__(self, args, kept=()):
        """``kept``: languages that may come without a pair (a pretrained LM's: pretraining keeps them)."""
        tiny = TINY if args.tiny else {}
        self.langs: List[str] = []
        self.pairs: Dict[Tuple[str, str], Pairs] = {}
        self.mono: Dict[str, List[str]] = defaultdict(list)
        self.held: Dict[str, Dict[Tuple[str, str], Pairs]] = {"valid": {}, "test": {}}
        self.scores: List[Tuple[str, Pairs, str]] = []  # (name, pairs, prefix)
        self.dicts: List[Tuple[str, str, str]] = []
        known = corpus.parse_langs(args.langs, "--langs") if args.langs else None
        self.sources = []  # (option, path) of every file read: what the preprocessing stage depends on

        def note(lang):
            if lang not in self.langs:
                self.langs.append(lang)

        for value in args.pairs:
            _, key, prefix = corpus.parse_assignment(value, "--pairs", "SRC-TGT=PREFIX")
            a, b = corpus.parse_pair(key, "--pairs", known)
            found = corpus.same_pair(self.pairs, a, b) or (a, b)
            pairs = corpus.read_pairs(prefix, *found, "--pairs", tiny.get("pair_lines"))
            self.pairs[found] = self.pairs[found] + pairs if found in self.pairs else pairs
            self.sources += [("--pairs", f"{prefix}.{x}") for x in found]
            note(a), note(b)
        for value in args.mono:
            _, lang, path = corpus.parse_assignment(value, "--mono", "LANG=FILE")
            corpus.parse_langs(lang, "--mono", known)
            self.mono[lang] += corpus.read_text(path, "--mono", tiny.get("mono_lines"))
            self.sources.append(("--mono", path))
            note(lang)
        if known is not None:
            missing = [lang for lang in known if lang not in self.langs]
            if missing:
                raise UserError(f"--langs: no text in {','.join(missing)} (give --pairs or --mono for it)")
            self.langs = list(known)
        self.parallel = bool(self.pairs)  # False: monolingual text only, which --unsupervised trains from
        if not self.parallel:
            if not args.unsupervised:
                raise UserError(
                    "--pairs: no parallel text; give --pairs SRC-TGT=PREFIX, or --unsupervised to train from "
                    "--mono text alone"
                )
            if not self.langs:
                raise UserError("no text: give --mono LANG=FILE for each language (or --pairs SRC-TGT=PREFIX)")
            if len(self.langs) < 2:
                raise UserError(f"--mono: text in {self.langs[0]} only; translation needs two languages")
            # every two languages make a pair, with no line of parallel text
            self.pairs = {(a, b): Pairs(a, b, [], []) for i, a in enumerate(self.langs) for b in self.langs[i + 1 :]}
        for split in ("valid", "test"):
            for value in getattr(args, split):
                _, key, prefix = corpus.parse_assignment(value, f"--{split}", "SRC-TGT=PREFIX")
                a, b = corpus.parse_pair(key, f"--{split}", known)
                found = corpus.same_pair(self.pairs, a, b)
                if found is None:
                    lacking = f"--pairs {a}-{b}" if self.parallel else f"--mono text of both {a} and {b}"
                    raise UserError(f"--{split} {value!r}: no {lacking} to go with it")
                if found in self.held[split]:
                    raise UserError(f"--{split} {value!r}: {a}-{b} has a --{split} set already")
                self.held[split][found] = corpus.read_pairs(prefix, *found, f"--{split}", tiny.get("held_lines"))
                self.sources += [(f"--{split}", f"{prefix}.{x}") for x in found]
        for value in args.score:
            name, key, prefix = corpus.parse_assignment(value, "--score", "NAME:SRC-TGT=PREFIX")
            a, b = corpus.parse_pair(key, "--score", known)
            found = corpus.same_pair(self.pairs, a, b)
            if name is None or found is None or name in ("test", "valid") or name in {s[0] for s in self.scores}:
                raise UserError(
                    f"--score {value!r}: expected NAME:SRC-TGT=PREFIX, a new NAME (not test) and a pair of the run"
                )
            self.scores.append((name, corpus.read_pairs(prefix, *found, "--score"), prefix))
        for value in args.dict:
            _, key, path = corpus.parse_assignment(value, "--dict", "SRC-TGT=FILE")
            a, b = corpus.parse_pair(key, "--dict", known)
            if a not in self.langs or b not in self.langs:
                raise UserError(f"--dict {value!r}: {a} and {b} must both be languages of the run")
            corpus.read_text(path, "--dict")
            self.dicts.append((a, b, path))
        lonely = [lang for lang in self.langs if not any(lang in p for p in self.pairs) and lang not in kept]
        if lonely:
            raise UserError(f"--mono {lonely[0]}: a language in no pair has no direction to translate (add --pairs)")
