"""What fairseq's logs say, read by the benchmark: training windows, compiles, generation speed."""

import json
import re

TRAIN_INNER = re.compile(r"\| train_inner \| (\{.*\})")
# the plugin's --compile line: graphs so far and seconds spent compiling so far (xlm_fairseq/modules/compiled.py)
COMPILED = re.compile(r"torch\.compile: .*\((\d+) graphs in this process, ([\d.]+) s of compiling so far\)")
# the plugin's line when it changes torch's CPU threads for other busy processes (xlm_fairseq/cpu_threads.py)
THREADS_CHANGED = re.compile(r"CPU threads \d+ -> \d+: ")
GENERATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")


def train_windows(log_text):
    rows = [json.loads(m.group(1)) for m in TRAIN_INNER.finditer(log_text)]
    return [
        {
            "tokens_per_s": float(r["wps"]),
            "sentences_per_s": float(r["wps"]) * float(r["bsz"]) / float(r["wpb"]),
            "tokens_per_update": float(r["wpb"]),
        }
        for r in rows
    ]


def compile_stats(log_text) -> dict:
    """{compiled_graphs, compile_s} as a --compile run last logged them; {} for an eager run."""
    compiles = COMPILED.findall(log_text)
    return {"compiled_graphs": int(compiles[-1][0]), "compile_s": float(compiles[-1][1])} if compiles else {}
