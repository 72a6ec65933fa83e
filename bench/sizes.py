"""The benchmark's model sizes and the training FLOPs of each step, the numerator of MFU (checked
against torch's FLOP counter in ``tests/bench/test_bench.py``)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Size:
    """One model size, and the batch shapes it is measured on (ours and the peers alike)."""

    dim: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    block: int  # pretraining: tokens per block (--tokens-per-sample)
    blocks: int  # pretraining: blocks per objective batch (--batch-size)
    unmt_max_tokens: int
    lm_dropout: float  # dropout and attention dropout of pretraining
    mt_dropout: float  # ... of translation
    window_scale: int  # updates per log window, as a multiple of the 256 size's (windows of similar time)
    quick_whole_test_set: bool  # --quick generates the 500-sentence test set, else its first 128 sentences

    def ours(self):
        return ["--arch", "xlm_tiny", *self.stack("encoder"), *self.stack("decoder")]

    def stack(self, side):
        return [
            f"--{side}-embed-dim",
            str(self.dim),
            f"--{side}-layers",
            str(self.layers),
            f"--{side}-attention-heads",
            str(self.heads),
            f"--{side}-ffn-embed-dim",
            str(self.ffn),
        ]

    def peer_seq2seq(self):
        return [
            "--arch",
            "transformer",
            *self.stack("encoder"),
            *self.stack("decoder"),
            "--share-decoder-input-output-embed",
        ]  # XLM ties the decoder's output to its input embedding

    def dropout(self, p):
        return ["--dropout", str(p), "--attention-dropout", str(p)]


SIZES = {
    # the recipes' size (recipes/quickstart.sh): 128 dims x 3 layers, 4,000 words; pretraining on 64-token
    # streams without dropout, 1,024-token objective batches; translation with dropout 0.1
    "recipes": Size(
        dim=128,
        layers=3,
        heads=4,
        ffn=512,
        vocab=4000,
        block=64,
        blocks=16,
        unmt_max_tokens=1200,
        lm_dropout=0.0,
        mt_dropout=0.1,
        window_scale=6,
        quick_whole_test_set=True,  # 128 sentences take under a second here
    ),
    # the benchmark's first size: 256 dims x 4 layers, 6,000 words, 16 blocks of 256 tokens, dropout 0.1
    "256": Size(
        dim=256,
        layers=4,
        heads=4,
        ffn=1024,
        vocab=6000,
        block=256,
        blocks=16,
        unmt_max_tokens=1500,
        lm_dropout=0.1,
        mt_dropout=0.1,
        window_scale=1,
        quick_whole_test_set=False,
    ),
}


def mlm_flops_per_token(size: Size, extra_head_dim=0, mask_prob=0.15):
    """Training FLOPs per input token of an MLM encoder, counting matmuls only (x3: forward + backward):
    per layer q/k/v/out (4 d^2) and FFN (2 d f) multiply-adds, attention scores and mixing (2 T d), and
    the output projection (V d, plus a d x d transform for RoBERTa's head) on the predicted 15 %."""
    d = size.dim
    per_layer = 4 * d * d + 2 * d * size.ffn + 2 * size.block * d
    head = mask_prob * (size.vocab * d + extra_head_dim * d)
    return 3 * 2 * (size.layers * per_layer + head)


def translation_flops_per_target_token(size: Size, length: float):
    """Training FLOPs (forward + backward, matmuls only) of an encoder-decoder per target token, taking
    source and target sentences of one mean ``length``: encoder layers (4 d^2 + 2 d f, self-attention
    2 L d), decoder layers (self- and encoder-decoder attention 8 d^2, FFN 2 d f, attention 4 L d) and the
    output projection on every target token (V d). Back-translation's generation (no gradient) is not
    counted: it is work of the objective, not model FLOPs of the step."""
    d, f = size.dim, size.ffn
    encoder = size.layers * (4 * d * d + 2 * d * f + 2 * length * d)
    decoder = size.layers * (8 * d * d + 2 * d * f + 4 * length * d)
    return 3 * 2 * (encoder + decoder + size.vocab * d)
