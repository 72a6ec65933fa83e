"""What one ``recipes/train.sh`` run trains, from the size of its text, its budget (``--minutes`` or
``--hours``) and its hardware (``--device``, ``--processes``, ``--nodes``): the model, the vocabulary, the
batches, the split of the budget, the objectives and their schedules. Printed at the start; ``--plan``
prints it for hardware that is not here.

The sizes follow the scaling sweep on 2 CPU cores (``recipes/README.md``, "The CPU configuration"): in 8
minutes of pretraining 128 x 3 learnt most (64 x 2 stayed at the unigram plateau, 256 x 4 spent its updates
warming up), which the rule of thumb of ~20 training tokens per non-embedding parameter (Hoffmann et al.
2022) predicts from each size's measured speed; so a run takes the largest size that sees at least
:data:`MIN_TOKENS_PER_PARAM` tokens per parameter in its pretraining minutes on its hardware and is not too
large for its text (:attr:`ModelSize.params_per_token`). Above the sweep's sizes come XLM's (512 and
1024 dims x 6 layers, 8 heads, XLM's dropout, learning rate and warm-up); their speed on a CPU, and every
speed on a GPU, is estimated from bench/'s records (:func:`tokens_per_second`) until a run measures it.
Batches follow the device: 64-token streams of 2,048-token batches on CPUs (the sweep's), XLM's 256-token
streams of 8,192-token batches per GPU. The vocabulary grows with the square root of the text (4,000 pieces
on the quickstart's 0.9 M words). The budget is split as the quickstart's half hour was tuned: 22 % pretraining and 64 %
translation with pairs, 24 % and 68 % without (``recipes/README.md``, "The quickstart's runs"), the rest
for preprocessing, scoring and export; a longer budget keeps that half hour's rest (4.2 and 2.4 minutes) and
gives the training stages all the minutes beyond it, in the same proportion (:func:`split_budget`)."""

import dataclasses
import math
import re
from typing import Dict, List, Optional, Sequence, Tuple

from preprocess.errors import UserError
from recipes.train.hardware import Hardware


@dataclasses.dataclass(frozen=True)
class ModelSize:
    dim: int
    layers: int
    params: float  # non-embedding parameters (the sweep's table; 12 d^2 a layer)
    tokens_per_second: Optional[float]  # MLM+TLM pretraining on 2 CPU cores, fp32 (the sweep's); None: not measured
    heads: int = 4  # 8 heads cost 25 % of the speed at 128 dims (the sweep)
    dropout: float = 0.0  # of pretraining (translation: 0.1 at every size)
    lr: float = 1e-3
    warmup: Tuple[int, int] = (1000, 500)  # pretraining, translation
    params_per_token: float = 2.0  # at most this many parameters per token of text
    unsupervised_lr: float = 2e-3  # translation's with no pairs (Plan.translate_lr)

    @property
    def name(self) -> str:
        return f"{self.dim} dims x {self.layers} layers"


def xlm_size(dim: int, layers: int, heads: int = 8) -> ModelSize:
    """XLM's settings (its en-de/en-ro recipes: dropout 0.1, Adam at 1e-4 after 4,000 warm-up updates); with
    dropout a model may have more parameters than its text has tokens, as fairseq's IWSLT'14 transformer has
    (31 M non-embedding parameters on ~7 M tokens, ~4.5 a token): up to 6 a token here."""
    return ModelSize(dim, layers, 12 * dim * dim * layers, None, heads, 0.1, 1e-4, (4000, 4000), 6.0, 1e-4)


