"""Serve a translation model over HTTP with LibreTranslate's API (``app.py``) and a page to try it::

    xlm-fairseq-serve MODEL_DIR [--host 127.0.0.1] [--port 5000] [--char-limit 5000] [--api-keys FILE]

It listens on the loopback address unless ``--host`` says otherwise; ``--port 0`` takes a free port.
The address is printed when the model is loaded and the port open."""

import logging
import os
import socket
import sys

from preprocess.errors import ArgumentParser, UserError, run_command
from xlm_fairseq.inference.ctranslate2_models import parse_directions
from xlm_fairseq.inference.translate import add_translator_options, load_translator


def read_api_keys(path: str):
    """One key a line; blank lines and ``#`` comments skipped."""
    try:
        with open(path, encoding="utf-8") as f:
            keys = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    except OSError as e:
        raise UserError(f"--api-keys {path}: {e.strerror}") from None
    if not keys:
        raise UserError(f"--api-keys {path}: no key in it (one a line)")
    return keys


def main(argv=None) -> int:
    p = ArgumentParser(
        name="serve",
        prog="xlm-fairseq-serve",
        description=__doc__.split("\n\n")[0],
        examples=[
            "xlm-fairseq-serve runs/quickstart/model --port 5000",
            "curl -s localhost:5000/translate -H 'Content-Type: application/json' "
            '-d \'{"q": "Hallo Welt.", "source": "de", "target": "en"}\'',
        ],
    )
    add_translator_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this machine only)")
    p.add_argument("--port", type=int, default=5000, help="port (default: %(default)s; 0: a free one)")
    p.add_argument("--directions", metavar="SRC-TGT,...", help="the directions served (default: every pair)")
    p.add_argument(
        "--char-limit", type=int, default=5000, help="characters a request may hold (default: %(default)s; -1: any)"
    )
    p.add_argument("--api-keys", metavar="FILE", help="keys, one a line: a request must give one as api_key")
    p.add_argument("--log-level", default="warning", help="uvicorn's (default: %(default)s)")

    def run(argv):
        args = p.parse_args(argv)
        if not 0 <= args.port <= 65535:
            raise UserError(f"--port {args.port}: give 0 to 65535")
        if args.beam < 1:
            raise UserError(f"--beam {args.beam}: give at least 1")
        keys = read_api_keys(args.api_keys) if args.api_keys else None
        try:
            import uvicorn

            from xlm_fairseq.serving.app import create_app
        except ImportError as e:
            raise UserError(f"serving needs {e.name}: bash scripts/setup.sh --extras serve") from None
        try:
            sock = socket.create_server((args.host, args.port))  # taken before the model loads: fail early
        except OSError as e:
            raise UserError(
                f"--host {args.host} --port {args.port}: {os.strerror(e.errno) if e.errno else e}"
            ) from None
        logging.getLogger().setLevel(logging.INFO)  # fairseq's import leaves the root logger at DEBUG
        hub = load_translator(args)
        directions = parse_directions(args.directions, hub.langs)
        from xlm_fairseq.serving.batcher import Batcher

        def translate(texts, src, tgt):
            return hub.translate(texts, src=src, tgt=tgt, beam=args.beam, engine=args.engine)

        batcher = Batcher(translate)
        char_limit = None if args.char_limit < 0 else args.char_limit
        app = create_app(batcher, directions, char_limit, keys, model=args.model)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(f"serving {', '.join(f'{s}-{t}' for s, t in directions)} on http://{shown}:{port}", flush=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level))
        server.run(sockets=[sock])
        batcher.close()
        return 0

    return run_command("serve", run, argv)


if __name__ == "__main__":
    sys.exit(main())
