"""The loss of every XLM objective (MLM / TLM / CLM / AE / BT / MT), with metrics named per objective
and language (``mlm_en_ppl``, ``tlm_en-de_acc``, ``bt_en-de-en_loss``, ...)."""

import math

from fairseq import metrics, utils
from fairseq.criterions import FairseqCriterion, register_criterion

from xlm_fairseq.modules.kernels import SummedCrossEntropy


def log_objective_metrics(logging_outputs, round_to=3):
    """Per objective key (e.g. ``mlm_en``, ``tlm_en-de``): ``{key}_loss`` (base 2), ``{key}_ppl``,
    ``{key}_acc``; over all objectives: ``loss`` and ``ppl``. Logging outputs carry
    ``{key}:loss`` (nat, summed), ``{key}:ntokens`` and ``{key}:correct``. Keys ending in
    ``_fullmask`` (XLM's validation perplexity, a second look at the same tokens) stay out of the total."""
    keys = sorted({k.split(":")[0] for log in logging_outputs for k in log if k.endswith(":ntokens")})
    total_loss, total_n = 0.0, 0
    for key in keys:
        loss = sum(float(log.get(f"{key}:loss", 0)) for log in logging_outputs)
        n = sum(int(log.get(f"{key}:ntokens", 0)) for log in logging_outputs)
        correct = sum(int(log.get(f"{key}:correct", 0)) for log in logging_outputs)
        if n == 0:
            continue
        if not key.endswith("_fullmask"):
            total_loss, total_n = total_loss + loss, total_n + n
        metrics.log_scalar(f"{key}_loss", loss / n / math.log(2), n, round=round_to)
        metrics.log_derived(f"{key}_ppl", lambda m, k=key: utils.get_perplexity(m[f"{k}_loss"].avg))
        metrics.log_scalar(f"{key}_acc", 100.0 * correct / n, n, round=2)
    if total_n:
        metrics.log_scalar("loss", total_loss / total_n / math.log(2), total_n, round=round_to)
        metrics.log_derived("ppl", lambda m: utils.get_perplexity(m["loss"].avg))


@register_criterion("xlm_cross_entropy")
class XLMCrossEntropyCriterion(FairseqCriterion):
    """Cross-entropy over the predicted positions of one objective's batch (LM objectives: the
    masked / next positions; translation objectives: every non-pad target token).

    Returns fairseq's summed loss with the number of predicted tokens as sample size; the tasks'
    ``run_objectives`` weighs the objectives of an update the same (XLM's mean loss per objective)."""

    def forward(self, model, sample, key="lm", reduce=True):
        logits, _ = model(**sample["net_input"])
        logits, target = logits.reshape(-1, logits.size(-1)), sample["target"].reshape(-1)
        pad = self.padding_idx
        # F.cross_entropy's, in less memory, and the number of targets scored highest
        loss_sum, correct = SummedCrossEntropy.apply(logits.float(), target, pad)
        real = target.ne(pad)
        n = real.sum()
        # tensors, not Python numbers: fairseq reduces them after the step, so no objective waits
        # for the device mid-update (the .item() syncs happen once, when metrics are logged)
        log = {
            f"{key}:loss": loss_sum.detach(),
            f"{key}:ntokens": n,
            f"{key}:correct": correct,
            "ntokens": sample.get("ntokens", n),  # fairseq's wps/wpb: input tokens (LM), target tokens (MT)
            "nsentences": sample["nsentences"],
            "sample_size": n,
        }
        return loss_sum, n, log

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        log_objective_metrics(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
