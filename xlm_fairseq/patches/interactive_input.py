"""fairseq-interactive's input read as strict UTF-8, each bad line one error naming it.

fairseq reads ``--input`` through ``fileinput``: a file is decoded strictly (a bad byte was a
traceback), standard input with whatever error handler Python chose for the locale -- under the C
or POSIX locale ``surrogateescape``, so a line with a 0xff byte was translated as if it were text
and the command exited 0. Every input is now decoded strictly, line by line (standard input still
streams: each line is translated as it arrives), and the first invalid line stops the command with
``error: invalid UTF-8 in standard input line N (byte 0xff at byte K of the line)``.

Patch of fairseq 0.12's ``fairseq_cli.interactive.buffered_read`` (no hook for how input is read).
"""

import sys
from typing import Iterator, List

from preprocess.inputs import decode_utf8_line


def buffered_read(input: str, buffer_size: int) -> Iterator[List[str]]:
    """fairseq_cli.interactive.buffered_read with strict UTF-8: batches of stripped lines."""
    name = "standard input" if input == "-" else input
    stream = sys.stdin.buffer if input == "-" else open(input, "rb")
    try:
        buffer = []
        for lineno, raw in enumerate(stream, 1):
            buffer.append(decode_utf8_line(raw, name, lineno).strip())
            if len(buffer) >= buffer_size:
                yield buffer
                buffer = []
        if buffer:
            yield buffer
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def install() -> None:
    """Only where fairseq-interactive runs: its module is loaded before it imports the plugin."""
    target = "fairseq_cli.interactive"
    for module in (sys.modules.get(target), sys.modules.get("__main__")):  # the script, or python -m
        if module is not None and target in (module.__name__, getattr(module.__spec__, "name", None)):
            module.buffered_read = buffered_read
