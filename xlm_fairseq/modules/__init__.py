"""Layers of the XLM transformer: CPU kernels, attention with its cache, the stack."""
