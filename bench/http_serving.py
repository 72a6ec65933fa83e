"""Load on ``xlm-fairseq-serve``: many clients at once against the same requests sent one at a time.

    python bench/http_serving.py MODEL_DIR [--clients 64] [--requests 512] [--engine fairseq|ctranslate2]
                                 [--out bench/results/http-serving.json]

The server runs in its own process on a free loopback port. The requests are the first ``--requests``
German lines of the shipped en-de test set (``recipes/data/en-de-docs``), each one request de->en,
beam 5. First one client sends them one after the other (the peer: every request a model call of its
own), then ``--clients`` clients send the same requests at once, each taking the next one left. The
figures: sentences/s (requests / wall time), latency p50 and p95, errors and lost requests, and how
many model calls the server made (``/health``); the speed ratio is the concurrent run's sentences/s
over the one-at-a-time run's. Every answer is checked against the one-at-a-time answer of the same
request. ``--document``: a German text of 3 paragraphs and 12 sentences (``bench/document.de``) through the
hub, ``xlm-fairseq-translate`` and the server: its paragraphs and sentences out, and whether the three agree.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from report import finish, versions

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TEST = ROOT / "recipes" / "data" / "en-de-docs" / "test.en-de.de"
DOCUMENT = Path(__file__).resolve().parent / "document.de"


def start_server(model_dir, engine, log):
    cmd = [sys.executable, "-m", "xlm_fairseq.serving.serve", str(model_dir), "--port", "0", "--char-limit", "-1"]
    if engine:
        cmd += ["--engine", engine]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise SystemExit(f"http_serving: the server did not start; see {log}")
    return proc, line.split()[-1]


def post(url, q):
    """(translation or None, seconds, error or None)."""
    body = json.dumps({"q": q, "source": "de", "target": "en"}).encode()
    request = urllib.request.Request(url + "/translate", data=body, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.loads(response.read())["translatedText"], time.perf_counter() - start, None
    except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
        return None, time.perf_counter() - start, str(e)


def health(url):
    with urllib.request.urlopen(url + "/health", timeout=60) as response:
        return json.loads(response.read())


def load(url, lines, clients):
    """Send every line once over ``clients`` clients: (answers by index, latencies, errors, seconds, calls)."""
    answers, latencies, errors = [None] * len(lines), [], []
    taken = iter(range(len(lines)))
    lock = threading.Lock()
    before = health(url)["calls"]

    def client(_):
        while True:
            with lock:
                i = next(taken, None)
            if i is None:
                return
            answers[i], seconds, error = post(url, lines[i])
            latencies.append(seconds)
            if error:
                errors.append(error)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    return answers, latencies, errors, time.perf_counter() - start, health(url)["calls"] - before


def document(url, model_dir, engine):
    """The document through the hub, the command and the server: paragraphs and sentences in and out."""
    from sentencex import segment

    from xlm_fairseq import XLMModel

    text = DOCUMENT.read_text(encoding="utf-8")
    hub = XLMModel.from_pretrained(str(model_dir)).translate(text, src="de", tgt="en", engine=engine)
    cmd = [sys.executable, "-m", "xlm_fairseq.inference.translate", str(model_dir), "-s", "de", "-t", "en"]
    cli = subprocess.run([*cmd, *(["--engine", engine] if engine else [])], input=text, capture_output=True, text=True)
    server, _, _ = post(url, text)

    def counts(t, lang):
        paragraphs = [p for p in t.split("\n\n") if p.strip()]
        return len(paragraphs), sum(len([s for s in segment(lang, p) if s.strip()]) for p in paragraphs)

    (p_in, s_in), (p_out, s_out) = counts(text, "de"), counts(hub, "en")
    return {
        "paragraphs_in": p_in,
        "sentences_in": s_in,
        "paragraphs_out": p_out,
        "sentences_out": s_out,
        "hub_cli_server_same": hub == cli.stdout == server,
        "translation": hub,
    }


def figures(answers, latencies, errors, seconds, calls):
    latencies = sorted(latencies)
    return {
        "requests": len(answers),
        "answered": sum(a is not None for a in answers),
        "errors": len(errors),
        "model_calls": calls,
        "seconds": round(seconds, 2),
        "sentences_per_s": round(len(answers) / seconds, 2),
        "latency_p50_s": round(statistics.median(latencies), 4),
        "latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 4),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", type=Path)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--requests", type=int, default=512)
    p.add_argument("--engine", choices=("fairseq", "ctranslate2"), help="the server's (default: its own choice)")
    p.add_argument("--document", action="store_true", help="also the 12-sentence document (see above)")
    p.add_argument("--model-name", help="what the model is, for the record (default: the directory's name)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "http-serving.json")
    args = p.parse_args()
    started = time.time()
    lines = TEST.read_text(encoding="utf-8").splitlines()[: args.requests]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log = Path(tempfile.mkdtemp(prefix="http-serving-")) / "serve.log"  # the server's own output, if it fails
    proc, url = start_server(args.model_dir, args.engine, log)
    try:
        post(url, lines[0])  # warm-up: the first call's one-off costs
        one = load(url, lines, 1)
        many = load(url, lines, args.clients)
        text = document(url, args.model_dir, args.engine) if args.document else None
    finally:
        proc.terminate()
        proc.wait(30)
    one_at_a_time, concurrent = figures(*one), figures(*many)
    concurrent["same_as_one_at_a_time"] = sum(a == b for a, b in zip(one[0], many[0]))
    concurrent["speed_ratio"] = round(concurrent["sentences_per_s"] / one_at_a_time["sentences_per_s"], 2)
    engine = args.engine or ("ctranslate2" if (args.model_dir / "ctranslate2").is_dir() else "fairseq")
    result = {
        "table": "http-serving",
        "model": args.model_name or args.model_dir.name,
        "engine": engine,
        "clients": args.clients,
        "versions": versions(),
        "one_at_a_time": one_at_a_time,
        "concurrent": concurrent,
        **({"document": text} if text else {}),
    }
    rows = [
        "| clients | sentences/s | p50 s | p95 s | model calls | errors |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| {n} | {f['sentences_per_s']} | {f['latency_p50_s']} | {f['latency_p95_s']} | {f['model_calls']} "
            f"| {f['errors']} |"
            for n, f in ((1, one_at_a_time), (args.clients, concurrent))
        ),
    ]
    finish(args.out, result, started, {engine: "\n".join(rows) + f"\n\n{concurrent['speed_ratio']}x"})


if __name__ == "__main__":
    main()
