"""The offline classification recipe (``bash recipes/xcls.sh``, ``python -m recipes.experiments.xcls``): ``cli``
its options, ``settings`` its configurations, ``recipe`` its runs; its pretraining corpus, scoring,
self-training, baselines and report beside them."""
