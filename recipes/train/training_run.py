"""One ``recipes/train.sh`` run in its work directory: the stages (preprocess, pretrain, translate and export),
each skipped when it finished before with the same options (``recipes/train/stages.py``), then scoring and the
report (``scoring.py``)."""

import hashlib
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

from preprocess.files import file_sha256
from recipes.train import figures, scoring, stages
from recipes.train.hardware import launch
from recipes.train.plan import COOLDOWN_SHARE
from recipes.train.progress import Progress
from recipes.train.trained import scored as scored_line
from recipes.train.trained import summary as trained_summary
from recipes.train.trained import trained_objectives

ROOT = Path(__file__).resolve().parents[2]
STAGE_IDS = ("preprocess", "pretrain", "translate")
# the validation figures a translation stage's progress lines show: each direction's BLEU, or the round trips
SHOWN = {"semi": r"^bleu_(?!tok_|mean)", "unsupervised": r"^roundtrip_(score|copy)$"}


class TrainingRun:
    """The work directory of one run and its stages; ``inputs`` (:mod:`recipes.train.inputs`), ``text``
    (:func:`recipes.train.corpus.prepared_text`) and ``plan`` (:mod:`recipes.train.plan`) say what it trains."""

    def __init__(self, args, inputs, text: dict, plan, segmenters: Dict[str, str], plan_lines: List[str], lm=None):
        self.args, self.inputs, self.text, self.plan, self.segmenters = args, inputs, text, plan, segmenters
        self.start_lm = lm  # recipes.train.lm_start.LMStart (--lm) or None
        self.plan_lines = plan_lines
        self.name = args.recipe
        self.work = Path(args.work_dir).resolve()
        self.data = self.work / "data-bin"
        self.raw = self.work / "raw"
        rank = plan.hardware.node_rank
        self.logs = self.work / "logs" / (f"node{rank}" if rank else "")  # several nodes: their own logs
        self.ckpt = self.work / "checkpoints" / "translate" / "checkpoint_best.pt"
        self.lm = self.work / "checkpoints" / "pretrain" / "checkpoint_best.pt"
        self.embeddings = self.work / "lexicon" / "embeddings.pt"  # --lexicon emb
        self.started = time.time()
        self.bin = Path(sys.executable).parent
        self.env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        self.stages = stages.Stages(
            self.name,
            self.work,
            STAGE_IDS,
            self.keys(),
            {"pretrain": self.work / "checkpoints" / "pretrain", "translate": self.work / "checkpoints" / "translate"},
            redo="run with --fresh",
        )

    # ---- helpers ---------------------------------------------------------------------------

    def tool(self, name: str) -> str:
        beside = self.bin / name
        return str(beside) if beside.exists() else name

    def banner(self, text: str):
        print(f"\n== [{int(time.time() - self.started)}s] {text}", flush=True)

    def command(self, cmd, log, progress=None):
        stages.run_logged(self.name, [str(c) for c in cmd], log, env=self.env, cwd=ROOT, progress=progress)

    def train(self, cmd, log, progress=None):
        """A fairseq-train command on the plan's hardware (every process of this node)."""
        cmd, env = launch(cmd, self.plan.hardware, self.env)
        stages.run_logged(self.name, cmd, log, env=env, cwd=ROOT, progress=progress)

    def keys(self) -> Dict[str, str]:
        # the files' contents, not their paths or times: a copied or restored corpus resumes its run
        sources = hashlib.sha256()
        for option, path in self.inputs.sources:
            sources.update(f"{option} {file_sha256(path)}\n".encode())
        p = self.plan
        pre = (
            f"recipe={self.name} mode={'tiny' if p.tiny else 'full'} supervision={p.supervision} "
            f"langs={','.join(p.langs)} vocab={p.vocab} segment={sorted(self.segmenters.items())} "
            f"inputs={sources.hexdigest()[:16]}"
        )
        pre += f" lm={self.start_lm.digest}" if self.start_lm else ""
        pre += f" lexicon={','.join(p.lexicon)}" if p.lexicon else ""
        pretrain = f"{pre} model={p.size.dim}x{p.size.layers} hours={p.pretrain_hours} precision={p.precision}"
        h = p.hardware
        if (h.device, h.world) != ("cpu", 1):  # the batches and updates change with them
            pretrain += f" device={h.device} processes={h.world}"
        translate = f"{pretrain} translate_hours={p.translate_hours} translate_precision={p.translate_precision}"
        return {"preprocess": pre, "pretrain": pretrain, "translate": translate}

    def stage(self, sid: str, title: str, detail: str, fn):
        if self.stages.done(sid):
            self.banner(f"{title}: done before ({self.stages.marker(sid)}), skipped")
            return
        self.banner(f"{title}: {detail}")
        self.stages.start(sid)
        fn()
        self.stages.finish(sid)

    def write_lines(self, path: Path, lines: List[str]):
        stages.write_text(path, "".join(line + "\n" for line in lines))

    # ---- 1. preprocess ---------------------------------------------------------------------

    def preprocess(self):
        for line in self.text["notes"]:
            print(f"   {line}", flush=True)
        self.raw.mkdir(parents=True, exist_ok=True)
        args = [
            self.tool("xlm-fairseq-prepare"),
            self.data,
            "--langs",
            ",".join(self.plan.langs),
            "--force",
            "--quiet",
        ]
        if self.start_lm:  # the LM's vocabulary and pipeline options
            args += [x for item in self.start_lm.vocab_files(self.work / "lm").items() for x in item]
            args += ["--ro-remove-diacritics"] if self.start_lm.settings.ro_remove_diacritics else []
        else:
            args += ["--vocab-size", self.plan.vocab, "--vocab-size-soft"]
        args += [x for lang, name in self.segmenters.items() for x in ("--segment", f"{lang}={name}")]
        for lang, lines in self.text["mono"].items():  # after them, the code-switched copies (--lexicon cs)
            self.write_lines(self.raw / f"train.{lang}", lines + self.text.get("switched", {}).get(lang, []))
            args += ["--mono", f"train:{lang}={self.raw}/train.{lang}"]
        valid_sides = defaultdict(list)
        for split in ("train", "valid", "test"):
            for (a, b), pairs in self.text[split].items():
                prefix = self.raw / f"{split}.{a}-{b}"
                for lang in (a, b):
                    self.write_lines(Path(f"{prefix}.{lang}"), pairs.side(lang))
                    if split == "valid":
                        valid_sides[lang] += pairs.side(lang)
                # unsupervised: valid pairs are monolingual valid text, for round trips (raw/ keeps the pairs)
                if split != "valid" or self.plan.supervision == "semi":
                    args += ["--para", f"{split}:{a}-{b}={prefix}"]
        for lang, lines in self.text.get("valid_mono", {}).items():
            valid_sides[lang] += lines
        for lang, lines in valid_sides.items():  # MLM's validation: the valid sets' sides
            self.write_lines(self.raw / f"valid.{lang}", list(dict.fromkeys(lines)))
            args += ["--mono", f"valid:{lang}={self.raw}/valid.{lang}"]
        self.command(args, self.logs / "preprocess.log")
        summary = json.loads((self.data / "summary.json").read_text(encoding="utf-8"))
        print(f"   vocabulary: {summary['vocab'].get('spm_vocab_size', '?')} pieces; data-bin: {self.data}")
        if "emb" in self.plan.lexicon:
            from recipes.train.lexicon_embeddings import write_piece_embeddings

            (lexicon,) = self.text["lexicons"].values()
            rows = write_piece_embeddings(lexicon, self.data, self.plan.size.dim, self.embeddings)
            print(f"   piece embeddings: {rows} rows from the lexicon's word vectors, whitened -> {self.embeddings}")

    # ---- 2. pretraining ------------------------------------------------------------------

    def common(self, langs: List[str]) -> list:
        return [
            "--user-dir",
            ROOT / "xlm_fairseq",
            "--num-workers",
            0,
            "--seed",
            1,
            "--log-interval",
            100,
            "--no-epoch-checkpoints",
            "--step-per-objective",
            "--langs",
            ",".join(langs),
        ]

    def optim(self, stage: int) -> list:
        """The shared optimiser flags at the learning rate and warm-up of ``stage`` (0 pretraining,
        1 translation), the rate cooling down to 0 by the end of the stage's budget."""
        from recipes.train.optim import optim_flags

        return optim_flags(
            lr=self.plan.translate_lr if stage else self.plan.size.lr,
            warmup_updates=self.plan.size.warmup[stage],
            lr_scheduler="inverse_sqrt_cooldown",
            cooldown_share=COOLDOWN_SHARE,
        )

    def pretrain(self):
        cmd, log = self.pretrain_command()
        progress = Progress(log, self.plan.pretrain_hours, r"^mlm_.+_fullmask_ppl$")
        self.train(cmd, self.logs / "pretrain.out", progress)

    def pretrain_command(self):
        """(fairseq-train command for one process, its --log-file)."""
        p = self.plan
        log = self.logs / "pretrain.log"
        start = ["--pretrained-xlm-checkpoint", self.start_lm.path] if self.start_lm else []
        start += ["--init-embeddings", self.embeddings] if "emb" in p.lexicon else []
        cmd = [
            self.tool("fairseq-train"),
            self.data,
            *self.common(p.langs),
            *start,
            "--log-file",
            log,
            "--task",
            "cross_lingual_lm",
            "--mlm-steps",
            p.mlm_steps(),
            *p.model_args(),
            "--tokens-per-sample",
            p.batches.stream,
            "--dropout",
            p.size.dropout,
            "--attention-dropout",
            p.size.dropout,
            *p.precision_args(p.precision),
            "--max-tokens",
            p.batches.pretrain_tokens,
            *self.optim(0),
            "--max-update",
            p.pretrain_updates,
            "--stop-time-hours",
            p.pretrain_hours,
            "--validate-interval-updates",
            p.valid_every * 2,
            "--save-interval-updates",
            p.valid_every * 2,
            "--keep-interval-updates",
            1,
            "--best-checkpoint-metric",
            "mlm_fullmask_ppl",
            "--save-dir",
            self.lm.parent,
        ]
        return cmd, log

    # ---- 3. translation ------------------------------------------------------------------

    def translate(self):
        p = self.plan
        cmd, log = self.translate_command()
        self.train(cmd, self.logs / "translate.out", Progress(log, p.translate_hours, SHOWN[p.supervision]))
        print(f"   {trained_summary(log.read_text(encoding='utf-8', errors='replace'))}", flush=True)
        self.export()

    def translate_command(self):
        """(fairseq-train command for one process, its --log-file)."""
        p = self.plan
        log = self.logs / "translate.log"
        cmd = [
            self.tool("fairseq-train"),
            self.data,
            *self.common(p.pair_langs),
            "--log-file",
            log,
            "--task",
            "translation_lm",
            *p.objectives(),
            "--word-shuffle",
            3,
            "--word-dropout",
            0.1,
            "--word-blank",
            0.1,
            "--pretrained-xlm-checkpoint",
            self.lm,
            *p.model_args(),
            "--dropout",
            0.1,
            "--attention-dropout",
            0.1,
            *p.precision_args(p.translate_precision),
            "--max-tokens",
            p.batches.translate_tokens,
            "--max-sentence-len",
            100,
            *self.optim(1),
            "--max-update",
            p.translate_updates,
            "--stop-time-hours",
            p.translate_hours,
            *self.validations(p.translate_valid_every),
            "--best-checkpoint-metric",
            p.checkpoint_metric,
            "--maximize-best-checkpoint-metric",
            "--save-dir",
            self.ckpt.parent,
        ]
        return cmd, log

    def export(self):
        directions = ",".join(f"{a}-{b}" for a, b in self.plan.directions)
        self.command(
            [
                self.tool("xlm-fairseq-export"),
                self.ckpt,
                self.work / "model",
                "--data",
                self.data,
                "--force",
                "--ctranslate2",
                "--directions",
                directions,
            ],
            self.logs / "export.log",
        )

    def validations(self, every) -> list:
        """When translation validates and saves: every ``every`` updates (and at the end) when given, else at
        the end of every epoch and every valid_every updates; every checkpoint saved kept with --keep-checkpoints."""
        every_epoch = every is None
        every = self.plan.valid_every if every_epoch else every
        kept = -1 if self.args.keep_checkpoints else 1
        args = ["--validate-interval-updates", every, "--save-interval-updates", every, "--keep-interval-updates", kept]
        if not every_epoch:  # fairseq validates at every epoch's end unless told an interval of epochs
            args += ["--validate-interval", 10**6, "--save-interval", 10**6]
        return args

    # ---- several machines: nodes > 0 --------------------------------------------------------

    def follow(self):
        """Node R > 0 of several, in the work directory node 0 shares: joins each training stage that node 0
        starts (its processes take ranks R*N to R*N+N-1 of the rendezvous at --master) once node 0 has finished
        the stage before; node 0 alone preprocesses, writes the stage markers, scores and exports."""
        rank = self.plan.hardware.node_rank
        for sid, before, command in (
            ("pretrain", "preprocess", self.pretrain_command),
            ("translate", "pretrain", self.translate_command),
        ):
            if self.stages.done(sid):
                self.banner(f"node {rank}: {sid} done before, skipped")
                continue
            self.banner(f"node {rank}: waiting for node 0 to finish {before} in {self.work}")
            self.wait_for(before)
            cmd, log = command()
            self.banner(f"node {rank}: joining {sid}; log: {log}")
            self.train(cmd, self.logs / f"{sid}.out")
        self.banner(f"node {rank}: done; node 0 scores and exports ({self.work / 'report.md'})")

    def wait_for(self, stage: str, poll_s: float = 2.0):
        """Until node 0 has finished ``stage`` with this run's options (another key is refused), for as long
        as the whole budget and half an hour more."""
        deadline = time.time() + (self.plan.minutes + 30) * 60
        while not self.stages.done(stage):
            if time.time() > deadline:
                stages.fail(
                    self.name,
                    f"node 0 has not finished {stage} in {self.work} (no {self.stages.marker(stage)}): is it "
                    "running, and is --work-dir one directory every node shares?",
                )
            time.sleep(poll_s)

    # ---- 4. scoring ------------------------------------------------------------------------

    def run(self):
        if self.plan.hardware.node_rank:
            return self.follow()
        p = self.plan
        pairs = sum(len(x) for x in self.text["train"].values())
        what = (
            f"semi-supervised MT (MT on {pairs} pairs + AE + back-translation on monolingual text)"
            if p.supervision == "semi"
            else "unsupervised MT (AE + back-translation on monolingual text only)"
        )
        pre = "MLM+TLM pretraining" if p.supervision == "semi" or "tlm" in p.lexicon else "MLM pretraining"
        self.stage(
            "preprocess",
            "1/4 preprocess",
            f"held-out sets, Moses or segmenters, joint sentencepiece ({p.vocab}), binarisation -> {self.data}",
            self.preprocess,
        )
        self.stage(
            "pretrain",
            f"2/4 {pre}",
            f"cross_lingual_lm, --mlm-steps {p.mlm_steps()}, {p.size.name}, "
            f"{p.precision}, {p.pretrain_hours}h; log: {self.logs / 'pretrain.log'}",
            self.pretrain,
        )
        self.stage(
            "translate",
            f"3/4 {what}",
            f"translation_lm initialised from the LM, {p.translate_precision}, "
            f"{p.translate_hours}h; log: {self.logs / 'translate.log'}",
            self.translate,
        )
        rows = scoring.score(self)
        probes = scoring.probe(self)
        log = (self.logs / "translate.log").read_text(encoding="utf-8", errors="replace")
        trained = [trained_summary(log), scored_line(self.ckpt, trained_objectives(log)[2])]
        for stage, metric in (("pretrain", r"^mlm_.+_fullmask_ppl$"), ("translate", SHOWN[p.supervision])):
            last = scoring.last_validation(self.logs / f"{stage}.log", metric)
            trained.append(
                f"{stage} last validated at update {last.pop('num_updates', '?')}: "
                + " ".join(f"{k} {v}" for k, v in last.items())
            )
        figure = figures.training_run(self.work, self.name)
        examples = [] if rows else scoring.held_out_examples(self)
        agreement = self.text.get("lexicon_agreement")
        scoring.report(self, rows, probes, trained, figure, what, scoring.criterion(self), examples, agreement)
