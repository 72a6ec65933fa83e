"""The objectives of XLM's tasks as data, and their schedule.

An :class:`Objective` is a family (``mlm``, ``tlm``, ``clm``; ``ae``, ``mt``, ``bt``) and its
languages, parsed once; its key (``mlm_en``, ``tlm_en-de``, ``bt_en-de-en``) names its batches and
metrics. :class:`ObjectiveSchedule` is XLM's loop over them: which objectives an update trains, and
their losses back-propagated one by one (``run_objectives``).
"""

import contextlib
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
import torch
from fairseq.distributed import utils as distributed_utils
from fairseq.models import BaseFairseqModel
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.tasks.online_backtranslation import PiecewiseLinearFn

from xlm_fairseq.distributed.rank_agreement import agree_on_failure
from xlm_fairseq.errors import XLMUserError

FAMILIES = {"clm": 1, "mlm": 1, "tlm": 2, "ae": 1, "mt": 2, "bt": 3}  # family -> languages it names


@dataclass(frozen=True)
class Objective:
    """``bt`` over ``(en, de, en)``: back-translation en -> de -> en; ``tlm`` over ``(en, de)``."""

    family: str
    langs: Tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.family}_{'-'.join(self.langs)}"

    @property
    def source(self) -> str:
        return self.langs[0]

    @property
    def target(self) -> str:
        """The language predicted: an MT direction's target, BT's original language."""
        return self.langs[-1]

    @classmethod
    def parse(cls, key: str) -> "Objective":
        family, _, langs = key.partition("_")
        parts = tuple(langs.split("-"))
        if FAMILIES.get(family) != len(parts) or not all(parts):
            raise ValueError(f"not an objective key: {key!r}")
        return cls(family, parts)


MAX_DRAWS_PER_FAMILY = 5  # XLM's shuf_order(n=5): objectives drawn per family and iteration


def lambda_schedule(value: str, option: str = "lambda") -> PiecewiseLinearFn:
    """'1' -> constant 1; '0:1,100000:0.1,300000:0' -> piecewise linear through those points, constant
    after the last (XLM's ``get_lambda_value``; fairseq's online_backtranslation schedule)."""
    value = str(value).strip()
    try:
        schedule = PiecewiseLinearFn.from_string(value)
    except ValueError:
        raise XLMUserError(
            f"--{option}: cannot parse '{value}' (a number, or updates:value pairs like 0:1,100000:0.1)"
        ) from None
    steps = [x for x, _ in schedule.pieces]
    if steps[0] != 0 or steps != sorted(set(steps)):
        raise XLMUserError(f"--{option}: schedule '{value}' must start at 0 and increase")
    if min(y for _, y in schedule.pieces) < 0:
        raise XLMUserError(f"--{option}: schedule '{value}' has a negative weight")
    return schedule


def bare_model(model):
    """The model inside fairseq's distributed wrappers (a ModuleProxyWrapper around a DDP module):
    ``model.module`` alone is still a wrapper under --ddp-backend legacy_ddp."""
    while not isinstance(model, BaseFairseqModel) and hasattr(model, "module"):
        model = model.module
    return model


