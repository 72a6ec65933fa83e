"""The table of ``recipes/experiments/xcls/recipe.py``: one row per LM budget and init, the references below it."""

import os
import time

FINETUNE_LANG = "en"  # the classifiers learn English rows only; German is zero-shot


def describe(p: dict, mode: str, results: dict) -> str:
    torch = __import__("torch")
    gpu = p.get("device") == "cuda" and torch.cuda.is_available()
    machine = f"one {torch.cuda.get_device_name(0)} (TF32), " if gpu else ""
    if p["lm_minutes"]:
        speeds = ", ".join(f"{i} {s:g}" for i, s in results.get("speed", {}).items())
        minutes = ", ".join(f"{m:g}" for m in p["lm_minutes"])
        unit = "GPU" if gpu else "CPU"
        measured = f"updates/s measured alone: {speeds}" if speeds else "minutes of training time"
        budget = f"budgets {minutes} {unit}-minutes ({measured})"
    else:
        budget = f"{p['pretrain_updates']} updates"
    return (
        f"Date {time.strftime('%Y-%m-%d')}, {machine}{os.cpu_count()} CPU cores, torch {torch.__version__}; "
        f"mode {mode}, pretraining text `{p['corpus']}`; model {p['dim']} dims, {p['layers']} layers, "
        f"{p['heads']} heads, vocabulary "
        f"{p['vocab']}; pretraining per LM: {budget}, `--step-per-objective`, lr {p['pretrain_lr']:g} after "
        f"{p['pretrain_warmup']} warm-up updates, {p['tokens_per_sample']}-token streams, "
        f"{p['pretrain_max_tokens']} tokens a step, dropout {p['pretrain_dropout']:g}; fine-tuning "
        f"{p['finetune_epochs']} epochs on English, lr {p['finetune_lr']:g}, batches of {p['batch']}, dropout 0.1, "
        f"the checkpoint of best English accuracy; validation: {results.get('rows', '?')} packages in English "
        f"and German, the German rows read with their own language id (XLM) and with English's "
        f"(`--lang-id {FINETUNE_LANG}`), by the same classifier."
    )


def spread(values) -> str:
    """The runs, then their mean ± the sample standard deviation (one run: its value)."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    return f"{' / '.join(f'{v:.2f}' for v in values)}: {mean:.2f} ± {sd:.2f}"


def spreads(runs, keys=("acc_en", "acc_de", "acc_de_en_id")) -> dict:
    """Each accuracy's :func:`spread` over ``runs`` (evaluations of one row's classifiers)."""
    return {key: spread([r[key] for r in runs]) for key in keys}


def _probe_cells(probe) -> str:
    if not probe:
        return "— | —"
    ctx, frequent = probe["contextual"], probe.get("frequent", {}).get("contextual")
    band = f"{frequent['nn_p@1']:.1f} / {frequent['csls_p@1']:.1f}" if frequent else "—"
    return f"{ctx['nn_p@1']:.1f} / {ctx['csls_p@1']:.1f} | {band}"


def _accuracy(ev: dict, key: str) -> str:
    return f"{ev[key]:.2f}" if key in ev else "—"


def table(p: dict, mode: str, results: dict) -> str:
    lines = [
        describe(p, mode, results),
        "",
        "| init | LM budget | LM updates | LM perplexity en / de | probe P@1 all words, ctx. NN / CSLS "
        "| probe P@1 frequent, ctx. NN / CSLS | retrieval en→de / de→en (LM) | accuracy en "
        "| accuracy de, own id | **accuracy de, English id** | retrieval en→de / de→en (classifier) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results.get("runs", {}).values():
        lm, ev = r.get("lm"), r.get("classifier")
        if lm:
            ppl = lm["lm"]
            lm_cells = (
                f"{r['budget']} | {lm['updates']} | {ppl['en']['fullmask_ppl']:.1f} / "
                f"{ppl['de']['fullmask_ppl']:.1f} | {_probe_cells(lm.get('probe'))} | "
                f"{lm['retrieval']['en-de']:.1f} / {lm['retrieval']['de-en']:.1f}"
            )
        else:
            lm_cells = f"— | — | — | {_probe_cells(results.get('probe_random'))} | —"
        if ev:
            cl = ev["retrieval_classifier"]
            classifier_cells = (
                f"{ev['acc_en']:.2f} | {ev['acc_de']:.2f} | **{_accuracy(ev, 'acc_de_en_id')}** | "
                f"{cl['en-de']:.1f} / {cl['de-en']:.1f}"
            )
        else:
            classifier_cells = "— | — | — | —"  # --finetune-budgets last
        lines.append(f"| {r['init']} | {lm_cells} | {classifier_cells} |")
    for name, label in (("tfidf", "TF-IDF + logistic regression (words, 1–2-grams)"), ("majority", "majority class")):
        if results.get(name):
            base = results[name]
            lines.append(f"| {label} | — | — | — | — | — | — | {base['acc_en']:.2f} | — | {base['acc_de']:.2f} | — |")
    seeds = results.get("seeds")
    if seeds:
        by_id = f", de with English's id {seeds['acc_de_en_id']}" if "acc_de_en_id" in seeds else ""
        lines += [
            "",
            f"Seeds of the row of best German accuracy (English id), {seeds['row']} (fine-tuning seeds "
            f"{', '.join(str(s) for s in seeds['seeds'])}): accuracy en {seeds['acc_en']}, "
            f"de with its own id {seeds['acc_de']}{by_id} (each: the runs, then mean ± standard "
            "deviation).",
        ]
    trained = results.get("self_training")
    if trained:
        lines += [
            "",
            f"Self-training of {trained['row']} (fine-tuning seeds {', '.join(map(str, trained['seeds']))}) "
            "on unlabelled German descriptions of the training packages: round k fine-tunes the same LM on "
            "the English rows and the previous classifier's labels of the most confident k × "
            f"{trained['fraction_per_round']:.0%} of them, every row read with English's id:",
            "",
        ]
        lines += [
            f"- round {r['round']}: pseudo-labelled rows {' / '.join(map(str, r['pseudo_rows']))} "
            f"({' / '.join(f'{a:.1f}' for a in r['pseudo_accuracy'])} % right); accuracy en {r['acc_en']}, "
            f"**de with English's id {r['acc_de_en_id']}**"
            for r in trained["rounds"]
        ]
        if trained.get("tfidf"):
            base = trained["tfidf"]
            lines.append(
                f"- TF-IDF + logistic regression, round 1 the same way: accuracy en {base['acc_en']:.2f}, "
                f"de {base['acc_de']:.2f}"
            )
    return "\n".join(lines) + "\n"
