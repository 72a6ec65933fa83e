"""One CTranslate2 measurement of ``serving.py``, in a process of its own (for its peak RSS) that
loads nothing but CTranslate2, as a server would: the translator configured as the translation hub
configures it (``xlm_fairseq/inference/ctranslate2_models.py``: the compute type of the export's
``settings.json``; on CPU one single-threaded translator per core, BATCH sentences a batch).

    python bench/ctranslate2_child.py MODEL_DIR SRC-TGT PIECES_JSON BEAM LENGTH BATCH

prints one JSON line: sentences/s of ``translate_batch`` (loading excluded), the words generated
(every hypothesis is forced to LENGTH words) and this process's own peak RSS (``VmHWM``: the parent's
``ru_maxrss`` of a child counts the forked parent's pages before ``exec``, so it cannot go below the
benchmark process's own size)."""

import json
import os
import sys
import time

import ctranslate2


def main(model_dir, direction, pieces_json, beam, length, batch):
    with open(os.path.join(model_dir, "ctranslate2", "settings.json")) as f:
        compute_type = json.load(f)["compute_type"]
    with open(pieces_json) as f:
        pieces = json.load(f)
    translator = ctranslate2.Translator(
        os.path.join(model_dir, "ctranslate2", direction),
        compute_type=compute_type,
        inter_threads=len(os.sched_getaffinity(0)),
        intra_threads=1,
    )
    length = int(length)
    start = time.perf_counter()
    results = translator.translate_batch(
        pieces,
        beam_size=int(beam),
        max_batch_size=int(batch),
        max_input_length=0,
        max_decoding_length=length,
        min_decoding_length=length,
    )
    seconds = time.perf_counter() - start
    words = sum(len(r.hypotheses[0]) for r in results)
    with open("/proc/self/status") as f:
        peak_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    figures = {"sentences_per_s": len(pieces) / seconds, "words": words, "peak_rss_mib": peak_kib / 1024}
    isa = os.environ.get("CT2_FORCE_CPU_ISA", "default")  # serving.py sets it as the hub does
    print(json.dumps({**figures, "compute_type": translator.compute_type, "cpu_isa": isa}))


if __name__ == "__main__":
    main(*sys.argv[1:])
