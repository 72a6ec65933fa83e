"""preprocess/text.py: Moses-style normalisation and tokenisation, Romanian's normalisation and
diacritics removal, non-printing characters, and detokenisation back to the text."""

import pytest

from preprocess import (
    detokenize,
    normalize_and_tokenize,
    normalize_romanian,
    remove_non_printing,
    remove_romanian_diacritics,
)


def test_romanian_normalisation():
    assert normalize_romanian("Şi ţara, ŞTIINŢĂ") == "Și țara, ȘTIINȚĂ"
    assert normalize_romanian("s\u0327i t\u0326ara") == "și țara"  # decomposed forms too
    assert normalize_romanian("ș ț ă â î plain") == "ș ț ă â î plain"
    assert normalize_romanian("plain ascii") == "plain ascii"


def test_romanian_diacritics_removal():
    assert (
        remove_romanian_diacritics("Știința și țara îşi află în ţări străine ÎNSĂ ÂŞA")
        == "Stiinta si tara isi afla in tari straine INSA ASA"
    )


def test_romanian_in_pipeline():
    line = "Aceşti paşi ţin de configuraţia sistemului."
    assert normalize_and_tokenize(line, "ro") == "Acești pași țin de configurația sistemului ."
    assert (
        normalize_and_tokenize(line, "ro", ro_remove_diacritics=True) == "Acesti pasi tin de configuratia sistemului ."
    )
    # other languages keep their letters
    assert normalize_and_tokenize("Straße in Kayseri: ş ţ", "de") == "Straße in Kayseri : ş ţ"


def test_non_printing_characters():
    assert remove_non_printing("a\tb\x00c\u200bd\u00a0e\x7ff") == "a b c d e f"
    assert remove_non_printing("plain text") == "plain text"
    assert normalize_and_tokenize("\ufeffHello\x00  world\t!", "en") == "Hello world !"


def test_normalize_and_tokenize():
    assert (
        normalize_and_tokenize("Hello, world! It's (really) fine.", "en") == "Hello , world ! It 's ( really ) fine ."
    )
    # Moses punctuation normalisation: German quotes become ASCII quotes, no escaping of & < >
    assert normalize_and_tokenize("„Öffnen“ & <Datei>", "de") == '" Öffnen " & < Datei >'
    assert normalize_and_tokenize(["One.", "", "Two!"], "en") == ["One .", "", "Two !"]


@pytest.mark.parametrize(
    "lang,sentence",
    [
        ("en", "Click on the right mouse button to make the file manager's context menu appear."),
        ("de", "Wählen Sie „Extras - Optionen“, um die Einstellungen (z. B. 3,5 cm) zu ändern."),
        ("ro", "Apăsați pe butonul „+” pentru a lista fragmentele de text existente."),
    ],
)
def test_tokenize_detokenize_round_trip(lang, sentence):
    tokens = normalize_and_tokenize(sentence, lang)
    assert tokens != sentence and len(tokens.split()) > len(sentence.split())
    assert detokenize(tokens, lang) == detokenize(tokens.split(), lang)
    # normalisation maps the typographic quotes to ASCII ones; the rest comes back as it was
    expected = sentence.replace("„", '"').replace("“", '"').replace("”", '"')
    assert detokenize(tokens, lang) == expected
