"""The project's commands are its console scripts (setup.py), each named one way: its ``--help`` says
that name in its usage, describes every positional and option, and shows an example command line.
Every option the docs show a command with is one that command takes."""

import argparse
import ast
import contextlib
import functools
import importlib
import io
import re
import shlex
import sys

import pytest
from conftest import ROOT, run, run_recipe

from recipes.experiments import tables


def console_scripts():
    """{name: "module:function"} as setup.py declares them."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    return dict(entry.value.split("=", 1) for entry in value.elts)
    raise AssertionError("setup.py declares no console_scripts")


SCRIPTS = console_scripts()
# a command's subcommands with parsers of their own
COMMANDS = [[name] for name in SCRIPTS] + [["xlm-fairseq-lexicon", "induce"]]


class Parsed(Exception):
    def __init__(self, parser):
        self.parser = parser


def parser_of(command):
    """The parser the command builds, caught when it parses ``--help``."""

    def catch(parser, *args, **kwargs):
        raise Parsed(parser)

    module, function = SCRIPTS[command[0]].split(":")
    with pytest.MonkeyPatch.context() as patch, pytest.raises(Parsed) as parsed:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
        getattr(importlib.import_module(module), function)([*command[1:], "--help"])
    return parsed.value.parser


def test_setup_declares_each_command_once():
    modules = list(SCRIPTS.values())
    assert len(modules) == len(set(modules)), modules
    assert all(name.startswith("xlm-fairseq-") for name in SCRIPTS), sorted(SCRIPTS)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_is_complete(command):
    parser = parser_of(command)
    name = " ".join(command)
    assert parser.prog == name
    bare = [a.dest for a in parser._actions if a.help in (None, "", argparse.SUPPRESS)]
    assert not bare, f"{name}: no help for {bare}"
    text = "\n".join(filter(None, (parser.description, parser.epilog)))
    example = re.search(rf"^\s*{re.escape(name)} \S", text, re.M)
    assert example, f"{name}: --help shows no example command line"
    assert not text.rstrip().endswith(":"), f"{name}: --help ends with a dangling '{text.rstrip()[-40:]}'"


# ---- the commands the docs show ------------------------------------------------------------------

DOCS = [str(p.relative_to(ROOT)) for p in tables.documents(ROOT)]
FAIRSEQ = ("fairseq-train", "fairseq-generate", "fairseq-interactive")
OPTION = re.compile(r"--?[a-zA-Z][\w-]*(=\S*)?$")  # an option, not a quoted value that holds some


def documented_commands(doc):
    """(line, tokens) of each command line a doc shows in a code block (indented or fenced), continued
    lines joined; from a comment on, and placeholders ("...", brackets around optional parts), left out."""
    found, current, fenced = [], None, False
    for number, line in enumerate((ROOT / doc).read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")):
            current = None
            continue
        text = line.strip()
        if current is None and not re.match(
            r"(fairseq-|xlm-fairseq-|bash recipes/|python -m recipes\.|python bench/)", text
        ):
            continue
        if current is None:
            current = (number, [])
            found.append(current)
        current[1].append(text.rstrip("\\"))
        if not text.endswith("\\"):
            current = None
    commands = []
    for number, parts in found:
        words = shlex.split(" ".join(parts).split(" #")[0].replace("[", " ").replace("]", " "))
        commands.append((number, [w for w in words if w not in ("...", "|")]))
    return commands


def fairseq_unknown(tokens):
    """The options of a fairseq command line that fairseq's parser (with the plugin's task, model and
    criterion options it adds) does not know."""
    from fairseq import options

    parser = {
        "fairseq-train": options.get_training_parser,
        "fairseq-generate": options.get_generation_parser,
        "fairseq-interactive": options.get_interactive_generation_parser,
    }[tokens[0]]()
    argv = [str(ROOT / "xlm_fairseq") if prev == "--user-dir" else t for prev, t in zip(tokens, tokens[1:])]
    if tokens[0] == "fairseq-train" and "--arch" not in argv:  # a command shown with "..." for the rest
        argv += ["--arch", "xlm_tiny"]
    _, extra = options.parse_args_and_arch(parser, argv, parse_known=True)
    return [e.split("=")[0] for e in extra if e.startswith("-")]


def parse_error(parser, argv):
    """[argparse's message] when the whole command line does not parse as written (a missing positional,
    a value outside an option's choices, one positional too many), else []."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit:
        return [err.getvalue().strip().splitlines()[-1]]
    return []


@functools.lru_cache(maxsize=None)
def recipe_help(script):
    """A recipe's --help: ``recipes/X.sh``, the module ``recipes.X`` or ``bench/X.py``."""
    if script.endswith(".sh"):
        proc = run_recipe(script.split("/", 1)[1], "--help")
    elif script.endswith(".py"):
        proc = run([sys.executable, str(ROOT / script), "--help"], ok=False)
    else:
        proc = run([sys.executable, "-m", script, "--help"], ok=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize("doc", DOCS)
def test_every_option_the_docs_name_exists(doc):
    """Each option of each command a doc shows is one its command takes: fairseq's commands with the
    plugin's options, the console scripts' parsers, the recipes' --help."""
    commands = documented_commands(doc)
    unknown = []
    for number, tokens in list(commands):
        wrapped = [i for i, t in enumerate(tokens) if i and t in FAIRSEQ]  # a launcher's command line
        if wrapped:
            commands.append((number, tokens[wrapped[0] :]))
            tokens[wrapped[0] :] = []
    for number, tokens in commands:
        named = [t.split("=")[0] for t in tokens[1:] if OPTION.match(t)]
        if tokens[0] in FAIRSEQ:
            missing = fairseq_unknown(tokens)
        elif tokens[0] in SCRIPTS:
            sub = tokens[1:2] if tokens[1:2] == ["induce"] else []
            parser = parser_of([tokens[0], *sub])
            missing = [o for o in named if o not in parser._option_string_actions]
            missing = missing or parse_error(parser, tokens[1 + len(sub) :])
        else:  # bash recipes/X.sh, python -m recipes.X or python bench/X.py
            start = 3 if tokens[1] == "-m" else 2
            text = recipe_help(tokens[start - 1])
            named = [t.split("=")[0] for t in tokens[start:] if OPTION.match(t)]
            missing = [o for o in named if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)]
        name = {"bash": tokens[1:2], "python": tokens[1:3] if tokens[1] == "-m" else tokens[1:2]}.get(
            tokens[0], tokens[:1]
        )
        unknown += [f"{doc}:{number}: {' '.join(name)} {o}" for o in missing]
    assert not unknown, unknown


def test_the_docs_show_commands():
    """The extraction above finds the commands (a change of format would leave nothing to check)."""
    found = {doc: len(documented_commands(doc)) for doc in DOCS}
    shown = ["README.md", "recipes/README.md", "docs/pretraining.md", "docs/serving.md"]
    assert all(found[doc] for doc in shown), found
    assert sum(found.values()) >= 60, found
