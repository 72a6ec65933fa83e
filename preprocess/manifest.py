"""``manifest.json`` (what DEST was made from, so that a re-run with the same inputs does nothing)
and ``summary.{json,txt}`` (sentences, tokens and ``<unk>`` rate per dataset)."""

import json
import os
import sys
from typing import Dict, List, Optional

from preprocess.inputs import Stream, file_info
from preprocess.layout import FORMAT_VERSION, MANIFEST_FILE
from preprocess.vocab import SPM_SEED


def summary_text(stats: Dict[str, dict], vocab: dict) -> str:
    width = max([len("dataset")] + [len(k) for k in stats])
    if "bpe_codes" in vocab:
        subwords = f"XLM BPE codes: {vocab['bpe_codes']} merges"
    else:
        subwords = f"sentencepiece vocab {vocab['spm_vocab_size']}"
    lines = [
        f"dictionary: {vocab['dict_symbols']} symbols in dict.txt ({vocab['dict_size']} with fairseq's "
        f"<s> <pad> </s> <unk>), {subwords}",
        f"{'dataset':<{width}}  {'sentences':>10}  {'tokens':>12}  {'<unk>':>8}  {'unk rate':>9}  {'empty':>6}",
    ]
    for name in sorted(stats):
        st = stats[name]
        lines.append(
            f"{name:<{width}}  {st['sentences']:>10,}  {st['tokens']:>12,}  {st['unk']:>8,}  "
            f"{100 * st['unk_rate']:>8.3f}%  {st['empty_lines']:>6,}"
        )
    return "\n".join(lines) + "\n"


def signature(args, streams: List[Stream]) -> dict:
    options = {
        "langs": list(args.langs),
        "ro_remove_diacritics": bool(args.ro_remove_diacritics),
        "utf8_errors": args.utf8_errors,
    }
    if args.segmenters:  # only where a language is segmented: older data-bins keep their signature
        options["segmenters"] = dict(sorted(args.segmenters.items()))
    if args.bpe_codes:
        options["bpe_codes"] = file_info(os.path.abspath(args.bpe_codes))
        options["dict"] = file_info(os.path.abspath(args.dict))
        options["lowercase_and_remove_accent"] = bool(args.lowercase_and_remove_accent)
    elif args.spm_model:
        options["spm_model"] = file_info(os.path.abspath(args.spm_model))
        options["dict"] = file_info(os.path.abspath(args.dict))
    else:
        options["sentencepiece"] = {
            "model_type": "bpe",
            "vocab_size": args.vocab_size,
            "character_coverage": args.character_coverage,
            "sentences_per_lang": args.spm_sentences_per_lang,
            "seed": SPM_SEED,
        }
        if getattr(args, "vocab_size_soft", False):
            options["sentencepiece"]["vocab_size_soft"] = True
    inputs = []
    for s in sorted(streams, key=lambda s: s.out):
        entry = {"dataset": s.out, "option": s.option, "spec": s.spec, "split": s.split, "lang": s.lang}
        entry.update(file_info(s.path))
        inputs.append(entry)
    return {"format": FORMAT_VERSION, "options": options, "inputs": inputs}


def first_difference(old: dict, new: dict) -> str:
    if old.get("format") != new.get("format"):
        return f"manifest format {old.get('format')} -> {new.get('format')}"
    old_opts, new_opts = old.get("options", {}), new.get("options", {})
    for key in sorted(set(old_opts) | set(new_opts)):
        if old_opts.get(key) != new_opts.get(key):
            return f"option {key}: {json.dumps(old_opts.get(key))} -> {json.dumps(new_opts.get(key))}"
    old_in = {x.get("dataset"): x for x in old.get("inputs", [])}
    new_in = {x["dataset"]: x for x in new["inputs"]}
    for name in sorted(set(old_in) | set(new_in)):
        a, b = old_in.get(name), new_in.get(name)
        if a is None:
            return f"new input {name} ({b['path']})"
        if b is None:
            return f"input {name} ({a.get('path')}) no longer given"
        if a.get("path") != b["path"]:
            return f"input {name}: {a.get('path')} -> {b['path']}"
        if a != b:
            return f"input {name}: {b['path']} changed (size/mtime)"
    return "unknown"


def read_manifest(dest: str) -> Optional[dict]:
    try:
        with open(os.path.join(dest, MANIFEST_FILE), encoding="utf-8") as f:
            manifest = json.load(f)
        return manifest if isinstance(manifest, dict) else None
    except (OSError, ValueError):
        return None


def prepared_langs(dest: str) -> Optional[List[str]]:
    """The languages a data-bin was prepared for (its manifest's ``--langs``), or None if it does not say."""
    manifest = read_manifest(dest)
    langs = (manifest or {}).get("options", {}).get("langs") if isinstance(manifest, dict) else None
    return list(langs) if isinstance(langs, list) and all(isinstance(x, str) for x in langs) else None


def outputs_intact(dest: str, manifest: dict) -> bool:
    outputs = manifest.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        return False
    for name, size in outputs.items():
        path = os.path.join(dest, name)
        if not os.path.isfile(path) or os.path.getsize(path) != size:
            return False
    return True


def versions() -> dict:
    versions = {"python": sys.version.split()[0]}
    for module in ("sacremoses", "sentencepiece", "fairseq", "torch", "numpy"):
        try:
            versions[module] = getattr(__import__(module), "__version__", "?")
        except Exception:
            versions[module] = None
    return versions