SIZES = (
    ModelSize(64, 2, 0.10e6, 55.8e3),
    ModelSize(128, 3, 0.60e6, 27.3e3),
    ModelSize(192, 4, 1.78e6, 14.3e3),
    ModelSize(256, 4, 3.16e6, 9.9e3),
    xlm_size(512, 6),
    xlm_size(1024, 6),
)
MIN_TOKENS_PER_PARAM = 15
PIECES_PER_WORD = 1.4  # subwords per word at the quickstart's vocabulary
REFERENCE_WORDS, REFERENCE_VOCAB = 900_000, 4000  # the quickstart's text and vocabulary
VOCAB_RANGE = (1000, 32000)
SHARES = {"semi": (0.22, 0.64), "unsupervised": (0.24, 0.68)}  # of the budget: pretraining, translation
SHARES_TUNED_MINUTES = 30  # the budget SHARES were tuned at
# each training stage's learning rate falls linearly to 0 over this last share of its budget
# (--lr-scheduler inverse_sqrt_cooldown; recipes/README.md, "The learning rate without pairs")
COOLDOWN_SHARE = 0.2
TINY = dict(
    pretrain_hours=0.02,
    translate_hours=0.02,
    pretrain_updates=80,
    translate_updates=40,
    valid_every=20,
    bt_from=10,
    mono_lines=2000,
    pair_lines=1000,
    held_lines=100,
)
FULL = dict(pretrain_updates=1_000_000, translate_updates=1_000_000, valid_every=2000, bt_from=600)
# translation's validations without pairs: the round trips choose the checkpoint, so they come often, about
# 7 in the quickstart's 20 minutes, each of a few decodes of the valid text (epochs are as short as 200 updates)
ROUNDTRIP_EVERY = 500


@dataclasses.dataclass(frozen=True)
class Batches:
    stream: int  # pretraining: tokens a stream block (--tokens-per-sample)
    pretrain_tokens: int  # pretraining: tokens a batch per process (--max-tokens)
    translate_tokens: int  # translation: tokens a batch per process


BATCHES = {"cpu": Batches(64, 2048, 2000), "cuda": Batches(256, 8192, 2000)}  # cuda: XLM's (bptt, tokens_per_batch)

# GPU speed, an estimate until a train.sh run measures it: the plugin's MLM step on one H100 in bf16 (tokens/s,
# bench/results/compile-cuda-bf16.json, eager), times what fairseq-train kept of it at 128 x 3 on that GPU (55 k
# tokens/s, bench/results/history.jsonl gpu-h100-run1, against the step's 76 k)
GPU_STEP_TOKENS_PER_SECOND = {(128, 3): 76.1e3, (256, 4): 246.8e3, (1024, 6): 290.4e3}
GPU_FAIRSEQ_TRAIN_SHARE = 0.72


def flops_per_token(size: ModelSize, stream: int) -> float:
    """Training FLOPs per token of MLM (forward + backward): the layers' matmuls and attention over the stream."""
    return 6 * size.params + 12 * size.layers * size.dim * stream


def tokens_per_second(size: ModelSize, device: str) -> Tuple[float, bool]:
    """Pretraining tokens a second of one process on a GPU, or of one machine's 2 cores (processes on one machine
    share them): (speed, measured by a train.sh run). A CPU speed the sweep did not measure is 256 x 4's scaled
    by FLOPs; a GPU speed the step's record lacks is the largest size's FLOP rate, and no faster than the
    nearest smaller size measured (small steps are bound by kernel launches, not FLOPs)."""
    if device == "cpu":
        if size.tokens_per_second:
            return size.tokens_per_second, True
        ref = SIZES[3]
        stream = BATCHES["cpu"].stream
        return ref.tokens_per_second * flops_per_token(ref, stream) / flops_per_token(size, stream), False
    measured = GPU_STEP_TOKENS_PER_SECOND
    step = measured.get((size.dim, size.layers))
    if step is None:
        stream = BATCHES["cuda"].stream
        largest = max(measured)
        flops_a_second = measured[largest] * flops_per_token(parse_size("x".join(map(str, largest))), stream)
        smaller = [v for (dim, _), v in sorted(measured.items()) if dim <= size.dim] or [min(measured.values())]
        step = min(flops_a_second / flops_per_token(size, stream), smaller[-1])
    return step * GPU_FAIRSEQ_TRAIN_SHARE, False


def split_budget(minutes: float, supervision: str) -> Tuple[float, float]:
    """(pretraining, translation) hours of a budget of ``minutes``: :data:`SHARES` up to the half hour they were
    tuned at; beyond it the rest for preprocessing, scoring and export stays that half hour's."""
    pretrain, translate = SHARES[supervision]
    rest = (1 - pretrain - translate) * min(minutes, SHARES_TUNED_MINUTES)
    training = minutes - rest
    share = pretrain / (pretrain + translate)
    return round(training * share / 60, 4), round(training * (1 - share) / 60, 4)


