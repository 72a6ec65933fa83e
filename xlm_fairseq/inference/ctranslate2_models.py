"""Translation models served by CTranslate2 (OpenNMT's inference engine: int8, int16 or float16
weights on CPU and GPU), written by ``xlm-fairseq-export CKPT OUT --ctranslate2`` and used by the
translation hub when its model directory holds them.

One CTranslate2 model per direction, ``OUT/ctranslate2/SRC-TGT``: XLM's language embedding is a
constant per side (the source language on every encoder position, the target language on every
decoder position), so it folds into that side's position table. The rest maps onto CTranslate2's
post-norm transformer: embedding LayerNorm, exact GELU, LayerNorm eps 1e-12, no embedding scale, the
output layer tied to the embeddings with its own bias. ``<pad>`` is never generated, as in
fairseq's ``SequenceGenerator`` (its output bias is set far below any logit). A source is
``pieces...``: CTranslate2 adds XLM's ``</s>`` on both sides, and decoding starts from ``</s>``::

    import ctranslate2
    de_en = ctranslate2.Translator("OUT/ctranslate2/de-en")
    de_en.translate_batch([["▁Hallo", "▁Welt", "!"]], beam_size=5)

The pieces come from the model's text pipeline (``XLMModel.from_pretrained(OUT).translate`` runs it,
and on a CPU with AVX-512 sets ``CT2_FORCE_CPU_ISA=AVX512`` first: :func:`ctranslate2_environment`).

In float32 the tokens are fairseq's for greedy search and for beam search without length
normalisation. With it (``lenpen`` 1) they can part: CTranslate2 bans ``</s>`` at the first step
before the softmax, fairseq after it, so every hypothesis's score differs by log(1 - p(``</s>``)) at
that step, which does not reorder sums but can reorder means of different lengths (499 of 500
sentences equal on the quickstart's test).

Quantization happens when a model is loaded: the weights are stored in float32 and
``OUT/ctranslate2/settings.json`` names the compute type (``int8``: pass ``compute_type="int8"`` to
``ctranslate2.Translator`` yourself). CTranslate2 4.8's own int8 conversion breaks this model (its
output layer is the embedding matrix; translations turn to repeated words: en-de BLEU 2.15 -> 0.08
on the ``--unsupervised`` quickstart's test; OpenNMT/CTranslate2#847 reports the same of a fairseq
model), while quantizing the float32 weights on load keeps BLEU (2.20; de-en 3.06 against 2.93).
"""

import itertools
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.modules.transformer import count_layers

CTRANSLATE2_DIR = "ctranslate2"  # in a model directory: one CTranslate2 model per SRC-TGT below it
SETTINGS_FILE = "settings.json"  # in OUT/ctranslate2: {"compute_type": ...}
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int16", "float16", "float32")  # CTranslate2's names
NEVER_GENERATED_BIAS = -1e4  # output bias of <pad>: a probability of exp(-1e4), still finite in float16
PAD_IN_CTRANSLATE2 = "<blank>"  # CTranslate2's name of the padding entry


CPU_ISA_VARIABLE = "CT2_FORCE_CPU_ISA"  # CTranslate2 reads it once per process, at its first computation
AVX512_FLAGS = ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")  # CTranslate2's own test for AVX-512


def ctranslate2_environment(environ=os.environ, cpuinfo: str = "/proc/cpuinfo") -> Dict[str, str]:
    """The variables to set before CTranslate2 computes: AVX-512 for its own kernels where the CPU has it.
    CTranslate2 dispatches to AVX2 unless asked (its docs: AVX-512 "can only be enabled with the environment
    variable"); asking pays on the recipes' model (``bench/serving.py``, bench/README.md). A value the
    user set is kept (``CT2_FORCE_CPU_ISA=AVX2`` restores the default)."""
    if CPU_ISA_VARIABLE in environ:
        return {}
    try:
        with open(cpuinfo) as f:
            flags = set(f.read().split())
    except OSError:  # not Linux: leave CTranslate2's choice
        return {}
    return {CPU_ISA_VARIABLE: "AVX512"} if flags.issuperset(AVX512_FLAGS) else {}


def import_ctranslate2():
    os.environ.update(ctranslate2_environment())
    try:
        import ctranslate2
    except ImportError as e:
        raise XLMUserError(
            f"CTranslate2 is not installed ({e}): pip install ctranslate2 (or the package's [ctranslate2] extra)"
        ) from None
    return ctranslate2


def direction_dir(model_dir: str, src: str, tgt: str) -> str:
    return os.path.join(model_dir, CTRANSLATE2_DIR, f"{src}-{tgt}")


def exported_directions(model_dir: Optional[str]) -> List[Tuple[str, str]]:
    """The directions a model directory holds CTranslate2 models for."""
    root = os.path.join(model_dir or "", CTRANSLATE2_DIR)
    if not model_dir or not os.path.isdir(root):
        return []
    found = []
    for name in sorted(os.listdir(root)):
        src, _, tgt = name.partition("-")
        if tgt and os.path.isfile(os.path.join(root, name, "model.bin")):
            found.append((src, tgt))
    return found


