"""The recipes (``bash recipes/NAME.sh``) and their Python: ``train`` is the engine of ``train.sh`` and the
quickstart (``python -m recipes.train``), ``experiments`` the studies that measured it (``python -m
recipes.experiments.scale`` and so on), ``wmt16`` the WMT16 recipes' parts, ``data`` the scripts that made
the shipped samples."""