def choose_size(pretrain_minutes: float, train_tokens: float, hardware: Hardware = Hardware()) -> Tuple[ModelSize, str]:
    """The largest size that sees enough tokens per parameter in the pretraining minutes on ``hardware`` and is
    not too large for its text; the smallest if none does. (size, why)."""
    seconds = pretrain_minutes * 60

    def seen(s):
        return tokens_per_second(s, hardware.device)[0] * hardware.speedup * seconds / s.params

    fits = [s for s in SIZES if seen(s) >= MIN_TOKENS_PER_PARAM and s.params <= s.params_per_token * train_tokens]
    size = fits[-1] if fits else SIZES[0]
    speed, measured = tokens_per_second(size, hardware.device)
    why = (
        f"{seen(size):.0f} tokens per non-embedding parameter in {pretrain_minutes:.1f} min of pretraining "
        f"(>= {MIN_TOKENS_PER_PARAM} wanted), {size.params / 1e6:.2f} M parameters for "
        f"{train_tokens / 1e6:.2f} M tokens"
    )
    if not measured:
        unit = "GPU" if hardware.device == "cuda" else "machine"
        why += f" (speed estimated from bench/ records: {speed / 1e3:.0f} k tokens/s a {unit})"
    return size, why


def parse_size(value: str) -> ModelSize:
    """--size DIMSxLAYERS: one of :data:`SIZES`, or a new one (8 heads from 512 dims, XLM's settings)."""
    m = re.fullmatch(r"(\d+)x(\d+)", value)
    if not m or int(m[1]) < 8 or int(m[2]) < 1:
        raise UserError(f"--size {value}: expected DIMSxLAYERS, for example 512x6")
    dim, layers = int(m[1]), int(m[2])
    known = [s for s in SIZES if (s.dim, s.layers) == (dim, layers)]
    if known:
        return known[0]
    size = xlm_size(dim, layers) if dim >= 512 else ModelSize(dim, layers, 12 * dim * dim * layers, None)
    if dim % size.heads:
        raise UserError(f"--size {value}: {dim} dims do not split into {size.heads} heads")
    return size


def choose_vocab(words: int, characters: int) -> int:
    """4,000 pieces at the quickstart's 0.9 M words, growing with the square root of the text (rounded to
    500s, within :data:`VOCAB_RANGE`), and never fewer than the text's characters (+100): a script of
    thousands of characters needs a piece for each."""
    vocab = REFERENCE_VOCAB * math.sqrt(max(words, 1) / REFERENCE_WORDS)
    vocab = int(round(vocab / 500) * 500)
    vocab = min(max(vocab, VOCAB_RANGE[0]), VOCAB_RANGE[1])
    return max(vocab, characters + 100)


