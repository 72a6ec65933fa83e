"""Serving a translation model to people: LibreTranslate's HTTP API and a page to try it (``app.py``),
requests batched into model calls (``batcher.py``), and the command ``xlm-fairseq-serve``
(``serve.py``)."""