def parse_directions(text: Optional[str], langs: Sequence[str]) -> List[Tuple[str, str]]:
    """``de-en,en-de`` -> pairs; None or empty: every ordered pair of the model's languages."""
    if not text:
        return [(a, b) for a, b in itertools.permutations(langs, 2)]
    pairs = []
    for item in text.split(","):
        src, sep, tgt = item.strip().partition("-")
        if not sep or src not in langs or tgt not in langs or src == tgt:
            raise XLMUserError(
                f"--directions: {item.strip()!r} is not SRC-TGT of two of the model's languages ({','.join(langs)})"
            )
        pairs.append((src, tgt))
    return pairs


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------


def build_spec(params: Dict[str, torch.Tensor], n_heads: int, langs: Sequence[str], symbols: Sequence[str], src, tgt):
    """The CTranslate2 ``TransformerSpec`` of direction ``src`` -> ``tgt`` of a translation_lm
    model's state dict (``encoder.transformer.*``, ``decoder.transformer.*``)."""
    ct2 = import_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    from xlm_fairseq.modules.transformer import LAYER_NORM_EPS

    def array(name: str) -> np.ndarray:
        return params[name].detach().float().cpu().numpy()

    layers = tuple(count_layers(params, f"{side}.transformer.") for side in ("encoder", "decoder"))
    if not all(layers):
        raise XLMUserError("not a translation model: no encoder and decoder layers in its parameters")
    spec = transformer_spec.TransformerSpec.from_config(
        layers, n_heads, pre_norm=False, activation=common_spec.Activation.GELU, layernorm_embedding=True
    )

    def linear(spec_linear, *names):  # several names: one fused matrix (q,k,v or k,v)
        spec_linear.weight = np.concatenate([array(f"{n}.weight") for n in names])
        spec_linear.bias = np.concatenate([array(f"{n}.bias") for n in names])

    def layer_norm(spec_norm, name):
        spec_norm.gamma, spec_norm.beta = array(f"{name}.weight"), array(f"{name}.bias")

    def inputs(spec_side, prefix, lang):
        embeddings = spec_side.embeddings[0] if isinstance(spec_side.embeddings, list) else spec_side.embeddings
        embeddings.weight = array(f"{prefix}.embeddings.weight")
        positions = array(f"{prefix}.position_embeddings.weight")
        if f"{prefix}.lang_embeddings.weight" in params:  # the side's language, on every position
            positions = positions + array(f"{prefix}.lang_embeddings.weight")[langs.index(lang)]
        spec_side.position_encodings.encodings = positions
        spec_side.scale_embeddings = False
        layer_norm(spec_side.layernorm_embedding, f"{prefix}.layer_norm_emb")

    def layer(spec_layer, prefix, i):
        linear(spec_layer.self_attention.linear[0], *(f"{prefix}.attentions.{i}.{p}_lin" for p in "qkv"))
        linear(spec_layer.self_attention.linear[1], f"{prefix}.attentions.{i}.out_lin")
        layer_norm(spec_layer.self_attention.layer_norm, f"{prefix}.layer_norm1.{i}")
        linear(spec_layer.ffn.linear_0, f"{prefix}.ffns.{i}.lin1")
        linear(spec_layer.ffn.linear_1, f"{prefix}.ffns.{i}.lin2")
        layer_norm(spec_layer.ffn.layer_norm, f"{prefix}.layer_norm2.{i}")

    inputs(spec.encoder, "encoder.transformer", src)
    for i, spec_layer in enumerate(spec.encoder.layer):
        layer(spec_layer, "encoder.transformer", i)
    dec = "decoder.transformer"
    inputs(spec.decoder, dec, tgt)
    for i, spec_layer in enumerate(spec.decoder.layer):
        layer(spec_layer, dec, i)
        linear(spec_layer.attention.linear[0], f"{dec}.encoder_attn.{i}.q_lin")
        linear(spec_layer.attention.linear[1], f"{dec}.encoder_attn.{i}.k_lin", f"{dec}.encoder_attn.{i}.v_lin")
        linear(spec_layer.attention.linear[2], f"{dec}.encoder_attn.{i}.out_lin")
        layer_norm(spec_layer.attention.layer_norm, f"{dec}.layer_norm15.{i}")
    linear(spec.decoder.projection, f"{dec}.pred_layer.proj")
    spec.decoder.projection.bias[symbols.index("<pad>")] = NEVER_GENERATED_BIAS

    vocabulary = [PAD_IN_CTRANSLATE2 if s == "<pad>" else s for s in symbols]
    spec.register_source_vocabulary(vocabulary)
    spec.register_target_vocabulary(vocabulary)
    config = spec.config
    config.layer_norm_epsilon = LAYER_NORM_EPS
    # XLM's sentences are </s> w1 .. wn </s>, and its decoder starts from </s>
    config.bos_token = config.eos_token = config.decoder_start_token = "</s>"
    config.add_source_bos = config.add_source_eos = True
    config.unk_token = "<unk>"
    return ct2, spec


