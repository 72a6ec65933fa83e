"""The recipes (``bash recipes/NAME.sh``) and their Python drivers, runnable as modules: ``python -m recipes.scale``."""
