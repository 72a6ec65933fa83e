"""The experiments that measured the product, each a ``bash recipes/NAME.sh`` or ``python -m
recipes.experiments.NAME``: ``scale`` (the CPU sweep of sizes and budgets), ``ablation`` (what pretraining buys),
``lexicon`` (lexicon induction and the lever tables of ``--lexicon``), ``criterion`` (choosing checkpoints without
parallel text), ``averaging`` (averaged weights against the last ones), ``budget`` (quality against train.sh's
``--minutes``), ``xcls`` (cross-lingual classification) and ``add_language_results``
(``recipes/add_language.sh``'s record). They run commands through ``driver``, measure with ``measure``, draw with
``figures``; ``tables`` renders their records into the READMEs. They import the engine (``recipes.train``); it
never imports them."""
