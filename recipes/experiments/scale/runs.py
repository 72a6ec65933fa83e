"""The sweep's runs: the data sizes, the pretraining base and what each run changes, the translation runs."""

LANGS = ("de", "en")
DATA = dict(mono=18000, train=12000, valid=500, test=1000)
QUICK_DATA = dict(mono=1500, train=600, valid=60, test=60)
QUICK_CALIBRATION_SECONDS = 10
EMBEDDING_TENSORS = ("embeddings.weight", "pred_layer.proj.bias")  # counted apart from the transformer
TIED = "pred_layer.proj.weight"  # saved under its own name too, but the token embeddings' tensor

# pretraining: the base and what each run changes
PRETRAIN_BASE = dict(
    dim=128, layers=3, heads=4, ffn=512, vocab=4000, stream=128, batch=2048, lr=1e-3, warmup=1000, steps="en,de,de-en"
)
PRETRAIN_RUNS = {  # name: (changes, budgets in minutes)
    "d64_l2": (dict(dim=64, layers=2, ffn=256), (15, 60)),
    "d128_l3": (dict(), (15, 60)),
    "d192_l4": (dict(dim=192, layers=4, ffn=768), (15, 60)),
    "d256_l4": (dict(dim=256, layers=4, ffn=1024), (15, 60)),
    "d128_l6": (dict(layers=6), (15,)),
    "ffn256": (dict(ffn=256), (15,)),
    "heads8": (dict(heads=8), (15,)),
    "vocab2k": (dict(vocab=2000), (15,)),
    "vocab8k": (dict(vocab=8000), (15,)),
    "stream32": (dict(stream=32), (15,)),
    "stream64": (dict(stream=64), (15,)),
    "stream256": (dict(stream=256), (15,)),
    "batch1k": (dict(batch=1024), (15,)),
    "batch4k": (dict(batch=4096), (15,)),
    "lr5e-4": (dict(lr=5e-4), (15,)),
    "lr2e-3": (dict(lr=2e-3), (15,)),
    "warmup250": (dict(warmup=250), (15,)),
    "warmup4000": (dict(warmup=4000), (15,)),
    "dropout0": (dict(dropout=0.0), (15,)),  # dropout and attention dropout 0: under-trained, not over-fitted
    # the CPU configuration: the two changes that left the plateau at 8 min
    "stream64_dropout0": (dict(stream=64, dropout=0.0), (15, 60)),
    "mlm_only": (dict(steps="en,de"), (15,)),
    # the paper's UNMT setting on the CPU configuration: no pair seen before translation either
    "stream64_dropout0_mlm_only": (dict(stream=64, dropout=0.0, steps="en,de"), (15, 60)),
    # the same without language embeddings: must the LM then share its states across the languages?
    "mlm_only_no_lang_emb": (dict(stream=64, dropout=0.0, steps="en,de", lang_emb=False), (15, 60)),
}
QUICK_PRETRAIN = dict(dim=32, layers=1, heads=2, ffn=64, vocab=800, stream=64, batch=512, warmup=10)

# translation: from which LM (run@budget, or random with that run's architecture), what it trains;
# lr 1e-3 as the quickstart found (recipes/README.md), and dropout 0.1 whatever the LM ran with
TRANSLATION_BASE = dict(init="stream64_dropout0@60", mode="sup", lr=1e-3, warmup=500, batch=2000, dropout=0.1)
MODES = {
    "sup": dict(mt="de-en,en-de"),
    "semi": dict(mt="de-en,en-de", ae="en,de", bt="en-de-en,de-en-de"),
    "unmt": dict(ae="en,de", bt="en-de-en,de-en-de"),
}
TRANSLATION_RUNS = {
    "sup": (dict(), (10, 30)),
    "sup_random": (dict(init="random:stream64_dropout0"), (10, 30)),
    "sup_lr5e-4": (dict(lr=5e-4), (10,)),
    "sup_lr2e-3": (dict(lr=2e-3), (10,)),
    "sup_batch4k": (dict(batch=4000), (10,)),
    "sup_warmup100": (dict(warmup=100), (10,)),
    "semi": (dict(mode="semi"), (10, 30)),
    "unmt": (dict(mode="unmt"), (10, 30)),
    "unmt_random": (dict(mode="unmt", init="random:stream64_dropout0"), (10, 30)),
}
