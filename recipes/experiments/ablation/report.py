"""The ablation's table (WORK/results.md) from its results."""

import os
import time

from recipes.experiments.ablation.runs import runs_table
from recipes.experiments.measure import Measure


def report(p: dict, test_prefix, results: dict) -> str:
    """WORK/results.md: the MT runs beside copying the source, then the LMs beside the unigram model and random init."""
    copy = results.get("copy_bleu", {})
    torch_version = __import__("torch").__version__
    test = f"{test_prefix}.{{de,en}}" if test_prefix else f"{p['test']} held-out sentences"
    lines = [
        f"Date {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU cores, torch {torch_version}; "
        f"model {p['dim']} dims, {p['layers']}+{p['layers']} layers, {p['heads']} heads, FFN {p['ffn']}, "
        f"vocabulary {p['vocab']}; budget {p['budget']}: {p['pretrain_minutes']:g} min per pretraining run, "
        f"{p['mt_minutes']:g} min per MT run (wall clock, `--stop-time-hours`); Adam, inverse-sqrt, "
        f"lr {p['pretrain_lr']:g} pretraining / {p['mt_lr']:g} MT; test: {test}, beam {p['beam']}.",
        "",
        "| run | init | loop | updates | BLEU de→en | BLEU en→de | log2 p/token de→en | log2 p/token en→de |",
        "|---|---|---|---:|---:|---:|---:|---:|",
        f"| copy the source | — | — | — | {copy.get('de-en', '—')} | {copy.get('en-de', '—')} | — | — |",
    ]
    for name, (kind, init, loop, _) in runs_table().items():
        if name not in results or kind == "pretrain":
            continue
        r = results[name]
        cells = [str(r["eval"].get(d, {}).get(m, "—")) for m in ("bleu", "ref_logprob") for d in ("de-en", "en-de")]
        lines.append(f"| {name} | {init} | {loop} | {r['train']['updates']} | " + " | ".join(cells) + " |")
    pre = [n for n in ("pretrain_mlm", "pretrain_mlm_tlm") if n in results]
    if pre:
        lines += [
            "",
            "The LMs: XLM's validation perplexity (every predicted position shown as the mask) on the "
            "valid sentences beside the unigram model of the training text; the alignment probe "
            "(word translation de→en, `xlm-fairseq-lexicon`, precision@1 NN / CSLS; all words, "
            "and contextual among the 1,000 most frequent of each language) beside the same architecture at "
            "random initialisation.",
            "",
            "| LM | updates | perplexity en / de | unigram en / de | probe P@1 embeddings | "
            "probe P@1 contextual | contextual, frequent | random init: embeddings | random init: contextual "
            "| random init: frequent |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for n in pre:
            ev = results[n]["eval"]
            lm = ev["lm"]
            cells = [" / ".join(str(lm[x][m]) for x in ("en", "de")) for m in ("fullmask_ppl", "unigram_ppl")]
            for probe in (ev["probe"], ev["probe_random"]):
                cells += [f"{probe[k]['nn_p@1']} / {probe[k]['csls_p@1']}" for k in ("embeddings", "contextual")]
                cells.append(Measure.frequent_cell(probe))
            lines.append(f"| {n} | {results[n]['train']['updates']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
