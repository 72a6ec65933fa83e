"""The training objectives, one class each (``lm``: CLM, MLM, TLM; ``span``: MASS's span masking;
``translation``: AE, MT, BT), each with its place in XLM's loop (``loop_order``), and the loop that runs them
(``schedule``). Every module of the package is imported here, so an objective's module registers it."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