def write_ctranslate2(
    params: Dict[str, torch.Tensor],
    n_heads: int,
    langs: Sequence[str],
    symbols: Sequence[str],
    model_dir: str,
    directions: Sequence[Tuple[str, str]],
    quantization: Optional[str] = None,
) -> List[str]:
    """One CTranslate2 model per direction under ``model_dir/ctranslate2`` (a directory being
    built: see ``export.py``), float32 weights to be loaded as ``quantization``; returns their paths."""
    written = []
    for src, tgt in directions:
        ct2, spec = build_spec(params, n_heads, langs, symbols, src, tgt)

        class Converter(ct2.converters.Converter):  # CTranslate2's path for validation, quantization, saving
            def _load(self):
                return spec

        out = direction_dir(model_dir, src, tgt)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        written.append(Converter().convert(out, quantization="float32"))
    with open(os.path.join(model_dir, CTRANSLATE2_DIR, SETTINGS_FILE), "w") as f:
        json.dump({"compute_type": quantization or "default"}, f)
    return written


# --------------------------------------------------------------------------------------------
# translating
# --------------------------------------------------------------------------------------------


BATCH_HYPOTHESES = 40  # per CTranslate2 batch: 8 sentences at beam 5 (faster than 16; bench/README.md)
# and 40 at beam 1 match 16 (bench/serving.py's model, int8)


def batch_sentences(beam: int) -> int:
    return max(1, BATCH_HYPOTHESES // beam)


class CTranslate2Directions:
    """The CTranslate2 translators of a model directory, loaded on first use per direction. On CPU,
    ``threads`` translators of one thread each work on batches of :func:`batch_sentences` in parallel
    (more sentences/s than one translator on two threads, which oversubscribes: bench/README.md);
    :meth:`translate` queues all its calls before it waits for any."""

    def __init__(self, model_dir: str, device: str = "cpu", threads: int = 0):
        self.model_dir = model_dir
        self.directions = exported_directions(model_dir)
        self.device, self.threads = device, threads
        settings = os.path.join(model_dir, CTRANSLATE2_DIR, SETTINGS_FILE)
        self.compute_type = "default"
        if self.directions and os.path.isfile(settings):
            with open(settings) as f:
                self.compute_type = json.load(f).get("compute_type", "default")
        self._translators: Dict[Tuple[str, str], object] = {}

    def translator(self, src: str, tgt: str):
        if (src, tgt) not in self.directions:
            have = ", ".join(f"{a}-{b}" for a, b in self.directions) or "none"
            raise XLMUserError(
                f"{os.path.join(self.model_dir, CTRANSLATE2_DIR)}: no CTranslate2 model for {src}-{tgt} (it has: "
                f"{have}); export it with --ctranslate2 --directions {src}-{tgt}, or translate with engine='fairseq'"
            )
        if (src, tgt) not in self._translators:
            ct2 = import_ctranslate2()
            parallel = dict(inter_threads=self.threads or torch.get_num_threads(), intra_threads=1)
            self._translators[(src, tgt)] = ct2.Translator(
                direction_dir(self.model_dir, src, tgt),
                device=self.device,
                compute_type=self.compute_type,
                **(parallel if self.device == "cpu" else {}),
            )
        return self._translators[(src, tgt)]

    def translate(
        self,
        pieces: List[List[str]],
        src: str,
        tgt: str,
        beam: int,
        max_len_a: float,
        max_len_b: int,
        max_positions: int,
        **options,
    ) -> List[List[str]]:
        """The best translation's pieces for each source (pieces without ``</s>``). Lengths as
        fairseq's generator counts them: at most ``max_len_a * (n + 2) + max_len_b`` words for a
        source of n pieces (its two ``</s>`` counted), and fewer than the decoder's positions. A
        source over the model's positions keeps its first ``max_positions - 2`` pieces, as in fairseq."""
        translator = self.translator(src, tgt)
        pieces = [p[: max_positions - 2] for p in pieces]
        limits = [min(int(max_len_a * (len(p) + 2) + max_len_b), max_positions - 1) for p in pieces]
        # CTranslate2 takes one length limit per call: one call per limit, all queued at once (asynchronous)
        # so that the translators never wait for a call's last batch before starting the next call's
        submitted = []
        for limit in sorted(set(limits)):
            indices = [i for i, n in enumerate(limits) if n == limit]
            results = translator.translate_batch(
                [pieces[i] for i in indices],
                beam_size=beam,
                max_decoding_length=limit,
                max_input_length=0,  # cut above
                max_batch_size=batch_sentences(beam),
                asynchronous=True,
                **options,
            )
            submitted.extend(zip(indices, results))
        outputs: List[List[str]] = [[] for _ in pieces]
        for i, result in submitted:
            outputs[i] = result.result().hypotheses[0]
        return outputs
