"""A data-bin as the tasks read it: its shards (fairseq's ``DATA1:DATA2:...``), its shared dictionary
(checked to be the same in every shard, and to be of a layout and format this plugin reads)."""

import json
import os
from typing import List, Optional

from fairseq.data import Dictionary

from preprocess.layout import DICT_FILE, FORMAT_VERSION, MANIFEST_FILE
from xlm_fairseq.data.dictionary import dictionary_digest, load_dictionary
from xlm_fairseq.errors import XLMUserError


def _other_layout(directory: str) -> Optional[str]:
    """What a directory without ``dict.txt`` holds instead, if it is a data-bin of another layout."""
    found = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    per_lang = [f for f in found if f.startswith("dict.") and f.endswith(".txt")]
    if per_lang:
        return f"a fairseq-preprocess data-bin ({', '.join(per_lang[:3])}: a dictionary per language)"
    if any(f.endswith(".pth") for f in found):
        return "XLM's own binarised data (.pth files)"
    return None


def load_data_bin_dictionary(data: str) -> Dictionary:
    """The data-bin's shared ``dict.txt`` (of the first shard); a directory in another layout is named as such."""
    directory = data_shards(data)[0]
    path = os.path.join(directory, DICT_FILE)
    if not os.path.isfile(path):
        raise XLMUserError(
            f"{path}: {_other_layout(directory) or 'no dictionary'}; XLM shares one dictionary: make the data-bin "
            "from text with `xlm-fairseq-prepare`"
        )
    manifest = os.path.join(directory, MANIFEST_FILE)
    if os.path.isfile(manifest):
        with open(manifest, encoding="utf-8") as f:
            version = json.load(f).get("format")
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise XLMUserError(
                f"{manifest}: data-bin format {version}, newer than this xlm-fairseq reads "
                f"({FORMAT_VERSION}); update xlm-fairseq"
            )
    return load_dictionary(path)


def data_shards(data: str) -> List[str]:
    """The directories of DATA: fairseq's ``DATA1:DATA2:...``, one per epoch of training in turn
    (valid and test from the first); a single data-bin is one."""
    return [d for d in data.split(os.pathsep) if d] or [data]


def check_shards_agree(data: str, dictionary: Dictionary) -> None:
    """Every shard of DATA holds the first one's dictionary (same symbols, same order): a shard
    binarised with another would feed the model other words under the same ids."""
    first = data_shards(data)[0]
    for shard in data_shards(data)[1:]:
        other = load_data_bin_dictionary(shard)
        if dictionary_digest(other) != dictionary_digest(dictionary):
            raise XLMUserError(
                f"{os.path.join(shard, DICT_FILE)}: not the dictionary of {os.path.join(first, DICT_FILE)} "
                f"({len(other)} vs {len(dictionary)} types, or another order); binarise every shard with the "
                "first one's: xlm-fairseq-prepare SHARD --spm-model FIRST/spm.model --dict FIRST/dict.txt ..."
            )


def dictionary_may_come_later(data: str) -> bool:
    """DATA holds no dictionary at all (a model directory, an empty one): the dictionary may come with
    the checkpoint that is loaded next (fairseq-interactive, the hub); training still stops on it."""
    directory = data_shards(data)[0]
    return not os.path.isfile(os.path.join(directory, DICT_FILE)) and _other_layout(directory) is None
