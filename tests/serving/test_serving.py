"""``xlm-fairseq-serve`` as people use it: a real server process on a free local port, spoken to by a
LibreTranslate client library, by many clients at once, by clients that leave mid-request, by bad
requests, and by a real browser on its page; every translation the hub's."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import ROOT, SAMPLE, head, in_process, run
from libretranslatepy import LibreTranslateAPI

from xlm_fairseq import XLMModel
from xlm_fairseq.serving import serve

# three paragraphs of four sentences (written for these tests)
DOCUMENT = (
    "Klicken Sie auf die Schaltfläche „Drucken“. Wählen Sie dann einen Drucker aus. Die Datei wird "
    "gedruckt. Das kann einige Minuten dauern.\n\n"
    "Öffnen Sie das Menü „Datei“. Wählen Sie „Speichern unter“. Geben Sie einen Namen ein.\n"
    "Klicken Sie auf „Speichern“.\n\n"
    "Die Einstellungen finden Sie im Menü „Bearbeiten“. Dort können Sie die Sprache ändern. Starten Sie "
    "das Programm danach neu. Weitere Hilfe finden Sie im Handbuch."
)
BEAM = 2


class Server:
    """``xlm-fairseq-serve MODEL --port 0 ARGS`` in its own process, up once it prints its address."""

    def __init__(self, exported_unmt, *args, log=None):
        cmd = [sys.executable, "-m", "xlm_fairseq.serving.serve", exported_unmt, "--port", "0", *args]
        self.log = log
        self.proc = subprocess.Popen(
            [str(c) for c in cmd], stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, cwd=ROOT
        )
        line = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(180)
        if not line or "http://" not in line[0]:
            self.proc.kill()
            raise AssertionError(f"the server did not start: {line}\n{open(log).read()[-3000:]}")
        self.url = line[0].split()[-1]

    def post(self, body, content_type="application/json", path="/translate"):
        """(status, decoded JSON answer)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method="POST")
        if content_type:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return json.loads(response.read())

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def mt(exported_unmt):
    return XLMModel.from_pretrained(str(exported_unmt))


@pytest.fixture(scope="module")
def server(exported_unmt, tmp_path_factory):
    s = Server(exported_unmt, "--beam", BEAM, "--char-limit", 20000, log=tmp_path_factory.mktemp("log") / "serve.log")
    yield s
    s.close()


def translate(s, q, src="de", tgt="en"):
    status, answer = s.post({"q": q, "source": src, "target": tgt, "format": "text"})
    assert status == 200, answer
    return answer["translatedText"]


def test_a_document_is_the_same_through_hub_command_and_server(server, mt, exported_unmt, tmp_path):
    expected = mt.translate(DOCUMENT, src="de", tgt="en", beam=BEAM)
    assert expected.count("\n\n") == 2 and expected.count("\n") == 5  # the paragraphs and the line break kept
    assert translate(server, DOCUMENT) == expected
    (tmp_path / "doc.de").write_text(DOCUMENT, encoding="utf-8")
    cli = [sys.executable, "-m", "xlm_fairseq.inference.translate", exported_unmt, "-s", "de", "-t", "en"]
    assert run([*cli, tmp_path / "doc.de", "--beam", BEAM]).stdout == expected
    # a list gives a list; an empty text gives ""
    assert translate(server, [DOCUMENT, "", "Hallo."]) == [expected, "", mt.translate("Hallo.", "de", "en", beam=BEAM)]


def test_a_libretranslate_client_library_speaks_to_it(server, mt):
    client = LibreTranslateAPI(server.url)
    sentence = "Öffnen Sie das Menü „Datei“."
    assert client.translate(sentence, "de", "en") == mt.translate(sentence, src="de", tgt="en", beam=BEAM)
    languages = {lang["code"]: sorted(lang["targets"]) for lang in client.languages()}
    assert languages == {"en": ["de", "ro"], "de": ["en", "ro"], "ro": ["de", "en"]}
    assert server.get("/frontend/settings")["charLimit"] == 20000


