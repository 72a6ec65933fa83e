"""The training step of the plugin's tasks: each objective of an update run on its batch and back-propagated
one by one (:func:`run_objectives`), under ``--amp``'s autocast, PyTorch DDP's ``no_sync`` and the
data-parallel ranks' agreement on a failure. Which objectives an update trains is XLM's loop's
(:class:`xlm_fairseq.objectives.schedule.XLMLoop`)."""

import contextlib

import torch
from fairseq.distributed import utils as distributed_utils
from fairseq.optim.amp_optimizer import AMPOptimizer

from xlm_fairseq.distributed.rank_agreement import agree_on_failure


def run_objectives(
    sample, model, criterion, objectives, weights=None, optimizer=None, ignore_grad=False, prepared=None
):
    """Loss of each of the ``objectives`` on its batch of ``sample`` (after the objective's
    ``prepare``; times its weight in ``weights``, by key), back-propagated one by one when training
    (so only one objective's graph is alive at a time). ``prepared``, a dict, receives each objective's
    batch after ``prepare`` by key (validation scores the back-translations it made).

    Objectives weigh the same whatever their batch holds (XLM's mean token loss per objective),
    while what is back-propagated is a *summed* loss, fairseq's convention, which keeps fp16
    gradients where fairseq's loss scaler expects them: each objective's mean loss times one
    size S shared by the update (the first objective's predicted tokens), and S per objective
    returned as the sample size that fairseq divides the gradient by. One objective: exactly
    fairseq's summed loss over its tokens. Under ``--amp`` the forward passes (back-translation
    included) run in autocast, as fairseq's own ``train_step`` does. Under PyTorch's DDP an
    update all-reduces once, in the last objective's backward pass. Data-parallel ranks agree
    whether any objective failed before gradients are all-reduced, so a rank-local failure is a
    ``RankFailure`` on every rank, never a hang."""
    totals = {"loss": 0.0, "size": 0, "common_size": None, "logs": {}}
    amp = isinstance(optimizer, AMPOptimizer)
    device = next(model.parameters()).device
    training = optimizer is not None
    distributed = training and distributed_utils.get_data_parallel_world_size() > 1

    def forward(objective):
        with torch.autocast(device_type=device.type, enabled=amp):
            batch = objective.prepare(model, sample[objective.key])
            if prepared is not None:
                prepared[objective.key] = batch
            loss, ntokens, log = criterion(model, batch, key=objective.key)
        ntokens = ntokens.clamp(min=1)
        common_size = totals["common_size"] = ntokens if totals["common_size"] is None else totals["common_size"]
        loss = loss * (common_size / ntokens)
        if weights is not None:
            loss = loss * weights[objective.key]
        totals["loss"] += loss.detach()
        totals["size"] += common_size
        for k, v in log.items():
            totals["logs"][k] = totals["logs"].get(k, 0) + v
        return loss

    def backward(loss):
        if training:
            optimizer.backward(loss * 0 if ignore_grad else loss)

    def attempt(work, objective):  # under data parallelism a failure waits for the agreement
        try:
            return work(objective), None
        except Exception as e:
            if not distributed:
                raise
            return None, (objective.key, e)

    objectives = [o for o in objectives if sample.get(o.key)]
    # PyTorch's DDP all-reduces in the backward pass of a forward run outside no_sync: the
    # gradients of all but the last objective accumulate locally, one all-reduce per update,
    # after the ranks agree. fairseq's legacy_ddp all-reduces after train_step: all runs first.
    reduces_in_backward = training and hasattr(model, "no_sync")
    failure, last_loss = None, None
    with model.no_sync() if reduces_in_backward else contextlib.nullcontext():
        for objective in objectives[:-1]:
            _, failure = attempt(lambda o: backward(forward(o)), objective)
            if failure:
                break
    if objectives and not failure:
        last_loss, failure = attempt(forward, objectives[-1])
        if not failure and not reduces_in_backward:
            _, failure = attempt(lambda _: backward(last_loss), objectives[-1])
    if distributed:  # no rank enters a gradient all-reduce while another has failed
        agree_on_failure(failure, device)
    if last_loss is not None and reduces_in_backward:
        backward(last_loss)
    return totals["loss"], totals["size"], totals["logs"]
