"""XLM's loop over a task's objectives: which objectives an update trains (:class:`XLMLoop`) and the
numbers it is built from (weight schedules, language sampling). The step that runs them is the tasks'
(:func:`xlm_fairseq.tasks.step.run_objectives`)."""

from typing import Dict, List, Sequence, Tuple

import numpy as np
from fairseq.tasks.online_backtranslation import PiecewiseLinearFn

from xlm_fairseq.errors import XLMUserError

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


def sampling_probs(sizes: Dict[str, float], alpha: float) -> Dict[str, float]:
    """XLM's ``set_sampling_probs``: p_l = n_l / N, then p_l^alpha renormalised."""
    keys = list(sizes)
    p = np.array([float(sizes[k]) for k in keys])
    p = p / p.sum()
    p = p**alpha
    p = p / p.sum()
    return dict(zip(keys, p))


class XLMLoop:
    """XLM's loop over ``objectives`` (each with ``key``, ``family``, ``draw``, ``weight`` and, for
    language sampling, ``sentences``), drawn family by family in ``family_order``.

    Objectives are scheduled in XLM *iterations*: ``iteration_objectives(i)`` lists the objective
    steps of iteration i in XLM's order. By default one fairseq update is one iteration (every
    listed objective's mean loss back-propagated, one optimiser step on their mean); with
    ``step_per_objective`` one update is one objective step of the current iteration, exactly
    XLM's loop, and iteration = update // ``iteration_length()``. The objectives of a family share
    one weight schedule (XLM's lambda per family); ``sampling_alpha`` (XLM's --lg_sampling_factor,
    -1: uniform) weighs the draws of ``"sample"`` families by their training sentences."""

    def __init__(
        self, objectives, family_order: Sequence[str], seed: int, step_per_objective=False, sampling_alpha=-1.0
    ):
        self.families = [[o for o in objectives if o.family == f] for f in family_order]
        self.families = [family for family in self.families if family]
        self.seed = seed
        self.step_per_objective = step_per_objective
        self.sampling_alpha = sampling_alpha

    def iteration_rng(self, iteration: int) -> np.random.RandomState:
        """The same draws on every worker and after a resume."""
        return np.random.RandomState((self.seed * 1000003 + iteration) % (2**32))

    def draws(self, family) -> int:
        return min(MAX_DRAWS_PER_FAMILY, len(family)) if family[0].draw == "sample" else len(family)

    def iteration_length(self, iteration: int = 0) -> int:
        """Objective steps of an iteration: those with a weight (XLM's steps of weight 0 return at once)."""
        return sum(self.draws(family) for family in self.families if family[0].weight(iteration) > 0)

    def weight_breaks(self) -> List[int]:
        """Each schedule point and the iteration after it: between them every weight is linear between
        two non-negative values, so it is 0 throughout or at one end only, and ``iteration_length``
        is constant."""
        pieces = {x for family in self.families for x, _ in family[0].weight.pieces}
        return sorted({x + d for x in pieces for d in (0, 1)})

    def probabilities(self, family):
        """XLM's ``shuf_order`` probabilities of a sampled family: None (uniform), or p^alpha by sentences."""
        if self.sampling_alpha == -1:
            return None
        if any(o.sentences is None for o in family):
            raise XLMUserError("--lg-sampling-factor needs the training data loaded")
        probs = sampling_probs({o.key: o.sentences for o in family}, self.sampling_alpha)
        return [probs[o.key] for o in family]

    def iteration_objectives(self, iteration: int) -> list:
        """XLM's ``shuf_order`` per family, in the loop's family order: a ``"sample"`` family min(5, n)
        draws with replacement, an ``"each"`` family each objective once in random order."""
        rng = self.iteration_rng(iteration)
        plan = []
        for family in self.families:
            if family[0].draw == "sample":
                picks = rng.choice(len(family), size=self.draws(family), replace=True, p=self.probabilities(family))
            else:
                picks = rng.permutation(len(family))
            plan += [family[i] for i in picks]
        return plan

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

    def update_objectives(self, update_num: int) -> Tuple[list, int]:
        """(objectives the update trains, in order; its iteration). Objectives of weight 0 are left
        out, as XLM's steps of weight 0 return at once: by default one update is one iteration; with
        step_per_objective one update is one step of an objective with a weight."""
        if not self.step_per_objective:
            plan = self.iteration_objectives(update_num)
            return [o for o in plan if o.weight(update_num) > 0], update_num
        iteration, slot = self.locate_update(update_num)
        plan = [o for o in self.iteration_objectives(iteration) if o.weight(iteration) > 0]
        return plan[slot : slot + 1], iteration
