"""The record of ``recipes/add_language.sh``: MLM perplexities from its ``eval/*.log`` (fairseq-validate), the
two arms' test BLEU beside copying from their ``report.json``, what ``--add-lang`` changed; JSON on stdout.

Perplexities are per masked piece. The two vocabularies cut Romanian differently, so its row also gives the
loss per word: ln(ppl) x pieces per word of the same text (the data-bins' token counts over its words)."""

import json
import math
import re
import sys
import time
from pathlib import Path

from recipes.train.scoring import commit, machine


def validation(log: Path) -> dict:
    found = re.findall(r'\{"valid_.*\}', log.read_text(errors="replace")) if log.is_file() else []
    if not found:
        raise SystemExit(f"add_language_results: no validation result in {log}")
    values = json.loads(found[-1])
    return {
        k[len("valid_mlm_") : -len("_fullmask_ppl")]: float(v)
        for k, v in values.items()
        if k.startswith("valid_mlm_") and k.endswith("_fullmask_ppl") and k.count("_") == 4
    }


def tokens(data_bin: Path, lang: str) -> int:
    for line in (data_bin / "summary.txt").read_text().splitlines():
        if line.startswith(f"valid.{lang} "):
            return int(line.split()[2].replace(",", ""))
    raise SystemExit(f"add_language_results: no valid.{lang} in {data_bin}/summary.txt")


def bleu(report: Path) -> dict:
    rows = json.loads(report.read_text())["bleu"]
    return {
        r["direction"]: {"bleu": r["bleu"], "copy": r["copy"], "lines": r["lines"]} for r in rows if r["set"] == "test"
    }


def main(out: str, scratch: str, splits: str) -> dict:
    out_dir, scratch_dir = Path(out), Path(scratch)
    ev = out_dir / "eval"
    words_ro = sum(len(line.split()) for line in (Path(splits) / "valid.ro").read_text().splitlines())
    before, after, fresh = (validation(ev / f"{n}.log") for n in ("before", "after", "scratch"))
    per_word = {
        name: round(math.log(ppl["ro"]) * tokens(ev / f"bin-{b}", "ro") / words_ro, 3)
        for name, ppl, b in (("extended", after, "new"), ("scratch", fresh, "scratch"))
    }
    inits = {
        p.name[len("init-lm-ro-") : -len("-valid.log")]: validation(p) for p in sorted(ev.glob("init-*-valid.log"))
    }
    return {
        "experiment": "add ro to the quickstart's de-en LM (recipes/add_language.sh)",
        "machine": machine(),
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d"),
        "added": json.loads((out_dir / "lm-ro" / "added_language.json").read_text()),
        "mlm_fullmask_ppl": {
            "de-en LM before": before,
            "extended LM after": after,
            "from-scratch en-ro LM": fresh,
            "change de, en": {lang: round(after[lang] / before[lang] - 1, 4) for lang in ("de", "en")},
        },
        "ro_loss_per_word": per_word,
        "init_starts_at_equal_updates": inits,
        "test_bleu": {
            "from the extended LM": bleu(out_dir / "enro-from-deen" / "report.json"),
            "from scratch": bleu(scratch_dir / "report.json"),
        },
    }


if __name__ == "__main__":
    json.dump(main(*sys.argv[1:4]), sys.stdout, indent=2)
    sys.stdout.write("\n")
