"""A model directory's card: ``README.md`` in Hugging Face's format (YAML metadata, then prose) that says
what the model does, its size and training, how well it translates (BLEU and chrF beside copying the
source, with sacreBLEU's signatures), its limits, the licence of its data, and how to use it.

``xlm-fairseq-export`` writes what the checkpoint knows (:func:`checkpoint_card`); ``recipes/train.sh``
adds what its report knows (the text it trained on, the minutes, the scores) and writes the card again."""

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

CARD_FILE = "README.md"
UNKNOWN_LICENCE = "the licences of the training text, which whoever trained it should state here"


@dataclass
class ModelCard:
    langs: List[str]
    translation: bool
    directions: List[Tuple[str, str]] = field(default_factory=list)
    size: Dict[str, int] = field(default_factory=dict)  # dim, layers, heads, ffn, vocab, parameters
    training: List[str] = field(default_factory=list)  # a line each: objectives, updates, minutes, machine
    data: List[str] = field(default_factory=list)  # a line each: what text, how much
    results: List[dict] = field(default_factory=list)  # scoring's rows: set, direction, bleu, copy, chrf, ...
    data_licence: str = UNKNOWN_LICENCE
    limits: List[str] = field(default_factory=list)

    def render(self, title: str = "") -> str:
        kind = "translation" if self.translation else "fill-mask"
        meta = [
            "---",
            "language:",
            *(f"- {lang}" for lang in self.langs),
            "library_name: fairseq",
            f"pipeline_tag: {kind}",
            "tags:",
            *(f"- {tag}" for tag in ("xlm", "xlm-fairseq", "fairseq", kind)),
            "---",
            "",
        ]
        what = (
            f"translates {', '.join(f'{a}→{b}' for a, b in self.directions)}"
            if self.translation
            else f"is a cross-lingual language model of {', '.join(self.langs)}"
        )
        s = self.size
        lines = [
            f"# {title or ('-'.join(self.langs) + (' translation' if self.translation else ' XLM'))}",
            "",
            f"An XLM model (Lample & Conneau, 2019) trained with xlm-fairseq that {what}.",
            "",
            "## Model",
            "",
            f"- {s.get('dim')} dimensions × {s.get('layers')} layers, {s.get('heads')} attention heads, feed-forward "
            f"{s.get('ffn')}; {s.get('vocab')} subwords shared by the languages",
        ]
        if s.get("parameters"):
            lines.append(f"- {s['parameters'] / 1e6:.2f} M parameters")
        lines.append("- post-LN Transformer, learned positions and language embeddings, output tied to the input")
        for title_, items in (("Training", self.training), ("Training data", self.data)):
            if items:
                lines += ["", f"## {title_}", "", *(f"- {x}" for x in items)]
        lines += ["", "## Results", ""]
        if self.results:
            lines += [
                "| test | direction | lines | BLEU | copy source | chrF | copy source |",
                "|---|---|---:|---:|---:|---:|---:|",
            ]
            for r in self.results:
                lines.append(
                    f"| {r['set']} | {r['direction']} | {r.get('lines', '?')} | {r['bleu']:.2f} | {r['copy']:.2f} | "
                    f"{_figure(r.get('chrf'))} | {_figure(r.get('chrf_copy'))} |"
                )
            signed = [r["signature"] for r in self.results if "signature" in r]
            signatures = sorted({(x["bleu"], x["chrf"]) for x in signed})
            lines += [
                "",
                "Detokenised output, beam 5. Copying the source scores that much already (names, commands and numbers "
                "are shared by the languages); the gain over it is what the model translates.",
                *(f"sacreBLEU signatures: BLEU `{b}`, chrF `{c}`." for b, c in signatures),
            ]
        else:
            lines.append("Not measured: no parallel test was scored.")
        lines += ["", "## Use", ""]
        if self.translation:
            a, b = self.directions[0] if self.directions else (self.langs[0], self.langs[-1])
            lines += [
                "```python",
                "from xlm_fairseq import XLMModel",
                "",
                'mt = XLMModel.from_pretrained("THIS_DIR")',
                f'mt.translate("...", src="{a}", tgt="{b}")  # texts of any length; paragraphs kept',
                "```",
                "",
                f"From the command line: `xlm-fairseq-translate THIS_DIR -s {a} -t {b} FILE`; over HTTP "
                "(LibreTranslate's API): `xlm-fairseq-serve THIS_DIR`.",
            ]
        else:
            lines += [
                "```python",
                "from xlm_fairseq import XLMModel",
                "",
                'xlm = XLMModel.from_pretrained("THIS_DIR")',
                f'xlm.fill_mask("... <mask> ...", "{self.langs[0]}")',
                "```",
            ]
        limits = self.limits or [
            "It learned from the text under Training data only: expect it to translate text like that (its domain, "
            "its sentence length) and to do worse elsewhere.",
        ]
        lines += ["", "## Limits", "", *(f"- {x}" for x in limits)]
        lines += [
            "",
            "## Licence",
            "",
            f"The code that trained it: MIT (xlm-fairseq). The weights are derived from the training text, under "
            f"{self.data_licence}.",
            "",
        ]
        return "\n".join(meta + lines)


def _figure(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def checkpoint_card(state: dict, langs: Sequence[str], directions: Sequence[Tuple[str, str]], vocab: int) -> ModelCard:
    """What a checkpoint says of itself: its languages, size, objectives and updates."""
    cfg = state.get("cfg") or {}
    model, task = cfg.get("model") or {}, cfg.get("task") or {}
    weights = state.get("model") or {}
    unique = {id(v.untyped_storage()) if hasattr(v, "untyped_storage") else k: v for k, v in weights.items()}
    translation = any(k.startswith("decoder.") for k in weights)
    size = dict(
        dim=model.get("encoder_embed_dim"),
        layers=model.get("encoder_layers"),
        heads=model.get("encoder_attention_heads"),
        ffn=model.get("encoder_ffn_embed_dim"),
        vocab=vocab,
        parameters=sum(v.numel() for v in unique.values() if hasattr(v, "numel")),
    )
    objectives = [
        f"{name}: {task[key]}"
        for key, name in (
            ("mlm_steps", "MLM/TLM"),
            ("clm_steps", "CLM"),
            ("mt_steps", "MT"),
            ("ae_steps", "denoising"),
            ("bt_steps", "back-translation"),
        )
        if task.get(key)
    ]
    history = state.get("optimizer_history") or [{}]
    updates = history[-1].get("num_updates")
    training = [f"{task.get('_name', '?')}: {'; '.join(objectives) or '?'}"]
    if updates:
        training.append(f"{updates:,} updates")
    return ModelCard(list(langs), translation, list(directions) if translation else [], size, training)


def write_card(directory: str, card: ModelCard, title: str = "") -> str:
    path = os.path.join(directory, CARD_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(card.render(title))
    return path


def report_card(card: ModelCard, report: dict, data: List[str], data_licence: Optional[str] = None) -> ModelCard:
    """``card`` with what a ``recipes/train.sh`` report adds: how it trained, on what (``data``: a line
    each), and its scores."""
    training = list(card.training) + list(report.get("trained") or [])
    training.append(
        f"{report.get('supervision', '?')} translation, {report.get('minutes', '?')} minutes on {report.get('machine')}"
        f" ({', '.join(report.get('precision') or [])}); command: `{report.get('command', '?')}`"
    )
    results = [r for r in report.get("bleu") or [] if "bleu" in r]
    return ModelCard(
        card.langs,
        card.translation,
        card.directions,
        card.size,
        training,
        data or card.data,
        results,
        data_licence or card.data_licence,
        card.limits,
    )