@dataclasses.dataclass
class Plan:
    langs: List[str]
    pairs: List[Tuple[str, str]]  # the pairs with text (train, valid, test)
    supervision: str  # semi | unsupervised
    tiny: bool
    minutes: float
    precision: str  # of pretraining: fp32 | bf16 | fp16 (cuda)
    size: ModelSize
    size_why: str
    vocab: int
    pretrain_hours: float
    translate_hours: float
    pretrain_updates: int
    translate_updates: int
    valid_every: int
    bt_from: int
    heads: int = 4
    hardware: Hardware = Hardware()
    lm: Optional[str] = None  # the pretrained LM the run starts from (--lm), or None
    lexicon: Tuple[str, ...] = ()  # unsupervised: what the word-by-word pairs of an induced lexicon feed (--lexicon)

    @property
    def pair_langs(self) -> List[str]:
        """The languages translation trains on: those of the pairs (an LM's other languages are kept in
        pretraining only)."""
        return [lang for lang in self.langs if any(lang in p for p in self.pairs)]

    @property
    def batches(self) -> Batches:
        return BATCHES[self.hardware.device]

    @property
    def translate_precision(self) -> str:
        if self.hardware.device == "cuda":
            return self.precision
        # on CPUs fp32 with pairs (bf16 bought 13 % more updates and level BLEU); without, the updates are mostly greedy
        # back-translation, which bf16 speeds more (recipes/README.md, --unsupervised)
        return self.precision if self.supervision == "unsupervised" else "fp32"

    @property
    def translate_lr(self) -> float:
        """Translation's peak learning rate: without pairs the sweep's sizes take twice pretraining's, which
        with the cooldown gained 0.8 BLEU both ways on the quickstart's LM (recipes/README.md, "The
        learning rate without pairs"); with pairs, and at XLM's sizes, the size's own."""
        return self.size.unsupervised_lr if self.supervision == "unsupervised" else self.size.lr

    @property
    def checkpoint_metric(self) -> str:
        """What chooses the translation checkpoint scored and exported: with pairs, the mean tokenised BLEU of
        the valid pairs; without, the round trips of monolingual valid text (their BLEU back less what the
        translations copy, ``roundtrip_score``): no parallel text is read, in validation either."""
        return "bleu_tok_mean" if self.supervision == "semi" else "roundtrip_score"

    @property
    def translate_valid_every(self) -> Optional[int]:
        """Updates between translation's validations; None: at the end of every epoch (with pairs)."""
        if self.supervision == "semi":
            return None
        return self.valid_every if self.tiny else ROUNDTRIP_EVERY

    @property
    def directions(self) -> List[Tuple[str, str]]:
        return [d for a, b in self.pairs for d in ((a, b), (b, a))]

    def mlm_steps(self) -> str:
        steps = list(self.langs)
        if self.supervision == "semi" or "tlm" in self.lexicon:
            steps += [f"{a}-{b}" for a, b in self.pairs]  # TLM (on word-by-word pairs with --lexicon)
        return ",".join(steps)

    def objectives(self) -> List[str]:
        """translation_lm's objective options: AE on every language, back-translation both ways of every pair,
        and (with pairs) MT both ways; XLM's UNMT lets AE fade out while BT carries on from the start, with
        pairs BT joins once MT produces something worth back-translating."""
        bt = ",".join(f"{a}-{b}-{a}" for a, b in self.directions)
        args = ["--ae-steps", ",".join(self.pair_langs), "--bt-steps", bt]
        n = self.bt_from
        if self.supervision == "unsupervised":
            fade = f"0:1,{n * 2}:0.1,{n * 4}:0"
            args += ["--lambda-ae", fade]
            if "mt" in self.lexicon:  # word-by-word translation first, fading out as AE does (Lample et al. 2018)
                mt = ",".join(f"{a}-{b}" for a, b in self.directions)
                args += ["--mt-steps", mt, "--lambda-mt", fade]
            return args
        mt = ",".join(f"{a}-{b}" for a, b in self.directions)
        return (
            ["--mt-steps", mt] + args + ["--lambda-ae", f"0:1,{n}:0.1,{n * 2}:0", "--lambda-bt", f"0:0,{n}:0,{n * 2}:1"]
        )

    def model_args(self) -> List[str]:
        d, n = self.size.dim, self.size.layers
        sides = [
            [f"--{side}-embed-dim", d, f"--{side}-layers", n, f"--{side}-attention-heads", self.heads]
            for side in ("encoder", "decoder")
        ]
        return ["--arch", "xlm_tiny", *sides[0], *sides[1]]

    def precision_args(self, precision: str) -> List[str]:
        return {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}[precision]

    def lexicon_line(self) -> str:
        if not self.lexicon:
            return ""
        on_pairs = [x.upper() for x in self.lexicon if x in ("tlm", "mt")]
        uses = [f"{' and '.join(on_pairs)} on word-by-word pairs"] if on_pairs else []
        uses += ["MLM on code-switched lines"] if "cs" in self.lexicon else []
        uses += ["piece embeddings from the word vectors"] if "emb" in self.lexicon else []
        return f"; {' and '.join(uses)} of a lexicon induced from the unpaired text"

    def describe(self, words: Dict[str, int]) -> List[str]:
        budget = (
            "a pipeline check (--tiny): updates capped"
            if self.tiny
            else f"{self.minutes:g} min = {self.pretrain_hours * 60:.1f} pretraining + {self.translate_hours * 60:.1f} "
            f"translation + the rest for preprocessing, scoring and export"
        )
        text = ", ".join(f"{lang} {words.get(lang, 0) / 1e6:.2f} M" for lang in self.langs)
        return [
            f"languages:   {','.join(self.langs)}; pairs: {', '.join(f'{a}-{b}' for a, b in self.pairs)}; "
            f"{'semi-supervised' if self.supervision == 'semi' else 'unsupervised (no pair seen)'}"
            + self.lexicon_line(),
            f"text:        train words {text}",
            f"vocabulary:  {self.vocab:,} pieces, "
            + (f"the LM's ({self.lm})" if self.lm else "joint sentencepiece (fewer if the text cannot make them)"),
            f"hardware:    {self.hardware.describe()}",
            f"model:       {self.size.name}, {self.heads} heads: {self.size_why}",
            f"budget:      {budget}",
            f"precision:   pretraining {self.precision}, translation {self.translate_precision}",
            f"rates:       {self.size.lr:g} pretraining, {self.translate_lr:g} translation (peaks; each falls to 0 "
            f"over the last {COOLDOWN_SHARE * 100:g} % of its budget)",
        ]


