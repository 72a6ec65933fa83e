"""The classification recipe's settings: its runs, corpora and the sample, experiment and tiny configurations."""

from recipes.experiments.measure import CALIBRATION_SECONDS

INITS = ("random", "mlm", "mlm_tlm")
CORPORA = ("sample", "shared", "shared+ddtp")  # recipes/experiments/xcls/corpus.py
PRETRAIN_STEPS = {"mlm": "en,de", "mlm_tlm": "en,de,de-en"}
BLI = ("bli", "de-en.dev.txt")  # under --shared-data: the probe's dictionary

# model and budgets. Pretraining is bounded by updates (wall time only as a guard), so that the runs
# compare at equal compute whatever else the machine does; the classifier: Adam, warm-up then
# inverse-sqrt decay, batches of 32 rows, dropout 0.1, validation after every epoch
SAMPLE = dict(
    corpus="sample",
    vocab=4000,
    dim=128,
    layers=3,
    heads=4,
    pretrain_updates=2500,
    lm_minutes=None,
    pretrain_minutes=10.0,
    pretrain_lr=1e-3,
    pretrain_warmup=200,
    tokens_per_sample=128,
    pretrain_dropout=0.1,
    pretrain_max_tokens=2048,
    finetune_epochs=8,
    finetune_lr=5e-4,
    batch=32,
    truncate_len=128,
    train_rows=0,
    inits="random,mlm_tlm",
    seeds=1,
    calibration_seconds=CALIBRATION_SECONDS,
    calibration_interval=20,
)
# the scaling sweep's CPU configuration (recipes/README.md): 64-token streams, no dropout in pretraining
EXPERIMENT = dict(
    SAMPLE,
    corpus="shared",
    pretrain_updates=None,
    lm_minutes=(15.0, 30.0),
    pretrain_warmup=1000,
    tokens_per_sample=64,
    pretrain_dropout=0.0,
    finetune_epochs=6,
    inits="random,mlm,mlm_tlm",
    seeds=3,
)
TINY = dict(
    SAMPLE,
    vocab=1000,
    dim=64,
    layers=2,
    pretrain_updates=60,
    pretrain_minutes=2.0,
    pretrain_warmup=10,
    tokens_per_sample=64,
    pretrain_max_tokens=1024,
    finetune_epochs=1,
    truncate_len=64,
    train_rows=600,
    corpus_lines=1500,
    calibration_seconds=10,
    calibration_interval=5,
)
