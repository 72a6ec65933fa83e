"""What an objective is, and the registry that turns a task's options into its objectives.

An :class:`Objective` is one training signal over some languages (MLM on en, TLM on en-de, BT
en -> de -> en): the option that lists it, its own options (a dataclass, ``Options``), how its datasets
are built from the data-bin (:meth:`Objective.build`, through the narrow view of its task that
``context.py`` gives), what is done to a batch before the loss (:meth:`Objective.prepare`: nothing, or
back-translation), its weight schedule and its draw rule in XLM's loop (:mod:`.schedule`). Adding one
is a class registered with :func:`register_objective` in a module of this package: its task's config
gains its options (:func:`with_objective_options`), and the task and the loop pick it up.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

from fairseq.tasks.online_backtranslation import PiecewiseLinearFn

from preprocess.langs import parse_steps
from xlm_fairseq.objectives.keys import ObjectiveKey
from xlm_fairseq.objectives.schedule import lambda_schedule

# family -> class, in the order of registration: the order of their options in a task's config, and
# so of a task's objectives and data (the modules are imported in name order, the classes in file order)
OBJECTIVES: Dict[str, Type["Objective"]] = {}


def register_objective(cls):
    """Register an objective class under its ``family``, with its own place in XLM's loop (``loop_order``)."""
    assert cls.option in {f.name for f in dataclasses.fields(cls.Options)}, (
        f"{cls.family!r}: {cls.option} not in its Options"
    )
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


@dataclass
class NoOptions:
    pass


class Objective:
    """One objective over ``langs``, with what it may use of its task (``context``, an
    :class:`~xlm_fairseq.objectives.context.ObjectiveContext`), its ``options`` (an instance of its
    ``Options``) and ``weight``, a schedule over XLM iterations.

    Class attributes say what it is: ``family`` (its key's prefix), ``task_name`` (the task whose config
    gains its ``Options``' fields as options), ``loop_order`` (its family's place in an iteration of XLM's
    loop, lowest first), ``n_langs``, ``option`` (the field of ``Options`` listing its steps; two families
    may share one, told apart by ``n_langs``: ``--mlm-steps en,en-de``), ``weight_option`` (the field of
    its schedule, or None: weight 1) and
    ``draw``: ``"sample"`` (XLM's ``shuf_order``: min(5, n) draws with replacement per iteration) or
    ``"each"`` (every objective of the family once per iteration, in random order); ``full_mask_validation``:
    validated a second time with every predicted position shown as the mask (XLM's perplexity)."""

    family: ClassVar[str]
    task_name: ClassVar[str]
    Options: ClassVar[type] = NoOptions
    loop_order: ClassVar[int]
    n_langs: ClassVar[int] = 1
    option: ClassVar[str]
    weight_option: ClassVar[Optional[str]] = None
    draw: ClassVar[str] = "sample"
    full_mask_validation: ClassVar[bool] = False

    def __init__(self, langs: Sequence[str], context=None, options=None, weight: Optional[PiecewiseLinearFn] = None):
        self.langs = tuple(langs)
        self.name = ObjectiveKey(self.family, self.langs)
        self.key = str(self.name)
        self.context = context
        self.options = options if options is not None else self.Options()
        self.weight = weight if weight is not None else lambda_schedule("1")
        self.sentences: Optional[int] = None  # training sentences, once the training data is built
        self.check()

    @classmethod
    def options_from(cls, cfg):
        """Its ``Options`` read from a task's config (a field the config lacks or leaves None: the default)."""
        values = {}
        for f in dataclasses.fields(cls.Options):
            value = getattr(cfg, f.name, None)
            if value is not None:
                values[f.name] = value
        return cls.Options(**values)

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
        return self.context.monolingual(split, self.source, epoch)

    def prepare(self, model, batch):
        """The batch the loss is computed on (back-translation builds a new one)."""
        return batch


def with_objective_options(base, task_name: str, name: str):
    """The config class ``name`` of task ``task_name``: ``base``'s fields (and docstring), then those of
    the ``Options`` of every objective registered for the task, in registration order (a field two
    objectives share, like MLM's and TLM's ``mlm_steps``, once)."""
    fields, seen = [], set(f.name for f in dataclasses.fields(base))
    for cls in OBJECTIVES.values():
        if cls.task_name != task_name:
            continue
        for f in dataclasses.fields(cls.Options):
            if f.name not in seen:
                seen.add(f.name)
                fields.append((f.name, f.type, field(default=f.default, metadata=dict(f.metadata))))
    return dataclasses.make_dataclass(
        name, fields, bases=(base,), namespace={"__doc__": base.__doc__, "__module__": base.__module__}
    )


def objective_options(config_class) -> List[str]:
    """The options of a task's config that list objectives, in the config's order: the order of the
    task's objectives and of its data."""
    options = {cls.option for cls in OBJECTIVES.values()}
    return [f.name for f in dataclasses.fields(config_class) if f.name in options]


def objectives_from_options(
    make: Callable[..., Objective], cfg, options: Sequence[str], langs: Sequence[str]
) -> List[Objective]:
    """The objectives ``cfg``'s ``options`` list (``--mlm-steps en,de,en-de``: MLM en, MLM de, TLM
    en-de), each made by ``make(cls, langs, weight)`` with its family's weight schedule, languages
    checked against ``langs``."""
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
        for step in parse_steps(getattr(cfg, option, ""), flag, tuple(sorted(classes)), langs):
            objectives.append(make(classes[len(step)], step, schedules.get(len(step))))
    return objectives
