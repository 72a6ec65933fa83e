"""What the recipes share: the stage engine (``stages``), the optimiser flags (``optim``), the WMT16 tools and the
experiments' measurements."""
