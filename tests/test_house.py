"""The house rules: imports point down only (text pipeline -> preprocess -> the plugin's own floors ->
the engine of train.sh and the other recipes -> the experiments, the data scripts and bench), without
circles anywhere (recipes/ and bench/ included), no source file grows past ~400 lines, and the tests
mirror the code."""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("preprocess", "xlm_fairseq")
# above the plugin: the recipes and the benchmark (whose scripts import their siblings by bare name)
ABOVE = ("recipes", "bench")
# the top floor: what measured the product (and the scripts that made its data); the engine never imports it
MEASURING = ("recipes.experiments", "recipes.data", "bench")
# floor 0: the text pipeline and what it stands on (pure Python); floor 1: preprocess; floor 2: the plugin
TEXT_PIPELINE = {
    "preprocess",
    "preprocess.errors",
    "preprocess.layout",
    "preprocess.langs",
    "preprocess.files",
    "preprocess.text",
    "preprocess.subwords",
    "preprocess.segment",
}
# the plugin's floors, lowest first: a module may import its own floor and those below (the most
# specific prefix names a module's floor); the package's __init__ stands above them all
PLUGIN_FLOORS = (
    (
        "xlm_fairseq.errors",
        "xlm_fairseq.checkpoints",
        "xlm_fairseq.hardware",
        "xlm_fairseq.patches",
        "xlm_fairseq.optim",
        "xlm_fairseq.cpu_threads",
    ),
    (
        "xlm_fairseq.objectives.keys",
        "xlm_fairseq.objectives.schedule",
        "xlm_fairseq.distributed.rank_agreement",
        "xlm_fairseq.modules",
    ),
    ("xlm_fairseq.data", "xlm_fairseq.models", "xlm_fairseq.generation"),
    ("xlm_fairseq.assets", "xlm_fairseq.objectives", "xlm_fairseq.evaluation.bleu"),
    ("xlm_fairseq.tasks", "xlm_fairseq.criterions"),
    ("xlm_fairseq.inference",),
    ("xlm_fairseq.evaluation", "xlm_fairseq.convert", "xlm_fairseq.distributed", "xlm_fairseq.serving"),
)
# the one import that runs up, fairseq's convention: ``Model.from_pretrained`` returns the model's hub
UPWARD_BY_DESIGN = {("xlm_fairseq.models.base", "xlm_fairseq.inference")}
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_modules(packages=PACKAGES + ABOVE):
    return {module_name(p): p for pkg in packages for p in sorted((REPO / pkg).rglob("*.py"))}


