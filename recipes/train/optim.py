"""The shared optimiser flags of ``recipes/train/optim.flags``, with a run's own values.

    optim_flags(lr=1e-3, warmup_updates=1000)      # Python: a list of fairseq arguments
    python -m recipes.train.optim --lr 1e-3 --warmup-updates 1000   # bash: the same, one word a line

An option given here replaces the file's value in place; one the file does not set is added after
its options. Only the standard library is used: ``bench/run.py`` and the tests load this file by
its path."""

import sys
from pathlib import Path
from typing import Dict, List

FLAGS = Path(__file__).with_name("optim.flags")


def read_flags(path=FLAGS) -> Dict[str, str]:
    """{'--option': 'value'} of the flags file, in its order."""
    flags = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        option, _, value = line.partition(" ")
        if not option.startswith("--") or not value.strip() or " " in value.strip():
            raise ValueError(f"{path}:{n}: expected '--option value', got {line!r}")
        flags[option] = value.strip()
    return flags


def merge(overrides: Dict[str, object]) -> List[str]:
    flags = read_flags()
    flags.update({option: str(value) for option, value in overrides.items()})
    return [word for option, value in flags.items() for word in (option, value)]


def optim_flags(**overrides) -> List[str]:
    """The shared flags; ``lr=1e-3`` sets ``--lr 0.001``, ``warmup_updates=500`` ``--warmup-updates 500``."""
    return merge(
        {
            "--" + name.replace("_", "-"): f"{value:g}" if isinstance(value, float) else value
            for name, value in overrides.items()
        }
    )


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) % 2 or any(not a.startswith("--") for a in argv[::2]):
        sys.stderr.write(f"optim: error: expected --option value pairs, got {' '.join(argv)!r}\n")
        return 2
    for word in merge(dict(zip(argv[::2], argv[1::2]))):
        print(word)
    return 0


if __name__ == "__main__":
    sys.exit(main())
