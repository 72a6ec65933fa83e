"""The loss of ``--task xlm_classification``: cross-entropy of the class scores, with accuracy per
language (``acc_en``, ``acc_de``, ...) and ``acc``, their unweighted mean (XNLI's "average")."""

import math

import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion


def _mean_accuracy(meters):
    accuracies = [meters[k].avg for k in meters if k.startswith("acc_")]
    return round(sum(accuracies) / len(accuracies), 2) if accuracies else 0.0


@register_criterion("xlm_sentence_classification")
class XLMSentenceClassificationCriterion(FairseqCriterion):
    """Summed cross-entropy over a batch's rows, sample size = rows (fairseq's ``sentence_prediction``
    convention: the optimiser sees the mean, XLM's ``F.cross_entropy``). Every batch logs every
    language of the task, zeros included, so that workers' logs always have the same keys."""

    def __init__(self, task):
        super().__init__(task)
        self.langs = list(task.langs)

    def forward(self, model, sample, reduce=True):
        logits, _ = model(**sample["net_input"])
        target = sample["target"]
        loss = F.cross_entropy(logits.float(), target, reduction="sum")
        correct = logits.argmax(-1).eq(target)
        langs = sample["langs"]  # the rows' own languages, whatever ids the model read them with
        n = target.numel()
        log = {"loss": loss.detach(), "ntokens": sample["ntokens"], "nsentences": n, "sample_size": n}
        # counted per language by scatter: bincount's output size needs max(langs) on the host
        rows = langs.new_zeros(len(self.langs)).scatter_add_(0, langs, torch.ones_like(langs))
        hits = langs.new_zeros(len(self.langs)).scatter_add_(0, langs, correct.long())
        for i, lang in enumerate(self.langs):
            log[f"{lang}:rows"], log[f"{lang}:correct"] = rows[i], hits[i]
        return loss, n, log

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        rows = sum(int(log.get("sample_size", 0)) for log in logging_outputs)
        if rows:
            loss = sum(float(log.get("loss", 0)) for log in logging_outputs)
            metrics.log_scalar("loss", loss / rows / math.log(2), rows, round=3)
        langs = sorted({k.split(":")[0] for log in logging_outputs for k in log if k.endswith(":rows")})
        for lang in langs:
            n = sum(int(log.get(f"{lang}:rows", 0)) for log in logging_outputs)
            if n:
                correct = sum(float(log.get(f"{lang}:correct", 0)) for log in logging_outputs)
                metrics.log_scalar(f"acc_{lang}", 100.0 * correct / n, n, round=2)
        # over the whole validation (or log interval), not per batch: batches mix languages
        metrics.log_derived("acc", _mean_accuracy)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
