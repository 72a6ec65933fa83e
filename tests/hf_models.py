"""A tiny Hugging Face XLM with a real BPE vocabulary (``make_hf_dir``), shared by the tests of the
converters, the hub and released models."""

import json
import os
from collections import Counter

import torch

SPECIALS = ["<s>", "</s>", "<pad>", "<unk>"] + [f"<special{i}>" for i in range(10)]
CORPUS = {
    "en": ["the cat sat on the mat .", "the dog is here .", "that cat is on the mat , here ."],
    "de": ["der hund ist hier .", "die katze sitzt auf der matte .", "der hund sitzt hier ."],
}
LANG2ID = {"en": 0, "de": 1}


def learn_bpe(n_merges=24):
    """A small BPE learner (fastBPE conventions: ``</w>`` on the last symbol of a word)."""
    freqs = Counter(w for lines in CORPUS.values() for line in lines for w in line.split())
    words = {tuple(w[:-1]) + (w[-1] + "</w>",): f for w, f in freqs.items()}
    symbols = Counter()
    for syms, f in words.items():
        for s in syms:
            symbols[s] += f
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for syms, f in words.items():
            for pair in zip(syms, syms[1:]):
                pairs[pair] += f
        if not pairs:
            break
        best = sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        merges.append((best[0], best[1], pairs[best]))
        new_words = {}
        for syms, f in words.items():
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and (syms[i], syms[i + 1]) == best:
                    out.append(syms[i] + syms[i + 1])
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            new_words[tuple(out)] = f
        words = new_words
        symbols[best[0] + best[1]] += pairs[best]
    tokens = [s for s, _ in sorted(symbols.items(), key=lambda kv: (-kv[1], kv[0]))]
    return merges, tokens


def hf_config(n_words, use_lang_emb=True, sinusoidal=False):
    from transformers import XLMConfig

    return XLMConfig(
        vocab_size=n_words,
        emb_dim=32,
        n_layers=2,
        n_heads=4,
        n_langs=2,
        use_lang_emb=use_lang_emb,
        lang2id=dict(LANG2ID),
        id2lang={i: lang for lang, i in LANG2ID.items()},
        max_position_embeddings=48,
        sinusoidal_embeddings=sinusoidal,
        dropout=0.1,
        attention_dropout=0.05,
        causal=False,
        mask_index=SPECIALS.index("<special1>"),
    )


def make_hf_dir(path, use_lang_emb=True, sinusoidal=False, seed=0):
    """save_pretrained of a random XLMWithLMHeadModel (all weights perturbed, LayerNorms and biases
    included) with a matching vocab.json / merges.txt / tokenizer_config.json. Returns the model."""
    from transformers import XLMWithLMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    merges, tokens = learn_bpe()
    vocab = SPECIALS + tokens
    torch.manual_seed(seed)
    model = XLMWithLMHeadModel(hf_config(len(vocab), use_lang_emb, sinusoidal)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if sinusoidal and "position_embeddings" in name:
                continue
            p.add_(torch.randn_like(p) * 0.3)
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    with open(os.path.join(path, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(vocab)}, f, indent=1)
    with open(os.path.join(path, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{a} {b} {c}\n" for a, b, c in merges))
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "tokenizer_class": "XLMTokenizer",
                "do_lowercase_and_remove_accent": True,
                "lang2id": LANG2ID,
                "id2lang": {str(i): lang for lang, i in LANG2ID.items()},
            },
            f,
        )
    return model
