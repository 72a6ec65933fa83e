"""The end of a ``recipes/train.sh`` run: every direction of every test set translated with fairseq-generate and
scored with sacreBLEU beside copying the source (in the target language's BLEU tokenisation), the lexicon
probe of the LM with ``--dict``, and the report (printed, ``report.md``, ``report.json``)."""

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

from preprocess.segment import corpus_bleu, corpus_chrf, signatures
from recipes.train import stages
from recipes.train.corpus import Pairs
from recipes.train.progress import fields
from recipes.train.trained import VALIDATION

ROOT = Path(__file__).resolve().parents[2]
BEAM = 5


def test_sets(run) -> List[Tuple[str, Path, str, Pairs, Path]]:
    """(name, data-bin, its split, pairs, raw prefix) of every set scored: the held-out tests, then
    --score sets, each in a data-bin of its own encoded with the run's vocabulary."""
    sets = [("test", run.data, "test", pairs, run.raw / f"test.{a}-{b}") for (a, b), pairs in run.text["test"].items()]
    for name, pairs, prefix in run.inputs.scores:
        bin_dir = encoded(run.work, run.data, pairs, Path(prefix), run.segmenters, run.tool, run.command, name)
        sets.append((name, bin_dir, "test", pairs, Path(prefix)))
    return sets


