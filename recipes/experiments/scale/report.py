"""The sweep's tables (WORK/results.md) from its results."""

import math
import os
import time

from recipes.experiments.measure import Measure
from recipes.experiments.scale.runs import LANGS, PRETRAIN_RUNS


def unigram_ratio(lm: dict) -> float:
    """ln(perplexity) / ln(unigram perplexity), averaged over the languages: below 1 the LM predicts
    better than word frequencies; comparable across vocabularies, unlike the perplexities."""
    return sum(math.log(lm[x]["fullmask_ppl"]) / math.log(lm[x]["unigram_ppl"]) for x in LANGS) / len(LANGS)


def report(results: dict) -> str:
    """WORK/results.md: the pretraining runs (perplexity, unigram ratio, probe), then the translation runs."""
    torch_version = __import__("torch").__version__
    lines = [
        f"Date {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU cores, torch {torch_version}; "
        "budgets are minutes of training on this machine.",
        "",
    ]
    copy = results.get("copy_bleu")
    if results.get("pretrain"):
        lines += [
            "Pretraining (MLM+TLM unless noted). Perplexity: XLM's validation metric (every predicted "
            "position shown as the mask) at the run's own stream length, the unigram model of the training "
            "text beside it, and their log ratio (below 1: better than the unigram model; comparable across "
            "vocabularies). Probe: word translation de→en, precision@1 (NN / CSLS), input embeddings and "
            "contextual states, and contextual among the 1,000 most frequent words of each language.",
            "",
            "| run | changes | params (non-emb.) | budget min | updates | ppl en / de | unigram en / de "
            "| ln ppl / ln unigram | P@1 emb. NN / CSLS | P@1 ctx. NN / CSLS | P@1 ctx. frequent |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, entry in results["pretrain"].items():
            changes = ", ".join(f"{k} {v}" for k, v in PRETRAIN_RUNS.get(name, ({},))[0].items()) or "base"
            rows = list(entry["budgets"].items())
            if "probe_random" in entry:
                rows.append(("random init", None))
            for budget, point in rows:
                probe = entry["probe_random"] if point is None else point["probe"]
                emb, ctx = probe["embeddings"], probe["contextual"]
                if point is None:
                    lm_cells = f"— | {budget} | — | — | — | —"
                else:
                    lm = point["lm"]
                    ratio = unigram_ratio(lm)
                    params = point["params"]["non_embedding"] / 1e6
                    ppl = " / ".join(f"{lm[x]['fullmask_ppl']:.1f}" for x in ("en", "de"))
                    unigram = " / ".join(f"{lm[x]['unigram_ppl']:.1f}" for x in ("en", "de"))
                    lm_cells = f"{params:.2f} M | {budget} | {point['updates']} | {ppl} | {unigram} | {ratio:.3f}"
                probe_cells = (
                    f"{emb['nn_p@1']:.1f} / {emb['csls_p@1']:.1f} | {ctx['nn_p@1']:.1f} / {ctx['csls_p@1']:.1f} "
                    f"| {Measure.frequent_cell(probe)}"
                )
                lines.append(f"| {name} | {changes} | {lm_cells} | {probe_cells} |")
    if results.get("translate"):
        lines += [
            "",
            f"Translation, test set of {results.get('test_lines', '?')} held-out sentences, beam 5; "
            f"copying the source scores {copy['de-en']} (de→en) / {copy['en-de']} (en→de) BLEU.",
            "",
            "| run | init | mode | lr | warm-up | tokens/batch | budget min | updates | BLEU de→en | "
            "BLEU en→de | log2 p/token de→en | log2 p/token en→de |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, entry in results["translate"].items():
            p = entry["config"]
            for budget, point in entry["budgets"].items():
                de, en = point["de-en"], point["en-de"]
                lines.append(
                    f"| {name} | {p['init']} | {p['mode']} | {p['lr']:g} | {p['warmup']} | {p['batch']} | "
                    f"{budget} | {point['updates']} | {de['bleu']} | {en['bleu']} | "
                    f"{de['ref_logprob']} | {en['ref_logprob']} |"
                )
    return "\n".join(lines) + "\n"
