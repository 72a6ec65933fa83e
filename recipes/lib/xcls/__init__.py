"""The parts of the offline classification recipe (recipes/xcls.py): its pretraining corpus, scoring,
self-training, baselines and report."""
