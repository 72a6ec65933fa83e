"""A new objective is one file: docs/contributing.md's worked example, written into a copy of the plugin,
becomes options of its task, trains through fairseq-train and validates; without the file its option is
refused again."""

import json
import re
import shutil
import sys

import pytest
from conftest import PRETRAIN_ARGS, ROOT, fairseq, json_logs, run

SECTION = "## Adding an objective"


def worked_example() -> str:
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def predicted_share(plugin, data_bin, *steps) -> float:
    """The share of the positions of a batch of ``mlm_en``/``hmlm_en`` that are predicted, read in a
    process that imports the copied plugin."""
    script = f"""
import json, sys
sys.path.insert(0, {str(plugin.parent)!r})
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
import xlm_fairseq

argv = [{str(data_bin)!r}, "--user-dir", {str(plugin)!r}, "--task", "cross_lingual_lm", "--arch", "xlm_tiny",
        "--langs", "en,de", "--tokens-per-sample", "64", *{list(steps)!r}]
cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
task = tasks.setup_task(cfg.task)
task.load_dataset("train")
(key,) = [o.key for o in task.objectives]
dataset = task.dataset("train").datasets[key]
batch = dataset.collater([dataset[i] for i in range(64)])
mask = batch["net_input"]["pred_mask"]
real = batch["net_input"]["src_tokens"].ne(task.dictionary.pad())
print(json.dumps({{"file": xlm_fairseq.__file__, "share": float(mask.sum() / real.sum())}}))
"""
    out = json.loads(run([sys.executable, "-c", script]).stdout.strip().splitlines()[-1])
    assert out["file"].startswith(str(plugin)), out["file"]  # the copy, not the checkout's plugin
    return out["share"]


@pytest.mark.slow  # a copy of the plugin, three interpreters and two short fairseq-train runs
def test_the_worked_example_is_one_file(data_bin, tmp_path):
    plugin = tmp_path / "plugin" / "xlm_fairseq"
    shutil.copytree(ROOT / "xlm_fairseq", plugin, ignore=shutil.ignore_patterns("__pycache__"))
    new = plugin / "objectives" / "heavy_mlm.py"
    new.write_text(worked_example(), encoding="utf-8")

    # its own masking rate, through the stream objectives' mask hook (MLM's 0.15 otherwise)
    assert abs(predicted_share(plugin, data_bin, "--hmlm-steps", "en", "--hmlm-prob", "0.5") - 0.5) < 0.05
    assert abs(predicted_share(plugin, data_bin, "--mlm-steps", "en") - 0.15) < 0.05

    args = [*PRETRAIN_ARGS, "--langs", "en,de", "--max-update", "4", "--log-interval", "1"]
    args[args.index("--user-dir") + 1] = plugin
    args.remove("--disable-validation")
    args += ["--hmlm-steps", "en,de", "--hmlm-prob", "0.4", "--mlm-steps", "en", "--save-dir", tmp_path / "ckpt"]
    out = fairseq("train", data_bin, *args).stdout
    trained = json_logs(out, "train_inner")
    assert len(trained) == 4
    # each iteration draws its family's objectives with replacement, as MLM's (XLM's shuf_order)
    drawn = [
        {k for k, v in r.items() if k.startswith("hmlm_") and k.endswith("_loss") and v is not None} for r in trained
    ]
    assert all(drawn) and set().union(*drawn) <= {"hmlm_en_loss", "hmlm_de_loss"}, drawn
    valid = json_logs(out, "valid")[-1]
    assert {"valid_hmlm_en_loss", "valid_hmlm_de_loss", "valid_mlm_en_loss"} <= set(valid)

    new.unlink()
    refused = fairseq("train", data_bin, *args, ok=False)
    assert refused.returncode != 0 and "--hmlm-steps" in refused.stderr, refused.stderr[-2000:]
