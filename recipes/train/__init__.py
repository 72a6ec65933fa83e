"""The engine of the product's main command, ``bash recipes/train.sh`` (``python -m recipes.train``); the
quickstart is the same command on the bundled en-de sample. The experiments (``recipes.experiments``) import
it; it imports none of them.

The path of a run through its modules:

1. ``cli`` parses the options and checks them together; ``inputs`` reads every file they name (a bad one is
   one line naming the option and the file, exit 2); ``lm_start`` checks a ``--lm`` to start from.
2. ``corpus`` splits held-out sets off by blocks of lines and, without supervision, keeps out of the
   monolingual text every line whose translation is on the other side; ``word_by_word`` makes pseudo pairs
   from an induced lexicon (``--lexicon tlm``/``cs``).
3. ``hardware`` reads ``--device``/``--processes``/``--nodes`` and the number format; ``plan`` chooses the
   model, the vocabulary, the batches, the split of the budget and the objectives; printed first.
4. ``training_run`` runs the stages, each skipped when it finished before with the same options
   (``stages``, the stage engine the other recipes share; ``stages.sh`` is its bash side): preprocess
   (``lexicon_embeddings`` for ``--lexicon emb``), pretrain (``cross_lingual_lm``), translate
   (``translation_lm``) and export, with the fairseq flags of ``optim`` (``optim.flags``), started on the
   plan's hardware by ``hardware.launch``, and a line a minute from ``progress``; with several machines,
   nodes > 0 only join node 0's training stages (``TrainingRun.follow``).
5. ``scoring`` generates every test direction, scores it beside copying the source and writes the report
   and model card; ``trained`` reads which objectives trained and what the scored checkpoint holds;
   ``figures`` draws the run.
"""
