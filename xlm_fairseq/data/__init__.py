"""Small datasets composed from fairseq's own: streams (MLM/CLM), TLM pairs, masking, noise, the objectives' zip."""

from .masking import MaskedLMConfig, mask_scores_from_counts, mask_tokens, seeded_generator  # noqa: F401
from .noise import add_noise, word_blank, word_dropout, word_shuffle  # noqa: F401
from .objective_zip import ObjectiveZipDataset  # noqa: F401
from .streams import LMObjectiveDataset, SpanMaskedDataset, stream_dataset  # noqa: F401
from .tlm import TLMPairDataset  # noqa: F401
