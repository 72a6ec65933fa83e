"""Each patch of ``xlm_fairseq/patches`` and the test that fails without it: ``python tests/patches/audit.py``
runs every witness below with its patch left out (``XLM_FAIRSEQ_SKIP_PATCHES``) and prints one line a patch;
it exits non-zero if a witness passes without its patch. ``--patch NAME`` audits one. The witnesses are
ordinary tests of the suite, which passes with every patch in place; ``test_audit.py`` checks this table
against the patches and the tests that exist."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# patch: (test file, the test that fails without it)
WITNESSES = {
    "safe_load": (
        "tests/distributed/test_cpu_launcher.py",
        "test_a_checkpoint_state_sent_between_ranks_is_read_by_torchs_safe_loader",
    ),
    "checkpoint_reader": (
        "tests/test_errors.py",
        "test_bad_input_is_one_line_and_loses_nothing[resume with --langs in another order]",
    ),
    "user_errors": (
        "tests/test_errors.py",
        "test_bad_input_is_one_line_and_loses_nothing[language missing from --langs]",
    ),
    "task_help": ("tests/tasks/test_cross_lingual_lm.py", "test_cross_lingual_lm_is_ours_in_the_cli"),
    "checkpoint_copy": (
        "tests/checkpoints/test_resume.py",
        "test_kill_while_checkpoint_last_is_written_leaves_one_that_loads",
    ),
    "precision": ("tests/patches/test_precision.py", "test_bf16_without_torch_xla_means_no_tpu_anywhere_in_the_config"),
    "cpu_clip_norm": ("tests/patches/test_cpu_clip_norm.py", "test_cpu_run_clips_on_a_machine_with_a_gpu"),
    "prefetch_at_exit": (
        "tests/patches/test_prefetch_at_exit.py",
        "test_a_command_that_ends_while_fairseq_prefetches_batches_exits_cleanly",
    ),
    "interactive_input": (
        "tests/test_errors.py",
        "test_bad_input_is_one_line_and_loses_nothing[interactive with invalid UTF-8 on standard input]",
    ),
    "legacy_task": ("tests/tasks/test_cross_lingual_lm.py", "test_cross_lingual_lm_is_ours_in_the_cli"),
    "log_file_once": (
        "tests/tasks/test_translation_lm.py",
        "test_validation_means_the_directions_and_the_log_file_has_each_line_once",
    ),
}


def witness(patch: str) -> str:
    return "::".join(WITNESSES[patch])


def without(patch: str, witness: str):
    """(pytest's exit code, its last line) for ``witness`` run with ``patch`` left out."""
    env = dict(os.environ, XLM_FAIRSEQ_SKIP_PATCHES=patch)
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "--durations=0", witness]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, lines[-1] if lines else proc.stderr.strip()[-200:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patch", choices=sorted(WITNESSES), help="audit this patch only")
    args = parser.parse_args(argv)
    passed = []
    for patch in WITNESSES:
        if args.patch and patch != args.patch:
            continue
        code, last = without(patch, witness(patch))
        print(f"{patch:18} {'fails' if code else 'PASSES'} without it: {witness(patch)} ({last})", flush=True)
        if code == 0:
            passed.append(patch)
    if passed:
        print(f"witnesses that pass without their patch: {', '.join(passed)}", file=sys.stderr)
    return 1 if passed else 0


if __name__ == "__main__":
    sys.exit(main())
