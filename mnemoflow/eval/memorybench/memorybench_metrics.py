"""MemoryBench's per-item metrics behind one entry point, for the workflow, the simulators and
``mnemoflow score``: each of the 28 dataset configurations scored as the reference scores it.

- A dataset family (datasets named ``Locomo-0``, ``HelloBench-...``) is one :class:`MetricFamily`
  subclass, registered in :data:`FAMILIES` with :func:`metric_family`: it states its value (the
  metric normalization uses), its sub-metrics, the ``info`` fields it reads and its failure value
  beside its scoring function. The built-in families are in
  :mod:`mnemoflow.eval.memorybench.memorybench_families` (docs/metrics.md "Wiring").
- :func:`evaluate_item_all` scores one response to one row of the ``questions`` table with ALL of
  the family's metrics, a list of :class:`ItemScore`; :func:`evaluate_item` returns only the one
  normalization uses (the single-score callers' entry point).
- The fusion call of a multi-metric item (JuDGE / IdeaBench / JRE-L) is asked once and kept in a
  :class:`FusionStore` (the reference re-asks at every summary, so its numbers drift): pass
  ``fusion=`` a store or a JSON path (one per scoring output); without one, a process-wide
  in-memory store is used.
- :func:`check_supported` fails early with one line for a dataset that is not MemoryBench's.
- :func:`item_value` turns an item's scores into the one number normalization uses, as the
  reference's ``summary_results`` does (the family's value; bool -> 1/0); a judge that never
  parsed gives the family's failure value (the bottom of its scale), counted.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError
from mnemoflow.eval.memorybench.fusion import FusionStore
from mnemoflow.registry import Registry


@dataclass
class ItemScore:
    """One metric of one item: ``value`` None only when the metric could not be computed;
    ``raw_reply`` the judge's replies ("" for model-free metrics); ``parse_ok`` false when the
    judge's reply never parsed (then ``value`` is None or the metric's failure value);
    ``prompt_version`` the judge prompt that produced it ("" for model-free metrics)."""

    metric: str
    value: float | None
    raw_reply: str = ""
    parse_ok: bool = True
    prompt_version: str = ""


@dataclass(frozen=True)
class Item:
    """What a family scores: the ``questions`` row, its prompt and ``info``, and the response."""

    question: Mapping[str, Any]
    prompt: str
    info: dict[str, Any]
    response: str


@dataclass(frozen=True)
class FamilyJudge:
    """The judge behind a family's value, for ``judge.json``: its name there, its prompt version,
    the role that answers it, the reference's sampling and the datasets it scores."""

    name: str
    prompt_version: str
    role: str
    reference_sampling: dict[str, Any]
    datasets: tuple[str, ...]


@dataclass(frozen=True)
class SimulatedUser:
    """The LLM simulated user of one dataset (docs/feedback.md): the arguments of the
    reference's ``build_base_system_prompt`` (persona, expertise, criteria, additional context)
    and ``build_base_user_prompt``'s task, filled for the dataset; ``context(info, gold)`` the
    privileged EVALUATION CONTEXT of one item ("" where the reference's is empty)."""

    persona: str
    expertise: str
    criteria: tuple[str, ...]
    additional_context: str
    task: str
    context: Callable[[dict[str, Any], str], str]


