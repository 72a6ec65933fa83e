"""What the CPU experiments (``scale.py``, ``ablation.py`` beside this module) measure, one way for all:

* a pretrained LM: XLM's validation perplexity (every predicted position shown as the mask, its
  evaluator's positions; ``fairseq-validate``) per language, beside the unigram model of the
  training text on the same tokens, and the alignment probe (``xlm-fairseq-lexicon``);
* a translation model: BLEU (sacreBLEU on fairseq-generate's detokenised ``D-`` lines against the
  raw reference) and the reference log-probability per token (``--score-reference``, log2), which
  moves long before BLEU does;
* the floor every BLEU is read against: the source sentence copied as the translation.

Each ``Measure`` method takes the driver that runs commands (``driver.Driver``) and writes nothing
but the logs it is given. Every run trains with the shared optimiser (``recipes/train/optim.flags``)."""

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Dict, Optional

from recipes.experiments.driver import ROOT, Driver
from recipes.train.optim import optim_flags
from recipes.train.scoring import generated

BIN = Path(sys.executable).parent
CALIBRATION_SECONDS = 75  # how long a run's speed is measured before its budget in minutes is counted in updates


def model_args(p: dict) -> list:
    """xlm_transformer of ``p`` (dim, layers, heads, ffn; dropout, 0.1 unless given; ``lang_emb=False``:
    no language embeddings), encoder and decoder alike."""
    dropout = p.get("dropout", 0.1)
    out = ["--arch", "xlm_tiny", *([] if p.get("lang_emb", True) else ["--no-lang-emb"])]
    for side in ("encoder", "decoder"):
        out += [
            f"--{side}-embed-dim",
            p["dim"],
            f"--{side}-layers",
            p["layers"],
            f"--{side}-attention-heads",
            p["heads"],
            f"--{side}-ffn-embed-dim",
            p["ffn"],
        ]
    return out + ["--dropout", dropout, "--attention-dropout", dropout]


def train_args(save, lr, warmup, max_tokens, minutes, max_update=100000000, step_per_objective=True) -> list:
    """fairseq-train options every experiment run shares: CPU, seed 1, JSON logs in SAVE/train.log,
    no validation, the shared optimiser (Adam (0.9, 0.98), clip 5, inverse-sqrt decay, which does not
    depend on the budget, so a run resumed to a larger budget continues the same curve) at ``lr`` after
    ``warmup`` steps, XLM's loop; stopped after ``minutes`` of training (cumulative over resumes) or
    ``max_update`` updates."""
    return [
        "--user-dir",
        ROOT / "xlm_fairseq",
        "--cpu",
        "--num-workers",
        "0",
        "--seed",
        "1",
        "--log-format",
        "json",
        "--log-interval",
        "100",
        "--no-epoch-checkpoints",
        "--disable-validation",
        "--save-dir",
        save,
        "--max-update",
        max_update,
        "--stop-time-hours",
        f"{minutes / 60:.6f}",
        *(["--step-per-objective"] if step_per_objective else []),
        *optim_flags(lr=lr, warmup_updates=warmup),
        "--max-tokens",
        max_tokens,
        "--log-file",
        Path(save) / "train.log",
    ]


