"""Cross-lingual sentence retrieval without fine-tuning (Tatoeba / BUCC style): how well the encoder
aligns languages. Each sentence of two line-aligned files becomes the mean of its last-layer states
(its pieces; the ``</s>`` around it left out), and every sentence retrieves its nearest neighbour by
cosine in the other file; accuracy@1 is the share that find their own translation, both ways::

    xlm-fairseq-retrieve MODEL --src en=test.en-de.en --tgt de=test.en-de.de [--json OUT]

MODEL is a pretrained LM (a converted or exported dir, or a training checkpoint with ``--data``, its
data-bin) or a fine-tuned classifier (``--checkpoint-file`` names the file in a directory)."""

import json
import re
import sys
from typing import List, Sequence

import torch

from preprocess.errors import ArgumentParser, UserError, run_command
from preprocess.files import atomic_write
from preprocess.langs import LANG_PATTERN


@torch.no_grad()
def sentence_embeddings(hub, texts: Sequence[str], lang: str, batch_size: int = 64) -> torch.Tensor:
    """len(texts) x dim: mean-pooled last-layer states of each text in ``lang``."""
    max_len = hub.model.lm.max_positions
    tokens = []
    for text in texts:
        t = hub.encode(text, lang)
        tokens.append(t if len(t) <= max_len else torch.cat([t[: max_len - 1], t[-1:]]))
    order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
    out = torch.empty(len(tokens), hub.model.lm.dim)
    pad = hub.dictionary.pad()
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        width = max(len(tokens[i]) for i in index)
        batch = torch.full((len(index), width), pad, dtype=torch.long)
        inside = torch.zeros(len(index), width, dtype=torch.bool)  # the pieces, not the </s> around them
        for row, i in enumerate(index):
            n = len(tokens[i])
            batch[row, :n] = tokens[i]
            inside[row, 1 : n - 1] = True
            if n <= 2:  # an empty line: its two </s>
                inside[row, :n] = True
        features = hub.extract_features(batch, lang).float().cpu()
        weights = inside.unsqueeze(-1).float()
        out[index] = (features * weights).sum(1) / weights.sum(1)
    return out


def retrieval_accuracy(src: torch.Tensor, tgt: torch.Tensor) -> tuple:
    """(accuracy@1 src->tgt, tgt->src) in %, row i of each being translations of each other."""
    src, tgt = torch.nn.functional.normalize(src, dim=-1), torch.nn.functional.normalize(tgt, dim=-1)
    similarity = src @ tgt.T
    gold = torch.arange(len(src))
    forward = similarity.argmax(1).eq(gold).float().mean().item() * 100
    backward = similarity.argmax(0).eq(gold).float().mean().item() * 100
    return forward, backward


def _read(spec: str, option: str):
    lang, sep, path = spec.partition("=")
    if not sep or not re.fullmatch(LANG_PATTERN, lang) or not path:
        raise UserError(f"{option} {spec!r}: expected LANG=FILE, e.g. en=test.en")
    try:
        with open(path, encoding="utf-8") as f:
            lines: List[str] = [line.rstrip("\r\n") for line in f]
    except FileNotFoundError:
        raise UserError(f"{path}: no such file ({option})") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: invalid UTF-8 ({e}) ({option})") from None
    if not any(line.strip() for line in lines):
        raise UserError(f"{path}: empty file ({option})")
    return lang, path, lines


def main(argv=None) -> int:
    p = ArgumentParser(
        name="retrieval",
        prog="xlm-fairseq-retrieve",
        description=__doc__.split("\n\n")[0],
        examples=["xlm-fairseq-retrieve models/ende --src en=test.en-de.en --tgt de=test.en-de.de --json out.json"],
    )
    p.add_argument("model", help="a pretrained LM or fine-tuned classifier: checkpoint file or model directory")
    p.add_argument("--checkpoint-file", default=None, help="the file in a model directory (default: model.pt)")
    p.add_argument("--data", default=".", help="the data-bin of a training checkpoint (dict.txt, text pipeline)")
    p.add_argument("--src", required=True, metavar="LANG=FILE", help="one sentence a line")
    p.add_argument("--tgt", required=True, metavar="LANG=FILE", help="their translations, line-aligned")
    p.add_argument("--max-sentences", type=int, default=0, help="use the first N pairs only (default: all)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences encoded at a time (default: %(default)s)")
    p.add_argument("--json", help="write the result to this JSON file")

    def run(argv):
        args = p.parse_args(argv)
        src_lang, src_path, src = _read(args.src, "--src")
        tgt_lang, tgt_path, tgt = _read(args.tgt, "--tgt")
        if len(src) != len(tgt):
            raise UserError(f"{src_path} has {len(src)} lines, {tgt_path} {len(tgt)}: not line-aligned")
        if args.max_sentences:
            src, tgt = src[: args.max_sentences], tgt[: args.max_sentences]
        from preprocess.layout import MODEL_FILE
        from xlm_fairseq.inference.hub import XLMHubInterface
        from xlm_fairseq.models.xlm import XLMModel

        hub = XLMModel.from_pretrained(args.model, args.checkpoint_file or MODEL_FILE, args.data)
        if not isinstance(hub, XLMHubInterface):
            raise UserError(f"{args.model}: a translation model; retrieval reads a pretrained LM or a classifier")
        forward, backward = retrieval_accuracy(
            sentence_embeddings(hub, src, src_lang, args.batch_size),
            sentence_embeddings(hub, tgt, tgt_lang, args.batch_size),
        )
        result = {f"{src_lang}-{tgt_lang}": round(forward, 2), f"{tgt_lang}-{src_lang}": round(backward, 2)}
        result["pairs"] = len(src)
        print(
            f"retrieval accuracy@1 over {len(src)} pairs: {src_lang}->{tgt_lang} {forward:.2f} %, "
            f"{tgt_lang}->{src_lang} {backward:.2f} %"
        )
        if args.json:
            with atomic_write(args.json) as f:
                json.dump(result, f, indent=1)
        return 0

    return run_command("retrieval", run, argv)


if __name__ == "__main__":
    sys.exit(main())