def encoded(work: Path, data: Path, pairs: Pairs, prefix: Path, segmenters, tool, command, name: str) -> Path:
    """``WORK/test-bin-DIGEST``: parallel text ``prefix.{src,tgt}`` as the split ``test`` of a data-bin encoded
    with ``data``'s vocabulary and pipeline (made once; ``command(cmd, log)`` runs xlm-fairseq-prepare)."""
    digest = hashlib.sha256("\n".join(pairs.src_lines + pairs.tgt_lines).encode()).hexdigest()[:12]
    bin_dir = work / f"test-bin-{digest}"
    if not (bin_dir / "dict.txt").is_file():
        partial = Path(f"{bin_dir}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        a, b = pairs.src, pairs.tgt
        cmd = [tool("xlm-fairseq-prepare"), partial, "--langs", f"{a},{b}", "--force", "--quiet"]
        cmd += ["--spm-model", data / "spm.model", "--dict", data / "dict.txt"]
        cmd += [
            "--mono",
            f"train:{a}={prefix}.{a}",
            "--mono",
            f"train:{b}={prefix}.{b}",
            "--para",
            f"test:{a}-{b}={prefix}",
        ]
        cmd += [x for lang, n in segmenters.items() if lang in (a, b) for x in ("--segment", f"{lang}={n}")]
        command(cmd, work / "logs" / f"prepare-{name}.log")
        partial.rename(bin_dir)
    return bin_dir


def generate(tool, command, bin_dir: Path, split: str, src: str, tgt: str, ckpt: Path, beam: int, gen: Path) -> Path:
    """fairseq-generate of ``split`` (``src`` -> ``tgt``) by ``ckpt`` into the file ``gen``: beam ``beam``
    (1: greedy), at most 1.5 L + 10 tokens."""
    cmd = [tool("fairseq-generate"), bin_dir, "--user-dir", ROOT / "xlm_fairseq", "--task", "translation_lm"]
    cmd += ["-s", src, "-t", tgt, "--gen-subset", split, "--path", ckpt, "--beam", beam]
    cmd += ["--max-len-a", 1.5, "--max-len-b", 10, "--max-tokens", 4000, "--cpu"]
    command(cmd, gen)
    return gen


def generated(gen_log, kind="D") -> Dict[int, str]:
    """{sentence id: text} of fairseq-generate's ``D-`` (detokenised) or ``H-`` lines."""
    out = {}
    for line in Path(gen_log).read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{kind}-"):
            head, _, rest = line.partition("\t")
            out[int(head[2:])] = rest.partition("\t")[2]
    return out


def score(run) -> List[dict]:
    run.banner(
        f"4/4 fairseq-generate (beam {BEAM}), every direction; sacreBLEU on detokenised output beside "
        "copying the source"
    )
    rows = []
    train_side = defaultdict(set)
    for pairs in run.text["train"].values():
        for lang in (pairs.src, pairs.tgt):
            train_side[lang] |= set(pairs.side(lang))
    for lang, lines in run.text["mono"].items():
        train_side[lang] |= set(lines)
    for name, bin_dir, split, pairs, prefix in test_sets(run):
        out = run.work / "out" / name
        out.mkdir(parents=True, exist_ok=True)
        for src, tgt in ((pairs.src, pairs.tgt), (pairs.tgt, pairs.src)):
            gen = generate(
                run.tool, run.command, bin_dir, split, src, tgt, run.ckpt, BEAM, out / f"gen.{src}-{tgt}.txt"
            )
            found = generated(gen, "D")
            refs, sources = pairs.side(tgt), pairs.side(src)
            if len(found) != len(refs):
                stages.fail(run.name, f"{gen}: {len(found)} hypotheses for {len(refs)} sentences")
            hyps = [found[i] for i in range(len(refs))]
            run.write_lines(out / f"hyp.{src}-{tgt}.txt", hyps)
            bleu = round(corpus_bleu(hyps, refs, tgt).score, 2)
            copy = round(corpus_bleu(sources, refs, tgt).score, 2)
            chrf, chrf_copy = (round(corpus_chrf(x, refs).score, 2) for x in (hyps, sources))
            stages.write_text(out / f"bleu.{src}-{tgt}.txt", f"{bleu}\n")
            stages.write_text(out / f"copy.{src}-{tgt}.txt", f"{copy}\n")
            seen = sum(1 for s in sources if s in train_side[src])
            rows.append(
                dict(
                    set=name,
                    direction=f"{src}-{tgt}",
                    bleu=bleu,
                    copy=copy,
                    chrf=chrf,
                    chrf_copy=chrf_copy,
                    signature=signatures(tgt),
                    lines=len(refs),
                    source=f"{prefix}.{src}",
                    seen_in_training=seen,
                    examples=list(zip(sources, hyps, refs))[:3],
                )
            )
    return rows


# ---- without a parallel test: what the run can tell ------------------------------------------

EXAMPLES = 3


def held_out_examples(run) -> List[dict]:
    """The first sentences of each language's held-out monolingual text (``raw/valid.LANG``, never trained on)
    translated into every other language of its pairs by the scored checkpoint (fairseq-interactive, beam 5)."""
    rows = []
    for src, tgt in run.plan.directions:
        lines = [x for x in (run.raw / f"valid.{src}").read_text(encoding="utf-8").splitlines() if x.strip()]
        lines = lines[:EXAMPLES]
        if not lines:
            continue
        out = run.work / "out" / "examples"
        out.mkdir(parents=True, exist_ok=True)
        source = out / f"src.{src}-{tgt}.txt"
        run.write_lines(source, lines)
        gen = out / f"gen.{src}-{tgt}.txt"
        cmd = [run.tool("fairseq-interactive"), run.data, "--user-dir", ROOT / "xlm_fairseq", "--task"]
        cmd += ["translation_lm", "-s", src, "-t", tgt, "--path", run.ckpt, "--beam", BEAM, "--cpu"]
        run.command([*cmd, "--input", source], gen)
        found = generated(gen, "D")
        rows.append(dict(direction=f"{src}-{tgt}", examples=[(s, found.get(i, ""), None) for i, s in enumerate(lines)]))
    return rows


def criterion(run) -> Dict[str, str]:
    """The round-trip figures of the validation that chose the scored checkpoint (the translation log's
    validation at its update)."""
    from recipes.train.trained import checkpoint_updates

    if run.plan.checkpoint_metric != "roundtrip_score" or not run.ckpt.is_file():
        return {}
    update = checkpoint_updates(run.ckpt)
    found = validation_at(run.logs / "translate.log", update)
    return {k: v for k, v in found.items() if k.startswith("roundtrip_") or re.match(r"^bleu_(copy_)?\w+-\w+-\w+$", k)}


# ---- probe, report -----------------------------------------------------------------------


def probe(run) -> List[dict]:
    results = []
    for a, b, path in run.inputs.dicts:
        out = run.work / "out" / f"lexicon.{a}-{b}.json"
        base = [
            run.tool("xlm-fairseq-lexicon"),
            run.lm,
            "--dict",
            path,
            "--data",
            run.data,
            "--src",
            a,
            "--tgt",
            b,
        ]
        run.command([*base, "--json", out], run.logs / f"lexicon.{a}-{b}.log")
        run.command([*base, "--random-init", "--json", f"{out}.random"], run.logs / f"lexicon.{a}-{b}.random.log")
        results.append(
            dict(
                pair=f"{a}-{b}",
                lm=json.loads(out.read_text()),
                random_init=json.loads(Path(f"{out}.random").read_text()),
            )
        )
    return results


def report(run, rows, probes, trained, figure, what, trips=None, examples=(), agreement=None):
    """``trips``: the round trips' figures of the validation that chose the checkpoint (:func:`criterion`);
    ``examples``: translations of held-out monolingual text, shown when no parallel test was scored;
    ``agreement``: {pair: (% of each side's frequent words its lexicon brings back)}."""
    p = run.plan
    elapsed = int(time.time() - run.started)
    lines = [f"== {run.name} finished in {elapsed}s ({'tiny' if p.tiny else 'full'} mode): {what}"]
    lines += [f"   {t}" for t in trained]
    if trips:
        lines.append(
            "round trips of held-out monolingual text (greedy, tokenised BLEU; what chose the checkpoint, "
            "no parallel text read):"
        )
        for a, b in p.directions:
            trip = f"{a}-{b}-{a}"
            if f"bleu_tok_{trip}" in trips:
                lines.append(
                    f"  {trip:<12} BLEU back {trips[f'bleu_tok_{trip}']:>6}   the {a}-{b} translation copies its "
                    f"source: BLEU {trips.get(f'bleu_copy_{trip}', '?')}"
                )
        lines.append(
            f"  roundtrip_score {trips.get('roundtrip_score', '?')} = mean BLEU back {trips.get('roundtrip_bleu', '?')}"
            f" - mean copied {trips.get('roundtrip_copy', '?')}"
        )
    for (a, b), (x, y) in (agreement or {}).items():
        lines.append(
            f"lexicon {a}-{b}: of the 1,000 most frequent words, {x:.0f} % of {a}'s and {y:.0f} % of {b}'s come back "
            "to themselves translated there and back (a lexicon of chance pairs: near 0)"
        )
    if rows:
        lines.append(
            f"{'test':<8} {'dir':<7} {'BLEU':>6} {'copy source':>12} {'gain':>7} {'chrF':>6} {'copy':>6}  "
            f"(sacreBLEU, detokenised; beam {BEAM}; the 'scored' checkpoint)"
        )
    else:
        lines.append(
            "BLEU was not measured: no parallel test text (--test SRC-TGT=PREFIX scores one, and is never used "
            "for choosing)"
        )
    for r in rows:
        lines.append(
            f"{r['set']:<8} {r['direction']:<7} {r['bleu']:>6} {r['copy']:>12} {r['bleu'] - r['copy']:>+7.1f} "
            f"{r['chrf']:>6} {r['chrf_copy']:>6}"
        )
    for r in rows:
        if r["direction"].split("-")[0] == r["source"].rsplit(".", 1)[1]:
            seen = (
                f"; {r['seen_in_training']} of its source lines occur in training text" if r["seen_in_training"] else ""
            )
            lines.append(f"  {r['set']} {r['direction']}: {r['source']}, {r['lines']} lines{seen}")
    for probe in probes:
        lines.append(
            f"lexicon probe {probe['pair']} (P@1 NN / CSLS, frequent words; random init beside): "
            f"{_probe_figure(probe['lm'])} / random init "
            f"{_probe_figure(probe['random_init'])}"
        )
    lines.append("")
    shown = [r for r in rows if r["set"] == rows[0]["set"]] if rows else list(examples)
    for r in shown:
        lines.append(f"examples ({r['direction']}{'' if rows else ', held-out monolingual text'}):")
        for s, h, t in r["examples"]:
            lines += [f"  src: {s[:300]}", f"  hyp: {h[:300]}"] + ([f"  ref: {t[:300]}"] if t is not None else [])
    if rows:
        lines += [
            "",
            "Read BLEU against 'copy source': names, commands and numbers are shared by the languages, so copying",
            "the input already scores that much; the gain is what the model translates. The 'trained' line says",
            "which objectives trained and for how long. What pretraining buys at a budget this machine can afford:",
            "bash recipes/ablation.sh (table in recipes/README.md).",
        ]
    else:
        lines += [
            "",
            "Without a parallel test the round trips are the measure: a sentence translated and back, scored",
            "against itself, less what the translation copied of it (a model that copies comes back unchanged).",
            "They rank the checkpoints of a run; they are no BLEU against a reference. How far they follow test",
            'BLEU where there is one: recipes/README.md, "Choosing a checkpoint without parallel text".',
        ]
    lines += [
        "",
        "The translator, exported (no data-bin needed; CTranslate2 models in model/ctranslate2/):",
        f'  python -c \'from xlm_fairseq import XLMModel; print(XLMModel.from_pretrained("{run.work}/model")'
        f'.translate("...", src="{p.directions[0][0]}", tgt="{p.directions[0][1]}"))\'',
        "",
        f"data-bin:    {run.data}",
        f"checkpoints: {run.work}/checkpoints/{{pretrain,translate}}",
        f"outputs:     {run.work}/out/ (generated text, hypotheses, BLEU per test set), logs: {run.logs}",
        f"figure:      {figure}" if figure else "figure:      none",
        f"report:      {run.work}/report.md, report.json",
    ]
    text = "\n".join(lines) + "\n"
    print("\n" + text, end="", flush=True)
    stages.write_text(run.work / "report.md", "```\n" + "\n".join(run.plan_lines) + "\n\n" + text + "```\n")
    report = dict(
        recipe=run.name,
        seconds=elapsed,
        supervision=p.supervision,
        langs=p.langs,
        tiny=p.tiny,
        machine=machine(p.hardware.device),
        commit=commit(),
        date=time.strftime("%Y-%m-%d %H:%M"),
        # what ran, exactly: quickstart.sh and train.sh end in this engine's command line
        command=shlex.join(["python", "-m", "recipes.train", *sys.argv[1:]]),
        minutes=p.minutes,
        model=dict(dim=p.size.dim, layers=p.size.layers),
        hardware=dict(device=p.hardware.device, processes=p.hardware.processes, nodes=p.hardware.nodes),
        vocab=p.vocab,
        precision=[p.precision, p.translate_precision],
        trained=trained,
        notes=run.text["notes"],
        bleu=[{k: v for k, v in r.items() if k != "examples"} for r in rows],
        lexicon=probes,
        lexicon_uses=list(p.lexicon),
        # how emb's rows were made: the lever table tells them from the unwhitened rows of older runs
        lexicon_embeddings="whitened" if "emb" in p.lexicon else None,
        lexicon_agreement={f"{a}-{b}": list(v) for (a, b), v in (agreement or {}).items()},
        checkpoint_metric=p.checkpoint_metric,
        roundtrip={k: float(v) for k, v in (trips or {}).items()},
        examples=[dict(direction=r["direction"], examples=r["examples"]) for r in examples],
    )
    stages.write_json(run.work / "report.json", report, indent=1)
    model_card(run, report)


# the licence of the quickstart's sample (recipes/data/README.md, "Sources and licence")
SAMPLE_LICENCE = (
    "the licences of the Debian packages its sample of Debian documentation comes from: MPL-2.0, CC-BY-SA-3.0, "
    'GFDL and GPL-2+, per source (xlm-fairseq\'s recipes/data/README.md, "Sources and licence")'
)


def model_card(run, report: dict) -> None:
    """The exported model's ``README.md``, with what the report adds to what the checkpoint says."""
    from xlm_fairseq import checkpoints
    from xlm_fairseq.inference.model_card import checkpoint_card, report_card, write_card

    model = run.work / "model"
    if not (model / "model.pt").is_file():
        return
    state = checkpoints.load(str(model / "model.pt"))
    vocab = len((model / "dict.txt").read_text(encoding="utf-8").splitlines())
    data = [f"{pairs.name}: {len(pairs):,} sentence pairs" for pairs in run.text["train"].values()]
    data += [f"{lang}: {len(lines):,} lines of monolingual text" for lang, lines in run.text["mono"].items()]
    card = checkpoint_card(state, run.plan.langs, run.plan.directions, vocab)
    licence = SAMPLE_LICENCE if run.name == "quickstart" else None
    write_card(str(model), report_card(card, report, data, licence), f"{run.name}: {', '.join(run.plan.langs)}")


def validation_at(log: Path, update: int) -> Dict[str, str]:
    """Every field of a fairseq log's validation at ``update`` ({} if none)."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    for line in text.splitlines():
        if VALIDATION.search(line):
            values = fields(line)
            if values.get("num_updates") == str(update):
                return values
    return {}


def last_validation(log: Path, metric: str) -> Dict[str, str]:
    """The update and the ``metric`` fields of a fairseq log's last validation."""
    found: Dict[str, str] = {}
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    for line in text.splitlines():
        if VALIDATION.search(line):
            values = fields(line)
            found = {k: v for k, v in values.items() if k == "num_updates" or re.search(metric, k)}
    return found


def machine(device: str = "cpu") -> str:
    """The CPU (model name and cores seen), and on cuda the GPU before it, for the figures' record."""
    try:
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
    except OSError:
        names = []
    cpu = f"{names[0] if names else platform.processor() or '?'} x {os.cpu_count()}"
    if device != "cuda":
        return cpu
    import torch

    return f"{torch.cuda.get_device_name(0)} x {torch.cuda.device_count()}; {cpu}"


def commit() -> str:
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "?"


def _probe_figure(result: dict) -> str:
    try:
        frequent = result["frequent"]["contextual"]
        return f"{frequent['nn_p@1']:.1f} / {frequent['csls_p@1']:.1f}"
    except (KeyError, TypeError):
        return "?"