def imports_of(name: str, path: Path, known) -> set:
    """Project modules ``name`` imports anywhere in the file (function-level imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            if name.startswith("bench.") and f"bench.{target}" in known:  # a bench script's sibling
                target = f"bench.{target}"
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def floor(name: str) -> float:
    if name in TEXT_PIPELINE:
        return 0
    if name.startswith("preprocess"):
        return 1
    if name == "xlm_fairseq":
        return 3
    if any(_under(name, prefix) for prefix in MEASURING):
        return 5
    if name.split(".")[0] in ABOVE:
        return 4
    matches = [(len(prefix), i) for i, floor in enumerate(PLUGIN_FLOORS) for prefix in floor if _under(name, prefix)]
    assert matches, f"{name}: on no floor of PLUGIN_FLOORS; give it one"
    return 2 + max(matches)[1] / len(PLUGIN_FLOORS)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_imports_point_down_and_have_no_circle():
    modules = project_modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    upward = [
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if floor(b) > floor(a)
        and not _under(a, b)  # a package's __init__ gathers its modules
        and (a, b) not in UPWARD_BY_DESIGN
    ]
    assert not upward, upward

    # a circle through explicit imports (a package's own __init__ importing its modules is not one)
    def edges(a):
        return [b for b in graph[a] if not a.startswith(b + ".")]

    state, cycles = {}, []

    def visit(a, stack):
        state[a] = "open"
        for b in edges(a):
            if state.get(b) == "open":
                cycles.append(" -> ".join(stack[stack.index(b) :] + [b]))
            elif b not in state:
                visit(b, stack + [b])
        state[a] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles


def run_blocked(blocked, code):
    """Run ``code`` in a fresh interpreter where importing any of ``blocked`` fails."""
    prelude = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {tuple(blocked)!r}:
                    raise ImportError("blocked by test_house: " + name)
        sys.meta_path.insert(0, Block())
    """)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_text_pipeline_imports_without_torch_and_fairseq(tmp_path):
    codes = tmp_path / "codes"
    codes.write_text("d e</w> 5\nw o 4\nwo r 3\n", encoding="utf-8")
    proc = run_blocked(
        ["torch", "fairseq", "xlm_fairseq", "numpy"],
        f"""
        import preprocess
        from preprocess.pipeline import PipelineSettings, TextPipeline
        from preprocess.text import normalize_line
        quoted = normalize_line("„Das ist“ – gut…", "de")
        assert quoted == '" Das ist " - gut ...', quoted
        assert normalize_line("Şi ţară", "ro", ro_remove_diacritics=True) == "Si tara"
        settings = PipelineSettings("xlm_bpe", "codes", lowercase_and_remove_accent=True)
        assert TextPipeline(settings, {str(codes)!r}).pieces("Word de", "en") == ["wor@@", "d", "de"]
        assert "torch" not in sys.modules and "fairseq" not in sys.modules
        print("ok")
    """,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_preprocess_runs_without_the_plugin(tmp_path):
    """A data-bin made with XLM's BPE codes (the path that once imported the plugin's hub)."""
    (tmp_path / "mono.en").write_text("the word is here\nhere is the word\n" * 20, encoding="utf-8")
    (tmp_path / "codes").write_text("h e 9\nhe re</w> 8\nt he</w> 7\n", encoding="utf-8")
    specials = "".join(f"<special{i}> 0\n" for i in range(10))
    (tmp_path / "dict.txt").write_text(specials + "here 3\nthe 3\nword 2\nis 2\n", encoding="utf-8")
    proc = run_blocked(
        ["xlm_fairseq"],
        f"""
        from preprocess.prepare import main
        sys.exit(main([{str(tmp_path / "bin")!r}, "--langs", "en", "--mono", "train:en={tmp_path / "mono.en"}",
                       "--bpe-codes", {str(tmp_path / "codes")!r}, "--dict", {str(tmp_path / "dict.txt")!r},
                       "--workers", "1", "--quiet"]))
    """,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "bin" / "train.en.bin").stat().st_size > 0


def test_no_source_file_over_400_lines():
    sources = [
        p
        for d in (*PACKAGES, "recipes", "bench", "scripts")
        for p in (REPO / d).rglob("*")
        if p.suffix in (".py", ".sh") and "data" not in p.relative_to(REPO).parts[:2]
    ]
    long = {
        str(p.relative_to(REPO)): n
        for p in sources
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


# the Python recipes run as modules (python -m recipes.train, python -m recipes.experiments.NAME, as their .sh
# wrappers run them); the bench as a script
COMMANDS = [["-m", "recipes.train"]]
COMMANDS += [
    ["-m", f"recipes.experiments.{name}"] for name in ("ablation", "criterion", "lexicon", "scale", "tables", "xcls")
]
COMMANDS.append([str(REPO / "bench" / "run.py")])


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_python_recipe_prints_its_help(command):
    """argparse formats help strings with %: a literal percentage in one crashed --help."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, *command, "--help"], capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]


def test_tests_mirror_the_code():
    """A test file sits where the code it tests does: tests/tasks/ for xlm_fairseq/tasks/, tests/preprocess/
    for preprocess/, tests/checkpoints/ for xlm_fairseq/checkpoints.py, ...; at the top only what tests
    a top-level module of the plugin or the project as a whole. Basenames stay unique (pytest imports
    each test file by its name)."""
    tests = REPO / "tests"
    plugin = REPO / "xlm_fairseq"
    homes = {p.stem for p in plugin.iterdir() if p.is_dir() or p.suffix == ".py"} | {*PACKAGES, *ABOVE}
    files = sorted(tests.rglob("test_*.py"))
    strays = [str(p.relative_to(tests)) for p in files if p.parent != tests and p.parent.name not in homes]
    assert not strays, strays
    nested = [str(p.relative_to(tests)) for p in files if len(p.relative_to(tests).parts) > 2]
    assert not nested, nested
    top = {p.stem[len("test_") :] for p in files if p.parent == tests}
    assert top <= {p.stem for p in plugin.glob("*.py")} | {"commands", "docs", "environment", "house"}, top
    names = [p.name for p in files]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
