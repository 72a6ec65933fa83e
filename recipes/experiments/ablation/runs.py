"""The ablation's runs: the full and quick configurations, the shares of ``--budget``, and every run's kind,
initialisation, loop and steps."""

LANGS = ("de", "en")

# the CPU configuration of recipes/scale.sh (recipes/README.md: "The CPU configuration"): pretraining on
# 64-token streams without dropout; MT at lr 1e-3, the quickstart's (its table in recipes/README.md)
# a table: the two configurations line up key by key, which the formatter's one key a line would lose
# fmt: off
FULL = dict(mono=18000, train=5000, valid=500, test=1000, vocab=4000, dim=128, layers=3, heads=4, ffn=512,
            stream=64, pretrain_dropout=0.0, pretrain_batch=2048, pretrain_lr=1e-3, pretrain_warmup=1000,
            mt_batch=2000, mt_lr=1e-3, mt_warmup=500, beam=5, budget="2h")
QUICK = dict(mono=1500, train=600, valid=60, test=60, vocab=800, dim=32, layers=1, heads=2, ffn=64,
             stream=64, pretrain_dropout=0.0, pretrain_batch=1024, pretrain_lr=1e-3, pretrain_warmup=10,
             mt_batch=1000, mt_lr=5e-4, mt_warmup=10, beam=1, budget="2.4m")
# fmt: on
# shares of --budget: each of the 2 LMs, each of the 7 MT runs (the rest: data, scoring)
PRETRAIN_SHARE, MT_SHARE = 0.2, 0.075


def runs_table():
    """name -> (kind, init, loop, steps). kind: pretrain / unmt / sup / peer."""
    runs = {
        "pretrain_mlm": ("pretrain", None, "xlm", "en,de"),
        "pretrain_mlm_tlm": ("pretrain", None, "xlm", "en,de,de-en"),
    }
    for init in ("random", "mlm", "mlm_tlm"):
        runs[f"unmt_{init}"] = ("unmt", init, "xlm", None)
    for init in ("random", "mlm"):
        runs[f"sup_{init}"] = ("sup", init, "xlm", "de-en,en-de")
    runs["sup_random_de-en"] = ("sup", "random", "xlm", "de-en")
    runs["fairseq_transformer_de-en"] = ("peer", "random", "-", "de-en")
    for name, (kind, init, _, steps) in list(runs.items()):  # optional: the default summed loop
        if kind in ("unmt", "sup") and not name.endswith("de-en"):
            runs[f"{name}_summed"] = (kind, init, "summed", steps)
    return runs


DEFAULT_RUNS = [name for name in runs_table() if not name.endswith("_summed")]
