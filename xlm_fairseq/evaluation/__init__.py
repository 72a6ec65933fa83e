"""Measuring models: validation BLEU (XLM's multi-bleu on tokenised text), bilingual lexicon
induction and sentence retrieval between languages."""