def test_many_clients_at_once_are_answered_in_batches(server, mt, tmp_path):
    """64 clients sending for 10 seconds: every request answered with the hub's translation, and the
    server answered them in fewer model calls than requests."""
    lines = head(SAMPLE / "en-de" / "test.en-de.de", tmp_path / "test.de", 64).read_text().splitlines()
    expected = dict(zip(lines, mt.translate(lines, src="de", tgt="en", beam=BEAM)))
    before = server.get("/health")
    until = time.monotonic() + 10

    def client(i):
        answers = []
        while True:
            q = lines[(i + len(answers)) % len(lines)]
            answers.append((q, translate(server, q)))
            if time.monotonic() > until:
                return answers

    with ThreadPoolExecutor(64) as pool:
        answers = [a for client_answers in pool.map(client, range(64)) for a in client_answers]
    after = server.get("/health")
    assert len(answers) >= 64 and after["requests"] - before["requests"] == len(answers)
    assert [got for _, got in answers] == [expected[q] for q, _ in answers]
    assert after["calls"] - before["calls"] < len(answers) / 4  # requests that came together went together


def test_a_client_that_leaves_does_not_stop_the_server(server):
    host, port = server.url.split("//")[1].split(":")
    body = json.dumps({"q": DOCUMENT, "source": "de", "target": "en"}).encode()
    headers = (
        f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    for sent in (headers.encode() + body[:20], headers.encode() + body):  # mid-body; mid-translation
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(sent)
    assert translate(server, "Hallo Welt.")
    assert server.get("/health")["status"] == "ok"


BAD = [
    (b"", "application/json", 400, "empty request"),
    (b"{not json", "application/json", 400, "the body is not JSON"),
    (b"[1, 2]", "application/json", 400, "not an object"),
    (b"q=Hallo&source=de", "application/x-www-form-urlencoded", 400, "missing target"),
    (b"hello", "text/plain", 415, "content type text/plain"),
    ({"source": "de", "target": "en"}, "application/json", 400, "missing q"),
    ({"q": 5, "source": "de", "target": "en"}, "application/json", 400, "q is neither a string nor a list"),
    ({"q": "Hallo", "source": "fr", "target": "en"}, "application/json", 400, "source 'fr' is not served"),
    ({"q": "Hallo", "source": "de", "target": "de"}, "application/json", 400, "de-de is not served"),
    ({"q": "Hallo", "source": "auto", "target": "en"}, "application/json", 400, "language detection"),
    ({"q": "Hallo", "source": "de", "target": "en", "format": "html"}, "application/json", 400, "format 'html'"),
    ({"q": "x" * 20001, "source": "de", "target": "en"}, "application/json", 400, "20001 characters"),
]


@pytest.mark.parametrize("body,content_type,status,message", BAD, ids=[b[3] for b in BAD])
def test_every_bad_request_gets_a_4xx_with_a_message_and_the_next_is_answered(
    server, body, content_type, status, message
):
    got, answer = server.post(body, content_type)
    assert got == status and message in answer["error"]
    assert translate(server, "Hallo Welt.")


def test_wrong_paths_and_methods_answer_in_the_same_shape(server):
    assert server.post({"q": "x"}, path="/nothing") == (404, {"error": "Not Found"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(server.url + "/translate")
    assert e.value.code == 405 and "error" in json.loads(e.value.read())


@pytest.mark.slow
def test_api_keys_and_the_character_limit(exported_unmt, tmp_path, mt):
    keys = tmp_path / "keys"
    keys.write_text("# one a line\nsecret-1\n\nsecret-2\n")
    s = Server(exported_unmt, "--api-keys", keys, "--char-limit", 40, "--directions", "de-en", log=tmp_path / "log")
    try:
        body = {"q": "Hallo Welt.", "source": "de", "target": "en"}
        assert s.post(body)[0] == 403 and "invalid API key" in s.post(body)[1]["error"]
        assert s.post({**body, "api_key": "wrong"})[0] == 403
        assert s.post({**body, "api_key": "secret-2"}) == (
            200,
            {"translatedText": mt.translate("Hallo Welt.", "de", "en", beam=5)},
        )
        assert s.post({**body, "q": "x" * 41, "api_key": "secret-1"}) == (
            400,
            {"error": "41 characters: this server takes at most 40 a request"},
        )
        assert s.post({**body, "source": "en", "target": "de", "api_key": "secret-1"})[0] == 400
        assert s.get("/frontend/settings")["keyRequired"] is True
    finally:
        s.close()


@pytest.mark.slow
def test_the_load_benchmark_writes_its_record(exported_unmt, tmp_path):
    """bench/http_serving.py on the tiny model: a record with every request answered, as one at a time."""
    out = tmp_path / "http.json"
    bench = [sys.executable, ROOT / "bench" / "http_serving.py", exported_unmt, "--requests", 8, "--clients", 4]
    run([*bench, "--document", "--out", out])
    record = json.loads(out.read_text())
    assert record["engine"] == "fairseq" and record["machine"] and record["commit"]
    for figures in (record["one_at_a_time"], record["concurrent"]):
        assert figures["requests"] == figures["answered"] == 8 and figures["errors"] == 0
    assert record["concurrent"]["same_as_one_at_a_time"] == 8 and record["concurrent"]["model_calls"] <= 8
    document = record["document"]
    assert (document["paragraphs_in"], document["sentences_in"], document["paragraphs_out"]) == (3, 12, 3)
    assert document["hub_cli_server_same"] is True


@pytest.mark.parametrize(
    "args,message",
    [
        (["--api-keys", "{d}/missing"], "--api-keys {d}/missing: No such file or directory"),
        (["--api-keys", "{d}/empty"], "--api-keys {d}/empty: no key in it (one a line)"),
        (["--port", "70000"], "--port 70000: give 0 to 65535"),
        (["--directions", "de-fr"], "--directions: 'de-fr' is not SRC-TGT of two of the model's languages (en,de,ro)"),
    ],
    ids=["keys-missing", "keys-empty", "port", "directions"],
)
def test_serve_command_errors_are_one_line(exported_unmt, tmp_path, args, message, capsys):
    (tmp_path / "empty").write_text("\n# nothing\n")
    status, err = in_process(serve.main, [exported_unmt, "--port", "0", *(a.format(d=tmp_path) for a in args)], capsys)
    assert status == 2 and err.strip().splitlines()[-1] == f"serve: error: {message.format(d=tmp_path)}"


def test_a_port_in_use_is_one_line(exported_unmt, capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        status, err = in_process(serve.main, [exported_unmt, "--port", port], capsys)
    assert status == 2 and err.strip() == f"serve: error: --host 127.0.0.1 --port {port}: Address already in use"


# Debian's packages chromium and chromium-driver (scripts/browser.sh installs them), or these variables
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


def test_the_page_translates_in_a_real_browser(server, mt, tmp_path):
    """Headless Chromium on the server's page: pick German to English, type, click, read the translation."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    for path in (CHROMIUM, CHROMEDRIVER):
        assert os.path.isfile(path), f"{path}: no such browser program; run bash scripts/browser.sh"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # no network beyond the server: Chromium's own background connections would be refused, many at a time
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"):
        options.add_argument(flag)
    for flag in ("--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        browser.get(server.url + "/")
        wait = WebDriverWait(browser, 60)
        wait.until(lambda b: len(Select(b.find_element(By.ID, "source")).options) == 3)
        Select(browser.find_element(By.ID, "source")).select_by_value("de")
        Select(browser.find_element(By.ID, "target")).select_by_value("en")
        # languages by name in the browser's language (Chromium's en-US here), codes as the values
        assert Select(browser.find_element(By.ID, "source")).first_selected_option.text == "German"
        assert Select(browser.find_element(By.ID, "target")).first_selected_option.text == "English"
        text = "Öffnen Sie das Menü „Datei“.\n\nWählen Sie „Speichern unter“."
        browser.find_element(By.ID, "text").send_keys(text)
        browser.find_element(By.ID, "translate").click()
        shown = wait.until(lambda b: b.find_element(By.ID, "translation").get_attribute("textContent"))
        assert shown == mt.translate(text, src="de", tgt="en", beam=BEAM)
        assert browser.find_element(By.ID, "error").text == ""
        browser.save_screenshot(str(tmp_path / "page.png"))
    finally:
        browser.quit()
