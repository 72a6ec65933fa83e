"""The installed set imports cleanly: every module of the project and every library it or its extras
import, in one fresh interpreter of this environment (in CI, the .venv that scripts/setup.sh has just
made), with no binary that fails to load."""

import importlib.util
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# what the project, its extras and its tests import from outside; transformers' seq2seq classes are
# the ones a broken torchaudio took down (transformers imports torchaudio whenever it is installed)
LIBRARIES = [
    "torch",
    "fairseq",
    "fairseq.tasks",
    "fairseq.models",
    "sentencepiece",
    "sacremoses",
    "sacrebleu",
    "huggingface_hub",
    "numpy",
    "ctranslate2",
    "matplotlib",
    "tensorboardX",
    "jieba",
    "MeCab",
    "ipadic",
    "pythainlp.tokenize",
    "transformers",
    "tokenizers",
]
TRANSFORMERS_CLASSES = [
    "AutoModelForSeq2SeqLM",
    "AutoTokenizer",
    "EncoderDecoderModel",
    "BertGenerationEncoder",
    "BertGenerationDecoder",
    "BartForConditionalGeneration",
    "XLMWithLMHeadModel",
    "PreTrainedTokenizer",
]
PROJECT_PACKAGES = ["xlm_fairseq", "preprocess", "recipes"]

# how a library that fails to load shows itself on stderr (dlopen, torch.ops.load_library, warnings)
BROKEN_BINARY = re.compile(r"cannot open shared object|could not load|failed to load|undefined symbol|\.so\b", re.I)

SCRIPT = """
import importlib, os, pkgutil, sys, warnings
warnings.simplefilter("always")
del sys.argv[1:]  # some modules are scripts too
for name in os.environ["IMPORT_LIBRARIES"].split(","):
    importlib.import_module(name)
import transformers
for name in os.environ["IMPORT_TRANSFORMERS"].split(","):
    getattr(transformers, name)
for package in os.environ["IMPORT_PACKAGES"].split(","):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if not info.name.endswith(".__main__"):  # runs its command
            importlib.import_module(info.name)
print("imported")
"""


def test_every_module_imports_without_a_broken_binary():
    env = dict(
        os.environ,
        PYTHONPATH=ROOT,
        IMPORT_LIBRARIES=",".join(LIBRARIES),
        IMPORT_TRANSFORMERS=",".join(TRANSFORMERS_CLASSES),
        IMPORT_PACKAGES=",".join(PROJECT_PACKAGES),
    )
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0 and "imported" in out.stdout, out.stderr[-3000:]
    broken = [line for line in out.stderr.splitlines() if BROKEN_BINARY.search(line)]
    assert not broken, "\n".join(broken[:10])


def test_torchaudio_is_absent_or_loads():
    """fairseq requires torchaudio, but none pairs with this torch: set-up removes it; one put back must load."""
    if importlib.util.find_spec("torchaudio") is None:
        return
    out = subprocess.run([sys.executable, "-c", "import torchaudio"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (
        "torchaudio is installed but does not load; scripts/setup.sh removes it:\n" + (out.stderr[-1500:])
    )


def test_the_environment_keeps_to_the_set_up_constraints():
    """scripts/setup.sh installs within scripts/constraints.txt (pip's PIP_CONSTRAINT): each package it
    names is installed at a version the constraint allows."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement

    path = os.path.join(ROOT, "scripts", "constraints.txt")
    lines = [line.split("#")[0].strip() for line in open(path, encoding="utf-8")]
    constraints = [Requirement(line) for line in lines if line]
    assert constraints, f"{path} names no package"
    for req in constraints:
        try:
            installed = version(req.name)
        except PackageNotFoundError:
            continue  # a constraint limits a package only where something installs it
        assert req.specifier.contains(installed, prereleases=True), f"{req.name} {installed} is outside '{req}'"