class MetricFamily(ABC):
    """The metric of one MemoryBench dataset family, stated once.

    ``name`` is the prefix of the family's dataset names; ``value`` the metric whose value
    normalization uses; ``sub_metrics`` the other metrics :meth:`score` reports, in the
    reference's order; ``required_info`` the ``info`` fields it reads (a record without one fails
    with one line); ``failure_value`` an item's value when its judge never gave a parseable reply,
    the bottom of the metric's scale (None: a model-free metric, which always has a value);
    ``judge`` the judge behind the value, or ``judge_task`` the task of a judge whose prompt the
    reference fixes.

    The same class states the family under MemoryBench's judge protocol (``scoring: judge``,
    :mod:`~mnemoflow.eval.memorybench.memorybench_judge_protocol`): :meth:`judge_score`, the
    ``info`` fields it reads (``judge_required_info``; None: ``required_info``) and an unscored
    item's value (``judge_failure_value``, on the 0-1 scale).

    And the simulated user of its feedback dialogues: ``user_persona``, ``user_expertise``,
    ``user_criteria``, ``user_additional_context``, ``user_task`` (the reference's texts,
    LittleDinoC/MemoryBench-code 59d1b60, verbatim) and :meth:`user_context`; no persona: the
    rule-based user (Locomo, DialSim), which scores the answer with the family's metric.
    """

    name: ClassVar[str]
    value: ClassVar[str]
    sub_metrics: ClassVar[tuple[str, ...]] = ()
    required_info: ClassVar[tuple[str, ...]] = ()
    failure_value: ClassVar[float | None] = None
    judge: ClassVar[FamilyJudge | None] = None
    judge_task: ClassVar[str] = ""
    judge_required_info: ClassVar[tuple[str, ...] | None] = None
    judge_failure_value: ClassVar[float] = 0.0  # the bottom of the judge's 0-1 scale

    user_persona: ClassVar[str] = ""
    user_expertise: ClassVar[str] = ""
    user_criteria: ClassVar[tuple[str, ...]] = ()
    user_additional_context: ClassVar[str] = ""
    user_task: ClassVar[str] = ""

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        """The simulated user's privileged EVALUATION CONTEXT of one item ("": none)."""
        return ""

    def simulated_user(self, dataset: str) -> SimulatedUser | None:
        """The LLM simulated user of ``dataset`` (None: the rule-based one)."""
        if not self.user_persona:
            return None
        return SimulatedUser(
            self.user_persona,
            self.user_expertise,
            self.user_criteria,
            self.user_additional_context,
            self.user_task,
            functools.partial(self.user_context, dataset),
        )

    def check(self, info: dict[str, Any], ident: Any) -> None:
        """Raise a one-line DataError for an ``info`` the metric cannot read."""
        _require(self.required_info, info, ident)

    def check_judged(self, info: dict[str, Any], ident: Any) -> None:
        """Raise a one-line DataError for an ``info`` the judge protocol cannot read."""
        required = self.judge_required_info
        _require(self.required_info if required is None else required, info, ident)

    @abstractmethod
    async def score(
        self, item: Item, gateway: Any, *, fusion: Any = None, bertscore: Any = None
    ) -> list[ItemScore]:
        """Every metric of the item's response (``fusion``, ``bertscore``: see
        :func:`evaluate_item_all`)."""

    @abstractmethod
    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        """The item's ``llm_judge_score`` under MemoryBench's judge protocol."""


def _require(names: Iterable[str], info: dict[str, Any], ident: Any) -> None:
    for name in names:
        if name not in info:
            raise DataError(f"questions: record {ident}: missing field 'info.{name}'")


#: MemoryBench metric families by name (the prefix of their datasets' names).
FAMILIES = Registry(
    "MemoryBench metric family", builtin_modules=["mnemoflow.eval.memorybench.memorybench_families"]
)


def metric_family(cls: type[MetricFamily]) -> type[MetricFamily]:
    """Class decorator: register a family under its ``name``."""
    return FAMILIES.register(cls.name)(cls)


def family_of(dataset: str) -> str:
    """The dataset's family (``Locomo``, ``HelloBench``, ...); ConfigError for a stranger."""
    matches = [name for name in FAMILIES.names() if dataset.startswith(name)]
    if not matches:
        raise ConfigError(
            f"memorybench: dataset {dataset!r} is not a MemoryBench dataset; families: "
            f"{', '.join(FAMILIES.names())}"
        )
    return max(matches, key=len)


def family_for(dataset: str) -> MetricFamily:
    """The family object that scores ``dataset`` (both protocols); ConfigError for a stranger."""
    return FAMILIES.get(family_of(dataset))()


def simulated_user(dataset: str) -> SimulatedUser | None:
    """The simulated user of ``dataset``'s feedback dialogues (None: rule-based); ConfigError
    naming the dataset and the families for a stranger."""
    return family_for(dataset).simulated_user(dataset)


def is_judged(dataset: str) -> bool:
    """Whether a dataset's value comes from a judge that can fail to give one (its family has a
    ``failure_value``): there, a mean over the judged items and one over all items can differ."""
    return family_for(dataset).failure_value is not None


def metric_of(dataset: str) -> tuple[str, bool]:
    """(the metric whose value normalization uses, whether mnemoflow computes it: always)."""
    return family_for(dataset).value, True


def check_supported(datasets: Iterable[str]) -> None:
    """Raise a one-line ConfigError for the first dataset that is not a MemoryBench one."""
    for dataset in datasets:
        metric_of(dataset)


def _meta(question: Mapping[str, Any]) -> dict[str, Any]:
    meta = question.get("meta")
    if isinstance(meta, str):
        meta = json.loads(meta) if meta else {}
    return meta if isinstance(meta, dict) else {}


def _info(question: Mapping[str, Any]) -> dict[str, Any]:
    info = _meta(question).get("info")
    if not isinstance(info, dict):
        ident = question.get("question_id", question.get("dataset"))
        raise DataError(f"questions: record {ident}: missing field 'info' in meta")
    return info