def measure_speed(driver: Driver, cmd: list, save: Path, interval: int) -> float:
    """Updates per second of a fairseq-train command run alone (``cmd`` bounds its own time and logs
    JSON to SAVE/train.log): the median over log windows of ``interval`` updates, the first left
    out. Budgets in minutes become updates from it, so that what else the machine does later cannot
    change what a budget buys."""
    shutil.rmtree(save, ignore_errors=True)
    save.mkdir(parents=True)
    driver.run([*cmd, "--log-interval", interval, "--no-save"], save / "stdout.log")
    ups = [
        float(json.loads(line[line.index("{") :])["ups"])
        for line in (save / "train.log").read_text().splitlines()
        if '"ups"' in line
    ]
    if len(ups) < 2:
        driver.fail(f"the speed measurement logged too few updates (see {save}/train.log)")
    return round(sorted(ups[1:])[len(ups[1:]) // 2], 3)


def minutes_list(value: str):
    try:
        out = tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError:
        out = ()
    if not out or any(m <= 0 for m in out) or list(out) != sorted(set(out)):
        raise argparse.ArgumentTypeError(f"expected increasing minutes like 15,30, got {value!r}")
    return out


def model_size(value: str):
    """'256x4' -> (256, 4): dimensions and layers."""
    dims, _, layers = value.partition("x")
    if not (dims.isdigit() and layers.isdigit() and int(dims) > 0 and int(layers) > 0 and int(dims) % 4 == 0):
        raise argparse.ArgumentTypeError(f"expected DIMSxLAYERS like 256x4 (dims a multiple of 4), got {value!r}")
    return int(dims), int(layers)


def parse_budget(value: str) -> float:
    """'4h', '90m', '1h30m' or minutes as a number -> minutes."""
    m = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m?)?\s*", value)
    if not value.strip() or not m or not any(m.groups()):
        raise ValueError(f"expected a duration like 4h, 90m or 1h30m, got {value!r}")
    return float(m.group(1) or 0) * 60 + float(m.group(2) or 0)


def read_lines(path) -> list:
    return Path(path).read_text(encoding="utf-8").splitlines()


def copy_bleu(src_path, ref_path) -> float:
    """BLEU of the source sentences themselves as translations: shared names, commands and numbers
    make it far from 0 on software documentation."""
    import sacrebleu

    return round(sacrebleu.corpus_bleu(read_lines(src_path), [read_lines(ref_path)]).score, 2)


def ref_logprob(score_log) -> float:
    """Mean log2-probability per reference token (the P- lines of --score-reference)."""
    total, n = 0.0, 0
    for line in Path(score_log).read_text().splitlines():
        if line.startswith("P-"):
            values = [float(v) for v in line.split("\t")[1].split()]
            total, n = total + sum(values), n + len(values)
    return round(total / max(n, 1), 3)


class Measure:
    def __init__(self, driver: Driver, data: Path, langs=("de", "en"), tokens_per_sample=128, max_tokens=4096):
        self.driver = driver
        self.data = Path(data)
        self.langs = list(langs)
        self.tokens_per_sample = tokens_per_sample
        self.max_tokens = max_tokens
        self._unigram: Dict[str, dict] = {}

    # ---- pretrained LMs --------------------------------------------------------------------

    def valid_mono(self) -> Path:
        """A directory where each side of the valid pairs is a monolingual valid file (what
        fairseq-validate of cross_lingual_lm reads), beside the data-bin's dictionary."""
        mono = self.data.parent / f"{self.data.name}-valid-mono"
        mono.mkdir(exist_ok=True)
        pair = "-".join(sorted(self.langs[:2]))
        for name in ["dict.txt"] + [f"valid.{lang}.{ext}" for lang in self.langs for ext in ("bin", "idx")]:
            source = self.data / ("dict.txt" if name == "dict.txt" else name.replace("valid.", f"valid.{pair}.", 1))
            if not (mono / name).exists():
                (mono / name).symlink_to(source)
        return mono

    def lm(self, checkpoint, log) -> dict:
        """{lang: {fullmask_ppl, fullmask_acc, unigram_ppl, unigram_acc}} on the valid sentences."""
        self.driver.run(
            [
                BIN / "fairseq-validate",
                self.valid_mono(),
                "--user-dir",
                ROOT / "xlm_fairseq",
                "--task",
                "cross_lingual_lm",
                "--langs",
                ",".join(self.langs),
                "--mlm-steps",
                ",".join(self.langs),
                "--tokens-per-sample",
                self.tokens_per_sample,
                "--max-tokens",
                self.max_tokens,
                "--path",
                checkpoint,
                "--cpu",
                "--valid-subset",
                "valid",
                "--log-format",
                "json",
            ],
            log,
        )
        found = re.findall(r'\{"valid_.*\}', Path(log).read_text(errors="replace"))
        if not found:
            self.driver.fail(f"no validation result in {log}")
        metrics = json.loads(found[-1])
        return {
            lang: {
                "fullmask_ppl": float(metrics[f"valid_mlm_{lang}_fullmask_ppl"]),
                "fullmask_acc": float(metrics[f"valid_mlm_{lang}_fullmask_acc"]),
                **self.unigram(lang),
            }
            for lang in self.langs
        }

    def unigram(self, lang) -> dict:
        """The unigram model of the training text (add-one counts of every token, </s> and <unk>
        included, as XLM's metric predicts them), on the tokens XLM's evaluator scores: its
        perplexity, and the accuracy of always guessing the most frequent token."""
        if lang not in self._unigram:
            import logging

            import numpy as np
            import torch
            from fairseq.data import Dictionary, data_utils

            logging.getLogger("fairseq").setLevel(logging.WARNING)

            from xlm_fairseq.data import stream_dataset
            from xlm_fairseq.data.masking import eval_pred_mask

            dictionary = Dictionary.load(str(self.data / "dict.txt"))

            def ids(prefix):
                dataset = data_utils.load_indexed_dataset(str(prefix), dictionary)
                return np.concatenate([dataset[i].numpy() for i in range(len(dataset))])

            counts = np.bincount(ids(self.data / f"train.{lang}"), minlength=len(dictionary)) + 1.0
            counts[dictionary.pad()] = 0
            pair = "-".join(sorted(self.langs[:2]))
            valid = data_utils.load_indexed_dataset(str(self.data / f"valid.{pair}.{lang}"), dictionary)
            stream = stream_dataset(valid, self.tokens_per_sample, dictionary.pad(), dictionary.eos())
            blocks = data_utils.collate_tokens([stream[i] for i in range(len(stream))], dictionary.pad())
            scored = blocks[eval_pred_mask(blocks, dictionary.pad(), 1.0, torch.Generator().manual_seed(0))].numpy()
            self._unigram[lang] = {
                "unigram_ppl": round(float(np.exp(-np.log(counts[scored] / counts.sum()).mean())), 1),
                "unigram_acc": round(100 * float((scored == counts.argmax()).mean()), 2),
            }
        return self._unigram[lang]

    def probe(self, checkpoint, bli_dict, out_json, log, random_init=False) -> dict:
        """xlm-fairseq-lexicon on ``checkpoint`` (or its architecture at random init)."""
        cmd = [
            BIN / "xlm-fairseq-lexicon",
            checkpoint,
            "--dict",
            bli_dict,
            "--data",
            self.data,
            "--json",
            out_json,
        ]
        self.driver.run(cmd + (["--random-init"] if random_init else []), log)
        result = json.loads(Path(out_json).read_text())
        return {kind: result[kind] for kind in ("embeddings", "contextual", "frequent") if kind in result}

    @staticmethod
    def frequent_cell(probe) -> str:
        """'NN / CSLS' precision@1 of the contextual vectors among the most frequent words (— for a
        probe run before that band existed)."""
        scores = probe.get("frequent", {}).get("contextual")
        return f"{scores['nn_p@1']:.1f} / {scores['csls_p@1']:.1f}" if scores else "—"

    # ---- translation models ----------------------------------------------------------------

    def mt(self, checkpoint, src, tgt, reference, out_dir: Path, beam=5, task="translation_lm") -> dict:
        """BLEU (beam ``beam``, detokenised, against the raw ``reference`` file) and the reference
        log-probability per token of ``checkpoint`` translating the test split from src to tgt.
        ``task="translation"``: a model of fairseq's own translation task (pieces joined by
        ``--remove-bpe``, then Moses-detokenised)."""
        base = [
            BIN / "fairseq-generate",
            self.data,
            "--user-dir",
            ROOT / "xlm_fairseq",
            "--task",
            task,
            "-s",
            src,
            "-t",
            tgt,
            "--gen-subset",
            "test",
            "--path",
            checkpoint,
            "--max-tokens",
            "4000",
            "--cpu",
        ]
        if task == "translation":  # fairseq-fixed's batching drops n % multiple sentences (ours puts them back)
            base += ["--remove-bpe", "sentencepiece", "--required-batch-size-multiple", "1"]
        gen_log, ref_log = out_dir / f"gen.{src}-{tgt}.txt", out_dir / f"score_ref.{src}-{tgt}.txt"
        self.driver.run([*base, "--beam", beam], gen_log)
        self.driver.run([*base, "--score-reference"], ref_log)
        return {
            "bleu": self.bleu(gen_log, reference, None if task == "translation_lm" else tgt),
            "ref_logprob": ref_logprob(ref_log),
        }

    def bleu(self, gen_log, reference, detokenize_lang=None) -> float:
        """sacreBLEU of the ``D-`` lines (or, with ``detokenize_lang``, the Moses-detokenised ``H-`` lines)."""
        import sacrebleu

        from preprocess.text import detokenize

        if detokenize_lang:
            hyps = {i: detokenize(text, detokenize_lang) for i, text in generated(gen_log, "H").items()}
        else:
            hyps = generated(gen_log)
        refs = read_lines(reference)
        if len(hyps) != len(refs):
            self.driver.fail(f"{gen_log} has {len(hyps)} hypotheses for {len(refs)} references")
        return round(sacrebleu.corpus_bleu([hyps[i] for i in range(len(refs))], [refs]).score, 2)

    @staticmethod
    def examples(gen_log, n=3) -> Optional[list]:
        hyps = generated(gen_log)
        return [hyps[i] for i in range(min(n, len(hyps)))]
