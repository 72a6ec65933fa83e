"""LibreTranslate's HTTP API over a translation model, so that LibreTranslate's clients (its client
libraries, browser extensions and apps) can use it:

=======================  ====================================================================
``POST /translate``      ``q`` (a string or a list), ``source``, ``target``, ``format`` (``text``),
                         ``api_key``; as JSON or a urlencoded form -> ``{"translatedText": ...}``
                         (a list for a list)
``GET /languages``       ``[{"code", "name", "targets"}]``: the directions served
``GET /frontend/settings``  the character limit and whether a key is needed, as LibreTranslate's
``GET /health``          ``{"status": "ok", ...}`` and how many requests each model call answered
``GET /``                a page to try it
=======================  ====================================================================

Every text is translated whole (sentences, paragraphs and line breaks: the hub's ``translate``).
A bad request gets a 4xx and ``{"error": "..."}`` naming the problem; the server goes on serving.
"""

import asyncio
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException

from preprocess.errors import UserError
from xlm_fairseq.serving.batcher import Batcher

PAGE = os.path.join(os.path.dirname(__file__), "page.html")


class RequestError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def create_app(
    batcher: Batcher,
    directions: Sequence[Tuple[str, str]],
    char_limit: Optional[int] = None,
    api_keys: Optional[Sequence[str]] = None,
    model: str = "",
) -> FastAPI:
    """The API over ``batcher`` (which translates), serving ``directions``; ``char_limit``: the most
    characters of one request (None: any); ``api_keys``: the keys a request must give one of."""
    app = FastAPI(title="xlm-fairseq", docs_url=None, redoc_url=None)
    targets: Dict[str, List[str]] = {}
    for src, tgt in directions:
        targets.setdefault(src, []).append(tgt)
    keys = frozenset(api_keys or ())
    with open(PAGE, encoding="utf-8") as f:
        page = f.read().replace("{{KEY_REQUIRED}}", json.dumps(bool(keys)))

    @app.exception_handler(RequestError)
    async def request_error(request, e: RequestError):
        return JSONResponse({"error": str(e)}, status_code=e.status)

    @app.exception_handler(Exception)
    async def server_error(request, e: Exception):  # a bug: the request fails, the server goes on
        return JSONResponse({"error": f"translation failed: {type(e).__name__}: {e}"}, status_code=500)

    @app.exception_handler(HTTPException)
    async def http_error(request, e: HTTPException):  # no such path, wrong method: LibreTranslate's shape
        return JSONResponse({"error": str(e.detail)}, status_code=e.status_code)

    @app.get("/", response_class=HTMLResponse)
    async def index():
        return page

    @app.get("/health")
    async def health():
        return {
            "status": "ok",
            "model": model,
            "directions": [f"{s}-{t}" for s, t in directions],
            "calls": batcher.calls,
            "requests": batcher.requests,
            "texts": batcher.texts,
        }

    @app.api_route("/languages", methods=["GET", "POST"])
    async def languages():
        return [{"code": src, "name": src, "targets": tgts} for src, tgts in targets.items()]

    @app.api_route("/frontend/settings", methods=["GET"])
    async def settings():
        src, tgt = directions[0]
        return {
            "charLimit": char_limit if char_limit is not None else -1,
            "keyRequired": bool(keys),
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {"source": {"code": src, "name": src}, "target": {"code": tgt, "name": tgt}},
        }

    @app.post("/translate")
    async def translate(request: Request):
        body = await read_body(request)
        if keys and body.get("api_key") not in keys:
            raise RequestError(403, "invalid API key: give api_key, one of the server's --api-keys")
        texts, single = check_q(body.get("q"))
        src, tgt = body.get("source"), body.get("target")
        for name, lang, known in (
            ("source", src, targets),
            ("target", tgt, {t for ts in targets.values() for t in ts}),
        ):
            if not isinstance(lang, str) or not lang:
                raise RequestError(400, f"missing {name}: give one of {', '.join(sorted(known))}")
            if lang == "auto":
                raise RequestError(400, f"{name} 'auto': language detection is not served; give the language")
            if lang not in known:
                raise RequestError(400, f"{name} {lang!r} is not served: give one of {', '.join(sorted(known))}")
        if (src, tgt) not in directions:
            raise RequestError(400, f"{src}-{tgt} is not served: {src} translates into {', '.join(targets[src])}")
        if body.get("format", "text") != "text":
            raise RequestError(400, f"format {body.get('format')!r} is not served: give text")
        size = sum(map(len, texts))
        if char_limit is not None and size > char_limit:
            raise RequestError(400, f"{size} characters: this server takes at most {char_limit} a request")
        try:
            out = await asyncio.wrap_future(batcher.submit(texts, src, tgt))
        except UserError as e:  # what the model refuses (the hub's one-line errors)
            raise RequestError(400, str(e)) from None
        return {"translatedText": out[0] if single else out}

    return app


async def read_body(request: Request) -> dict:
    """A JSON object, or a urlencoded form (what LibreTranslate's clients send) as a dict."""
    raw = await request.body()
    if not raw.strip():
        raise RequestError(400, "empty request: send q, source and target, as JSON or a form")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        try:
            form = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError) as e:
            raise RequestError(400, f"the form does not parse: {e}") from None
        return {k: v[0] if len(v) == 1 else v for k, v in form.items()}
    if kind not in ("application/json", ""):
        raise RequestError(415, f"content type {kind}: send JSON or a urlencoded form")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestError(400, f"the body is not JSON ({e})") from None
    if not isinstance(body, dict):
        raise RequestError(400, 'the body is JSON but not an object: send {"q": ..., "source": ..., "target": ...}')
    return body


def check_q(q) -> Tuple[List[str], bool]:
    if q is None:
        raise RequestError(400, "missing q: give the text to translate, a string or a list of strings")
    if isinstance(q, str):
        return [q], True
    if isinstance(q, list) and all(isinstance(x, str) for x in q):
        return q, False
    raise RequestError(400, "q is neither a string nor a list of strings")
