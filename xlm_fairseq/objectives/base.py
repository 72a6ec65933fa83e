"""What an objective is, and the registry that turns a task's options into its objectives.

An :class:`Objective` is one training signal over some languages (MLM on en, TLM on en-de, BT
en -> de -> en): the option that lists it, how its datasets are built from the data-bin
(:meth:`Objective.build`), what is done to a batch before the loss (:meth:`Objective.prepare`: nothing,
or back-translation), its weight schedule and its draw rule in XLM's loop (:mod:`.schedule`). A
task holds a list of them; adding one is a class registered with :func:`register_objective` (and the
option on its task's config).
"""

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple, Type

from fairseq.tasks.online_backtranslation import PiecewiseLinearFn

from preprocess.langs import parse_steps
from xlm_fairseq.objectives.keys import ObjectiveKey
from xlm_fairseq.objectives.schedule import lambda_schedule

OBJECTIVES: Dict[str, Type["Objective"]] = {}  # family -> class


def register_objective(cls):
    """Register an objective class under its ``family``, with its own place in XLM's loop (``loop_order``)."""
    assert cls.family not in OBJECTIVES, f"objective family {cls.family!r} registered twice"
    taken = {c.loop_order: c.family for c in OBJECTIVES.values()}
    assert cls.loop_order not in taken, (
        f"{cls.family!r}: loop_order {cls.loop_order} is {taken.get(cls.loop_order)!r}'s"
    )
    OBJECTIVES[cls.family] = cls
    return cls


def loop_families() -> List[str]:
    """The families in the order XLM's loop draws them in an iteration (CLM, MLM, TLM, span, then AE, MT, BT)."""
    return sorted(OBJECTIVES, key=lambda family: OBJECTIVES[family].loop_order)


class MissingData(Exception):
    """An objective's data file is absent on a split: the task decides whether that stops it (training)
    or leaves the objective out (validation)."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


@dataclass
class Built:
    """An objective's dataset for one split: its items, the data file they are read from, how many
    training sentences they come from (XLM's language sampling), the datasets of its stack whose
    draws follow the zip's round (masks, noise), and the limit on each column of its sizes (XLM's
    --max_len)."""

    dataset: object
    source: str
    sentences: int
    drawing: list = field(default_factory=list)
    max_size: Optional[Tuple[int, ...]] = None


class Objective:
    """One objective over ``langs``, built by ``task`` (whose ``dictionary``, ``lang2id``, ``cfg`` and
    data-bin readers it uses) with ``weight``, a schedule over XLM iterations.

    Class attributes say what it is: ``family`` (its key's prefix), ``loop_order`` (its family's place in
    an iteration of XLM's loop, lowest first), ``n_langs``, ``option`` (the
    task option listing its steps; two families may share one, told apart by ``n_langs``:
    ``--mlm-steps en,en-de``), ``weight_option`` (the option of its schedule, or None: weight 1) and
    ``draw``: ``"sample"`` (XLM's ``shuf_order``: min(5, n) draws with replacement per iteration) or
    ``"each"`` (every objective of the family once per iteration, in random order); ``full_mask_validation``:
    validated a second time with every predicted position shown as the mask (XLM's perplexity)."""

    family: ClassVar[str]
    loop_order: ClassVar[int]
    n_langs: ClassVar[int] = 1
    option: ClassVar[str]
    weight_option: ClassVar[Optional[str]] = None
    draw: ClassVar[str] = "sample"
    full_mask_validation: ClassVar[bool] = False

    def __init__(self, langs: Sequence[str], task, weight: Optional[PiecewiseLinearFn] = None):
        self.langs = tuple(langs)
        self.name = ObjectiveKey(self.family, self.langs)
        self.key = str(self.name)
        self.task = task
        self.weight = weight if weight is not None else lambda_schedule("1")
        self.sentences: Optional[int] = None  # training sentences, once the training data is built
        self.check()

    @property
    def source(self) -> str:
        return self.name.source

    @property
    def target(self) -> str:
        return self.name.target

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key})"

    def check(self) -> None:
        """Refuse languages the objective cannot train on (an XLMUserError naming the option)."""

    def build(self, split: str, epoch: int = 1) -> Built:
        """The objective's dataset of ``split``; MissingData when its data file is absent."""
        raise NotImplementedError

    def monolingual(self, split: str, epoch: int = 1):
        """(the sentences of its first language on ``split``, their data-bin path); MissingData when
        there are none."""
        path = self.task.data_path(split, self.source, epoch)
        sentences = self.task.load_indexed(path)
        if sentences is None:
            raise MissingData(path, f"missing monolingual data {path}.bin")
        return sentences, path

    def prepare(self, model, batch):
        """The batch the loss is computed on (back-translation builds a new one)."""
        return batch


def objective_options(config_class) -> List[str]:
    """The options of a task's config that list objectives, in the config's order: the order of the
    task's objectives and of its data."""
    options = {cls.option for cls in OBJECTIVES.values()}
    return [f.name for f in dataclasses.fields(config_class) if f.name in options]


def objectives_from_options(task, cfg, options: Sequence[str]) -> List[Objective]:
    """The objectives ``cfg``'s ``options`` list (``--mlm-steps en,de,en-de``: MLM en, MLM de, TLM
    en-de), each with its family's weight schedule, languages checked against the task's."""
    objectives = []
    for option in options:
        classes = {cls.n_langs: cls for cls in OBJECTIVES.values() if cls.option == option}
        flag = f"--{option.replace('_', '-')}"
        # one schedule per family, checked even when the option lists no step
        schedules = {
            n: lambda_schedule(getattr(cfg, cls.weight_option), cls.weight_option.replace("_", "-"))
            for n, cls in classes.items()
            if cls.weight_option
        }
        for langs in parse_steps(getattr(cfg, option, ""), flag, tuple(sorted(classes)), task.langs):
            objectives.append(classes[len(langs)](langs, task, schedules.get(len(langs))))
    return objectives
