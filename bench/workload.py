"""What the speed benchmarks share (``run.py``, ``serving.py``): the data-bin of the shipped en-de sample and the
same binarised files laid out as each fairseq peer reads them, the training flags both sides run with, the
length every generated hypothesis is forced to, and the flags that set a command's device and number format."""

import runpy
from pathlib import Path

from children import run_child, tool

ROOT = Path(__file__).resolve().parents[1]
# the recipes' shared optimiser (recipes/train/optim.flags), read by its one reader, loaded by its path
optim_flags = runpy.run_path(str(ROOT / "recipes" / "train" / "optim.py"))["optim_flags"]
SAMPLE = ROOT / "recipes" / "data" / "en-de"

GEN_LEN = 40  # every generated hypothesis has exactly this many tokens
GEN_BATCH = 64

TRAIN_COMMON = ["--num-workers", "0", "--seed", "1", "--log-format", "json", "--disable-validation"]
TRAIN_COMMON += optim_flags(lr=1e-4, warmup_updates=100)


def link(src: Path, dst: Path):
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    dst.symlink_to(src.resolve())


def prepare_data(work: Path, vocab: int) -> dict:
    """Our data-bin (preprocess/) and the same binarised files laid out as each fairseq peer wants."""
    data = work / "data-bin"
    head = work / "raw" / "test128.en-de"  # the quick mode's generation set
    head.parent.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        lines = (SAMPLE / f"test.en-de.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)[:128]
        out = Path(f"{head}.{lang}")
        if not out.exists() or out.read_text(encoding="utf-8") != "".join(lines):  # preprocess checks mtimes
            out.write_text("".join(lines), encoding="utf-8")
    cmd = [tool("xlm-fairseq-prepare"), str(data), "--langs", "de,en", "--vocab-size", str(vocab), "--quiet"]
    cmd += ["--mono", f"train:en={SAMPLE / 'mono.en'}", "--mono", f"train:de={SAMPLE / 'mono.de'}"]
    cmd += ["--para", f"train:en-de={SAMPLE / 'train.en-de'}", "--para", f"test:en-de={SAMPLE / 'test.en-de'}"]
    cmd += ["--para", f"valid:en-de={head}"]
    run_child(cmd, work / "preprocess.log")

    def binary(prefix):
        return [(data / f"{prefix}.{ext}") for ext in ("bin", "idx")]

    # masked_lm reads one stream: en and de monolingual data merged into train.{bin,idx}
    mlm = work / "peer-masked_lm"
    if not (mlm / "train.idx").exists():
        from fairseq.data import indexed_dataset

        mlm.mkdir(parents=True, exist_ok=True)
        builder = indexed_dataset.make_builder(str(mlm / "train.bin"), impl="mmap", vocab_size=vocab + 100)
        for lang in ("en", "de"):
            builder.merge_file_(str(data / f"train.{lang}"))
        builder.finalize(str(mlm / "train.idx"))
    link(data / "dict.txt", mlm / "dict.txt")

    # online_backtranslation: DATA/{lang}/train.{bin,idx}, valid pair files, one dict.txt
    obt = work / "peer-online_backtranslation"
    link(data / "dict.txt", obt / "dict.txt")
    for lang in ("en", "de"):
        for src in binary(f"train.{lang}"):
            link(src, obt / lang / f"train{src.suffix}")
        for src in binary(f"valid.de-en.{lang}"):
            link(src, obt / f"valid.de-en.{lang}{src.suffix}")

    # translation: train/test pair files, dict.{lang}.txt
    mt = work / "peer-translation"
    for lang in ("en", "de"):
        link(data / "dict.txt", mt / f"dict.{lang}.txt")
        for split in ("train", "valid", "test"):
            for src in binary(f"{split}.de-en.{lang}"):
                link(src, mt / src.name)
    return {"ours": data, "masked_lm": mlm, "online_backtranslation": obt, "translation": mt}


PRECISION_FLAGS = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}


def device_flags(device: str, precision: str):
    """fairseq's options for the device and number format of every command of the run."""
    return (["--cpu"] if device == "cpu" else []) + PRECISION_FLAGS[precision]


def with_fairseqs_adam(cmd):
    """A peer's command with fairseq's own Adam where ours has the recipes' optimizer (the plugin's)."""
    if "--optimizer" not in cmd:  # fairseq-generate
        return cmd
    i = cmd.index("--optimizer")
    return [*cmd[: i + 1], "adam", *cmd[i + 2 :]]


def at_precision(cmd, ours: str, peer: str):
    """A peer's command in the peer's number format (``--peer-precision``) instead of ours'."""
    rest = [arg for arg in cmd[1:] if arg not in PRECISION_FLAGS[ours]]
    return cmd if ours == peer else [cmd[0], *PRECISION_FLAGS[peer], *rest]
