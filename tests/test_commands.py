"""The project's commands are its console scripts (setup.py), each named one way: its ``--help`` says
that name in its usage, describes every positional and option, and shows an example command line."""

import argparse
import ast
import importlib
import re

import pytest
from conftest import ROOT


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


def parser_of(command, monkeypatch):
    """The parser the command builds, caught when it parses ``--help``."""

    def catch(parser, *args, **kwargs):
        raise Parsed(parser)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
    module, function = SCRIPTS[command[0]].split(":")
    with pytest.raises(Parsed) as parsed:
        getattr(importlib.import_module(module), function)([*command[1:], "--help"])
    return parsed.value.parser


def test_setup_declares_each_command_once():
    modules = list(SCRIPTS.values())
    assert len(modules) == len(set(modules)), modules
    assert all(name.startswith("xlm-fairseq-") for name in SCRIPTS), sorted(SCRIPTS)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_is_complete(command, monkeypatch):
    parser = parser_of(command, monkeypatch)
    name = " ".join(command)
    assert parser.prog == name
    bare = [a.dest for a in parser._actions if a.help in (None, "", argparse.SUPPRESS)]
    assert not bare, f"{name}: no help for {bare}"
    text = "\n".join(filter(None, (parser.description, parser.epilog)))
    example = re.search(rf"^\s*{re.escape(name)} \S", text, re.M)
    assert example, f"{name}: --help shows no example command line"
    assert not text.rstrip().endswith(":"), f"{name}: --help ends with a dangling '{text.rstrip()[-40:]}'"