def item_test_idx(question: Mapping[str, Any]) -> Any:
    """The item's test_idx (the fusion store's key): meta, else the question_id's tail."""
    meta = _meta(question)
    if "test_idx" in meta:
        return meta["test_idx"]
    return str(question.get("question_id", "")).rsplit(":", 1)[-1]


#: Stores by file, so every call naming the same file shares one in-memory copy (two copies of
#: one file would overwrite each other's records); ``None`` -> the process-wide store.
_STORES: dict[str | None, FusionStore] = {}


def fusion_store(fusion: FusionStore | str | Path | None = None) -> FusionStore:
    """The :class:`~mnemoflow.eval.memorybench.fusion.FusionStore` for ``fusion``: a store, a JSON
    path, or None (one in-memory store per process: asked once per process, not across runs)."""
    if isinstance(fusion, FusionStore):
        return fusion
    key = None if fusion is None else str(Path(fusion).expanduser().resolve())
    if key not in _STORES:
        _STORES[key] = FusionStore(key)
    return _STORES[key]


def number_or_none(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value)


def from_judged(judged) -> ItemScore:
    """The ItemScore of a :class:`~mnemoflow.eval.memorybench.judged_score.JudgedScore`."""
    return ItemScore(
        judged.metric,
        number_or_none(judged.value),
        judged.raw_reply,
        judged.parse_ok,
        judged.prompt_version,
    )


async def evaluate_item_all(
    question: Mapping[str, Any],
    response: str,
    gateway,
    *,
    fusion: Any = None,
    bertscore: Any = None,
) -> list[ItemScore]:
    """Every metric of ``response`` to ``question`` (a row of the ``questions`` table, as a dict).

    ``fusion``: where the fused scores of JuDGE / IdeaBench / JRE-L are kept (a FusionStore or a
    JSON path; see :func:`fusion_store`); ``bertscore``: the BERTScore model (None: the bundled
    MiniLM, not the reference's; a BertScoreModel; or one per family ``{"JuDGE": ...}``).
    """
    dataset = str(question["dataset"])
    family = family_for(dataset)
    info = _info(question)
    response = "" if response is None else str(response)
    family.check(info, question.get("question_id", dataset))
    item = Item(question, str(question.get("question", "")), info, response)
    return await family.score(item, gateway, fusion=fusion, bertscore=bertscore)


def primary(dataset: str, scores: Iterable[ItemScore]) -> ItemScore:
    """The score among ``scores`` whose value normalization uses."""
    metric, _ = metric_of(dataset)
    for score in scores:
        if score.metric == metric:
            return score
    raise ValueError(f"{dataset}: no score of metric {metric!r}")


async def evaluate_item(
    question: Mapping[str, Any], response: str, gateway, **options: Any
) -> ItemScore:
    """The one score of ``response`` normalization uses; ``options`` (``fusion``, ``bertscore``)
    as :func:`evaluate_item_all` takes them."""
    scores = await evaluate_item_all(question, response, gateway, **options)
    return primary(str(question["dataset"]), scores)


def metric_value(
    dataset: str, scores: ItemScore | Iterable[ItemScore] | Mapping[str, Any], metric: str
) -> Any:
    """The raw value of ``metric`` among an item's ``scores`` (an :class:`ItemScore`, a list of
    them, or a ``{metric: value}`` mapping); a missing metric is an error naming the dataset."""
    if isinstance(scores, ItemScore):
        scores = [scores]
    if not isinstance(scores, Mapping):
        scores = {s.metric: s.value for s in scores}
    if metric not in scores:
        raise ValueError(f"{dataset}: no value of metric {metric!r} in {sorted(scores)}")
    return scores[metric]


def item_value(dataset: str, scores: ItemScore | Iterable[ItemScore] | Mapping[str, Any]) -> float:
    """The one per-item number normalization uses (the reference's rule, bool -> 1/0).

    ``scores``: an :class:`ItemScore`, the list :func:`evaluate_item_all` returns, or a
    ``{metric: value}`` mapping (the reference's ``metrics`` of an item). The value of the
    family's ``value`` metric is taken; a judge that never parsed gives its ``failure_value``.
    """
    family = family_for(dataset)
    metric = family.value
    value = metric_value(dataset, scores, metric)
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if value is None:
        if family.failure_value is None:
            raise ValueError(f"metric {metric!r} has no value")
        return family.failure_value
    if isinstance(value, int | float):
        return float(value)
    raise ValueError(f"metric {metric!r}: {value!r} is not a number")