class ObjectiveSchedule:
    """XLM's loop for a task with objectives (mixed into ``cross_lingual_lm`` and ``translation_lm``).

    Objectives are scheduled in XLM *iterations*: ``iteration_objectives(i)`` lists the objective
    steps of iteration i in XLM's order. By default one fairseq update is one iteration (every
    listed objective's mean loss back-propagated, one optimiser step on their mean); with
    ``--step-per-objective`` one update is one objective step of the current iteration, exactly
    XLM's loop, and iteration = update // ``iteration_length()``.
    """

    def iteration_objectives(self, iteration: int) -> List[str]:
        raise NotImplementedError

    def iteration_length(self, iteration: int) -> int:
        """Objective steps of an iteration: those with a weight (XLM's steps of weight 0 return at once)."""
        raise NotImplementedError

    def weight_breaks(self) -> List[int]:
        """Iterations at which an objective's weight may become or stop being 0 (``iteration_length``
        is constant between them)."""
        return []

    def objective_weight(self, key: str, iteration: int) -> float:
        return 1.0

    def iteration_rng(self, iteration: int) -> np.random.RandomState:
        """The same draws on every worker and after a resume."""
        return np.random.RandomState((self.cfg.seed * 1000003 + iteration) % (2**32))

    def locate_update(self, update_num: int) -> Tuple[int, int]:
        """--step-per-objective: (iteration, objective step within it) of an update. Iterations are
        as long as their objectives with a weight, so they shorten when a lambda reaches 0."""
        starts = sorted({0, *(b for b in self.weight_breaks() if b > 0)})
        first_update, idle_from = 0, None
        for start, end in zip(starts, starts[1:] + [None]):
            length = self.iteration_length(start)
            idle_from = (start if idle_from is None else idle_from) if length == 0 else None
            span = None if end is None else (end - start) * length
            if span is None or update_num < first_update + span:
                if length == 0:
                    raise XLMUserError(f"every objective's weight is 0 from iteration {idle_from} on: nothing to train")
                iteration, slot = divmod(update_num - first_update, length)
                return start + iteration, slot
            first_update += span
        raise AssertionError("unreachable")

    def update_objectives(self, update_num: int) -> Tuple[List[str], int]:
        """(objective keys the update trains, in order; its iteration). Objectives of weight 0 are
        left out, as XLM's steps of weight 0 return at once: by default one update is one iteration;
        with --step-per-objective one update is one step of an objective with a weight."""
        if not self.cfg.step_per_objective:
            plan = self.iteration_objectives(update_num)
            return [k for k in plan if self.objective_weight(k, update_num) > 0], update_num
        iteration, slot = self.locate_update(update_num)
        plan = [k for k in self.iteration_objectives(iteration) if self.objective_weight(k, iteration) > 0]
        return plan[slot : slot + 1], iteration

    def run_objectives(
        self, sample, model, criterion, keys, weights=None, optimizer=None, ignore_grad=False, batch_fn=None
    ):
        """Loss of each objective ``key`` of ``sample`` (times its weight), back-propagated one by one
        when training (so only one objective's graph is alive at a time).

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

        def forward(key):
            batch = sample[key]
            with torch.autocast(device_type=device.type, enabled=amp):
                if batch_fn is not None:
                    batch = batch_fn(key, batch)
                loss, ntokens, log = criterion(model, batch, key=key)
            ntokens = ntokens.clamp(min=1)
            common_size = totals["common_size"] = ntokens if totals["common_size"] is None else totals["common_size"]
            loss = loss * (common_size / ntokens)
            if weights is not None:
                loss = loss * weights[key]
            totals["loss"] += loss.detach()
            totals["size"] += common_size
            for k, v in log.items():
                totals["logs"][k] = totals["logs"].get(k, 0) + v
            return loss

        def backward(loss):
            if training:
                optimizer.backward(loss * 0 if ignore_grad else loss)

        def attempt(work, key):  # under data parallelism a failure waits for the agreement
            try:
                return work(key), None
            except Exception as e:
                if not distributed:
                    raise
                return None, (key, e)

        keys = [key for key in keys if sample.get(key)]
        # PyTorch's DDP all-reduces in the backward pass of a forward run outside no_sync: the
        # gradients of all but the last objective accumulate locally, one all-reduce per update,
        # after the ranks agree. fairseq's legacy_ddp all-reduces after train_step: all runs first.
        reduces_in_backward = training and hasattr(model, "no_sync")
        failure, last_loss = None, None
        with model.no_sync() if reduces_in_backward else contextlib.nullcontext():
            for key in keys[:-1]:
                _, failure = attempt(lambda k: backward(forward(k)), key)
                if failure:
                    break
        if keys and not failure:
            last_loss, failure = attempt(forward, keys[-1])
            if not failure and not reduces_in_backward:
                _, failure = attempt(lambda _: backward(last_loss), keys[-1])
        if distributed:  # no rank enters a gradient all-reduce while another has failed
            agree_on_failure(failure, device)
        if last_loss is not None and reduces_in_backward:
            backward(last_loss)
        return totals["loss"], totals["size"], totals["logs"]