LEXICON_USES = ("tlm", "mt", "cs", "emb")


def default_lexicon(pairs: int, from_lm: bool = False) -> Tuple[str, ...]:
    """--unsupervised's uses of the induced lexicon when --lexicon is not given: the LM's piece embeddings from
    its word vectors with one pair (recipes/README.md, "A lexicon from the unpaired text"), TLM on word-by-word
    pairs with several or from a pretrained LM (each pair's lexicon is a space of its own; an LM has its
    embeddings)."""
    return ("emb",) if pairs == 1 and not from_lm else ("tlm",)


def parse_lexicon(value: str) -> tuple:
    """--lexicon's uses of the induced lexicon (recipes/train.py); ``none``: no lexicon."""
    if value == "none":
        return ()
    uses = tuple(x for x in value.split(",") if x)
    unknown = [x for x in uses if x not in LEXICON_USES]
    if unknown or len(set(uses)) != len(uses):
        raise UserError(
            f"--lexicon {value}: expected some of {', '.join(LEXICON_USES)}, comma-separated, once each, or none"
        )
    return uses


def make_plan(
    langs: Sequence[str],
    pairs,
    supervision: str,
    tiny: bool,
    minutes: float,
    precision: str,
    words: Dict[str, int],
    characters: int,
    vocab: Optional[int] = None,
    lm=None,
    lexicon: Sequence[str] = (),
    hardware: Hardware = Hardware(),
    size: Optional[ModelSize] = None,
) -> Plan:
    """``lm``: a :class:`recipes.train.lm_start.LMStart` that fixes the size and the vocabulary; ``size``
    (--size) overrides the choice."""
    total = sum(words.values())
    if tiny:
        hours = (TINY["pretrain_hours"], TINY["translate_hours"])
        schedule = TINY
    else:
        hours = split_budget(minutes, supervision)
        schedule = FULL
    if size is not None:
        why = "--size"
    else:
        size, why = choose_size(hours[0] * 60, total * PIECES_PER_WORD, hardware)
    if lm is not None:
        size, why = lm.size(), "the LM's (--lm), pretraining continues from it"
        vocab = len(lm.ckpt.assets.dictionary()[0])
    return Plan(
        langs=list(langs),
        pairs=list(pairs),
        supervision=supervision,
        tiny=tiny,
        minutes=minutes,
        precision=precision,
        size=size,
        size_why=why,
        vocab=vocab or choose_vocab(total, characters),
        pretrain_hours=hours[0],
        translate_hours=hours[1],
        pretrain_updates=schedule["pretrain_updates"],
        translate_updates=schedule["translate_updates"],
        valid_every=schedule["valid_every"],
        bt_from=schedule["bt_from"],
        heads=lm.heads if lm is not None else size.heads,
        hardware=hardware,
        lm=lm.path if lm is not None else None,
        lexicon=tuple(lexicon),
    )
