"""PNG figures of the experiments, drawn with the training run's helpers (``recipes.train.figures``):

* ablation: test BLEU per run, both directions, beside copying (``results.json``);
* scale: full-mask perplexity and the contextual lexicon probe against CPU-minutes, one line per
  pretraining configuration (``results.json``);
* lexicon: unsupervised lexicon induction's P@1 against the text's size, one line per method, beside
  the 20 % gate (``recipes/results/lexicon-*.json``);
* criterion: test BLEU of every checkpoint of unsupervised runs against the round trips that choose
  among them, and against parallel validation (``recipes/results/criterion-*.json``);
* levers: the lexicon's uses per pair, BLEU over copying (``recipes/results/train-*.json``);
* budget: test BLEU per direction against ``train.sh --minutes``, beside copying
  (``recipes/results/train-*-budget-*.json``);
* xcls: German zero-shot accuracy, the lexicon probe (frequent words) and the LM's sentence
  retrieval against the LM budget, one line per pretraining, beside random init and TF-IDF
  (``results.json``)."""

import statistics
from pathlib import Path
from typing import Dict, List, Optional

from recipes.train.figures import copy_baselines, legends, pyplot, save


def ablation(work: Path, results: dict) -> Optional[Path]:
    plt = pyplot()
    if plt is None:
        return None
    directions = ("de-en", "en-de")
    # the translation runs: their evaluation has a direction (the LMs' has perplexities and probes)
    runs = [n for n, r in results.items() if isinstance(r, dict) and any(d in r.get("eval", {}) for d in directions)]
    fig, axis = plt.subplots(figsize=(max(6, 1.2 * len(runs) + 2), 4))
    width = 0.4
    for k, direction in enumerate(directions):
        values = [float(results[n]["eval"].get(direction, {}).get("bleu", 0) or 0) for n in runs]
        axis.bar([i + (k - 0.5) * width for i in range(len(runs))], values, width, label=f"BLEU {direction}")
    copy_baselines(axis, results.get("copy_bleu") or {})
    axis.set_xticks(range(len(runs)), runs, rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("BLEU")
    axis.legend(fontsize=8)
    return save(fig, work / "figures" / "ablation.png")


def scale(work: Path, results: dict) -> Optional[Path]:
    plt = pyplot()
    if plt is None:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, entry in (results.get("pretrain") or {}).items():
        points = sorted((float(b), p) for b, p in entry.get("budgets", {}).items())
        if not points:
            continue
        minutes = [m for m, _ in points]
        ppl = [sum(p["lm"][x]["fullmask_ppl"] for x in ("en", "de")) / 2 for _, p in points]
        probe = [p["probe"]["contextual"]["nn_p@1"] for _, p in points]
        left.plot(minutes, ppl, marker="o", label=name)
        right.plot(minutes, probe, marker="o", label=name)
    left.set(title="full-mask perplexity (mean of en, de)", xlabel="CPU-minutes", yscale="log")
    right.set(title="lexicon probe de→en, contextual P@1 (%)", xlabel="CPU-minutes")
    legends(left, right, fontsize=7)
    return save(fig, work / "figures" / "scale.png")


def lexicon(record: dict, path: Path) -> Optional[Path]:
    """CSLS P@1 de->en among the 1,000 and 2,000 most frequent words and among all words, against the
    words of the text (mean of the two languages), one line per method."""
    plt = pyplot()
    if plt is None:
        return None
    bands = (
        ("1000", "1,000 most frequent words"),
        ("2000", "2,000 most frequent words"),
        ("all", "8,000-20,000 words"),
    )
    fig, axes = plt.subplots(1, len(bands), figsize=(13, 4), sharey=True)
    methods = list(dict.fromkeys(row["method"] for row in record["rows"]))
    for axis, (band, title) in zip(axes, bands):
        for method in methods:
            rows = [r for r in record["rows"] if r["method"] == method and band in r["precision"]]
            words = [sum(r["words"].values()) / len(r["words"]) / 1e6 for r in rows]
            axis.plot(words, [r["precision"][band]["csls_p@1"] for r in rows], marker="o", label=method)
        if band != "all":
            axis.axhline(20, color="grey", linestyle="--", label="gate: 20 % on frequent words")
        axis.set(title=f"among the {title}", xlabel="text, M words a language")
    axes[0].set_ylabel("CSLS P@1 de→en (%)")
    legends(*axes, fontsize=7)
    return save(fig, path)


def criterion(runs: List[dict], path: Path) -> Optional[Path]:
    """Greedy test BLEU (mean of both directions) of every kept checkpoint against its round-trip score
    (left) and its parallel valid pairs' BLEU (right), one line per run in update order, the checkpoint
    each chooses circled (``python -m recipes.experiments.criterion``)."""
    plt = pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for axis, key, title in (
        (axes[0], "roundtrip_score", "round trips of monolingual text: roundtrip_score"),
        (axes[1], "valid_bleu_tok", "parallel valid pairs: tokenised BLEU (greedy)"),
    ):
        for run in runs:
            rows = run["checkpoints"]
            label = run["name"]
            line = axis.plot([r[key] for r in rows], [r["test_greedy_mean"] for r in rows], marker="o", label=label)
            best = max(rows, key=lambda r: r[key])
            axis.plot(
                [best[key]], [best["test_greedy_mean"]], "o", markersize=11, fillstyle="none", color=line[0].get_color()
            )
        axis.set(title=title, xlabel=key)
    axes[0].set_ylabel("test BLEU, greedy, mean of both directions")
    legends(axes[0], fontsize=6)
    return save(fig, path)


def _lever(run: dict) -> str:
    """A bar's label: the lexicon's use, the precision, the machine's maker (a median is of one machine)."""
    return f"{run['uses']}\n{run['precision']}\n{run['machine'].split()[0]}"


def levers(runs: List[dict], path: Path) -> Optional[Path]:
    """Test BLEU over copying the source of each train.sh --unsupervised run (a dot; each against its own
    test's copy, as a pair's runs may have different tests) and the median of its --lexicon uses (a bar),
    one panel per direction, two panels a row (``python -m recipes.experiments.lexicon --levers``)."""
    plt = pyplot()
    if plt is None:
        return None
    directions = sorted({d for run in runs for d in run["bleu"]})
    most = max(len({_lever(r) for r in runs if d in r["bleu"]}) for d in directions)
    rows, cols = (len(directions) + 1) // 2, min(2, len(directions))
    fig, axes = plt.subplots(rows, cols, figsize=(2 + cols * (1.5 + 0.9 * most), 4 * rows), squeeze=False)
    for axis, d in zip(axes.flat, directions):
        with_d = [r for r in runs if d in r["bleu"]]  # a direction's runs: those of its pair
        groups = list(dict.fromkeys(_lever(r) for r in with_d))
        for x, group in enumerate(groups):
            values = [r["bleu"][d] - r["copy"][d] for r in with_d if _lever(r) == group]
            axis.bar(x, statistics.median(values), color="tab:blue", alpha=0.4)
            axis.plot([x] * len(values), values, "o", color="tab:blue")
        axis.axhline(0, color="gray", linestyle="--", label="copying the source")
        axis.axhline(3, color="tab:green", linestyle=":", label="copy + 3")
        axis.set(title=f"{d}: test BLEU over copying", xticks=range(len(groups)), xlabel="--lexicon (none: without)")
        axis.set_xticklabels(groups, fontsize=7)
    for axis in list(axes.flat)[len(directions) :]:
        axis.axis("off")
    legends(axes.flat[0])
    return save(fig, path)


def budget(runs: List[dict], medians: Dict[str, list], path: Path) -> Optional[Path]:
    """Test BLEU of each run (a dot) and the median of each budget (a line), one colour per direction, against
    the budget in minutes; copying the source beside them (``python -m recipes.experiments.budget``)."""
    plt = pyplot()
    if plt is None:
        return None
    fig, axis = plt.subplots(figsize=(6, 4))
    for n, (direction, points) in enumerate(sorted(medians.items())):
        color = f"C{n}"
        axis.plot(*zip(*points), color=color, label=f"{direction}, median")
        dots = [(r["budget"], r["bleu"][direction]) for r in runs if direction in r["bleu"]]
        axis.plot(*zip(*dots), "o", color=color)
    copy_baselines(axis, {d: b for r in runs for d, b in r["copy"].items()})
    machines = sorted({r["machine"] for r in runs})
    models = sorted({r["model"] for r in runs})
    axis.set(
        title=f"train.sh --minutes M: {', '.join(models)} on {', '.join(machines)}",
        xlabel="--minutes",
        ylabel="test BLEU",
        xticks=sorted({r["budget"] for r in runs}),
    )
    axis.set_ylim(bottom=0)
    axis.title.set_fontsize(9)
    legends(axis)
    return save(fig, path)


def xcls(work: Path, results: dict) -> Optional[Path]:
    plt = pyplot()
    if plt is None:
        return None
    runs = results.get("runs") or {}
    by_init: Dict[str, list] = {}
    for r in runs.values():
        if r.get("lm"):
            key = r["budget"]  # "30min" or "2500u"
            budget = float(key[:-3]) if key.endswith("min") else float(key[:-1])
            by_init.setdefault(r["init"], []).append((budget, r))
    unit = (
        results.get("budget_unit", "LM CPU-minutes")
        if any(r["budget"].endswith("min") for r in runs.values() if r.get("lm"))
        else "LM updates"
    )
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for n, (init, points) in enumerate(sorted(by_init.items())):
        color = f"C{n}"  # one colour per init on every panel
        points.sort(key=lambda p: p[0])
        budgets = [b for b, _ in points]
        for key, style, label in (("acc_de_en_id", "-", "English id"), ("acc_de", ":", "own id")):
            tuned = [(b, r["classifier"][key]) for b, r in points if key in r.get("classifier", {})]
            if tuned:
                axes[0].plot(*zip(*tuned), marker="o", linestyle=style, color=color, label=f"{init}, {label}")
        probe = [r["lm"].get("probe", {}).get("frequent", {}).get("contextual", {}).get("csls_p@1") for _, r in points]
        if all(v is not None for v in probe):
            axes[1].plot(budgets, probe, marker="o", color=color, label=init)
        retrieval = [(r["lm"]["retrieval"]["en-de"] + r["lm"]["retrieval"]["de-en"]) / 2 for _, r in points]
        axes[2].plot(budgets, retrieval, marker="o", color=color, label=init)
    random = runs.get("random", {}).get("classifier") or {}
    for value, style, label in (
        (random.get("acc_de_en_id"), "--", "random init, English id"),
        ((results.get("tfidf") or {}).get("acc_de"), "-.", "TF-IDF"),
    ):
        if value is not None:
            axes[0].axhline(float(value), color="grey", linestyle=style, label=label)
    random_probe = (results.get("probe_random") or {}).get("frequent", {}).get("contextual")
    if random_probe:
        axes[1].axhline(float(random_probe["csls_p@1"]), color="grey", linestyle="--", label="random init")
    axes[0].set(title="zero-shot accuracy, German (%)", xlabel=unit)
    axes[1].set(title="lexicon probe de→en, frequent words, ctx. CSLS P@1 (%)", xlabel=unit)
    axes[2].set(title="retrieval en↔de of the LM, acc@1 (%)", xlabel=unit)
    legends(*axes, fontsize=7)
    return save(fig, work / "figures" / "xcls.png")


def xcls_self_training(work: Path, results: dict) -> Optional[Path]:
    """German accuracy (English id) of each seed's classifier, English only, then after each round of
    ``--self-train``; the references beside them."""
    trained, plt = results.get("self_training"), pyplot()
    if not trained or plt is None:
        return None
    runs = [trained["english_only_acc_de_en_id"]] + [r["acc_de_en_id_runs"] for r in trained["rounds"]]
    fig, axis = plt.subplots(figsize=(6, 4))
    steps = list(range(len(runs)))
    for seed_runs in zip(*runs):  # one line per seed
        axis.plot(steps, seed_runs, marker="o", color="C0", alpha=0.35, linewidth=1)
    axis.plot(steps, [sum(r) / len(r) for r in runs], marker="o", color="C0", linewidth=2.5, label="mean of the seeds")
    references = ((results.get("tfidf"), "-.", "TF-IDF"), (trained.get("tfidf"), ":", "TF-IDF self-trained, round 1"))
    for base, style, label in references:
        if base:
            axis.axhline(float(base["acc_de"]), color="grey", linestyle=style, label=label)
    axis.set(
        title=f"zero-shot German (English id), {trained['row']}",
        ylabel="accuracy (%)",
        xticks=steps,
        xlabel="round of self-training (0: English only)",
    )
    legends(axis)
    return save(fig, work / "figures" / "xcls-self-training.png")
