"""tests/patches/audit.py's table: every patch has a witness, and every witness is a test of the suite."""

import ast
import os
import subprocess
import sys

import audit
import pytest

from xlm_fairseq import patches


def test_every_patch_has_a_witness_and_no_witness_lacks_a_patch():
    assert set(audit.WITNESSES) == {patches.name(p) for p in patches.PATCHES}


@pytest.mark.parametrize("patch", sorted(audit.WITNESSES))
def test_each_witness_is_a_test_of_the_suite(patch):
    path, test = audit.WITNESSES[patch]
    function, _, case = test.partition("[")
    source = (audit.ROOT / path).read_text(encoding="utf-8")
    defined = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert function in defined, audit.WITNESSES[patch]
    assert not case or f'"{case.rstrip("]")}"' in source, audit.WITNESSES[patch]


def test_a_skipped_patch_is_left_out_and_named():
    """XLM_FAIRSEQ_SKIP_PATCHES leaves fairseq's own function in place and says so; a name that is no
    patch is named too (with every patch installed, test_cpu_clip_norm.py finds the plugin's function)."""
    probe = "import xlm_fairseq, fairseq.utils as u; print(u.clip_grad_norm_.__module__)"
    env = dict(os.environ, XLM_FAIRSEQ_SKIP_PATCHES="cpu_clip_norm,no_such_patch")
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "fairseq.utils"
    assert "without the patches cpu_clip_norm; no patch is called no_such_patch" in proc.stderr
