"""MemoryBench's eleven metric families, one class each (docs/metrics.md "Wiring").

Locomo-k ``f1``, DialSim ``accuracy``, LexEval ``rougel``, NFCats ``score``, WritingPrompts
``meteor``, HelloBench ``avg_score`` (checklist judge), WritingBench ``score`` (critic role),
LimitGen-Syn ``accuracy`` + ``rating``, and the multi-metric families JuDGE / IdeaBench / JRE-L:
their sub-metrics (as the fusion computed them) and the one fused ``llm_as_judge_score``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from mnemoflow.data.validate import DataError
from mnemoflow.eval import (
    checklist_judge,
    dialsim_accuracy,
    ideabench,
    jrel,
    judge_doc,
    limitgen,
    nfcats_judge,
    writingbench_critic,
)
from mnemoflow.eval.fusion import REFERENCE_SAMPLING as FUSION_SAMPLING
from mnemoflow.eval.fusion import item_key
from mnemoflow.eval.memorybench_locomo_f1 import memorybench_locomo_f1, options_of
from mnemoflow.eval.memorybench_metrics import (
    FamilyJudge,
    Item,
    ItemScore,
    MetricFamily,
    from_judged,
    fusion_store,
    item_test_idx,
    metric_family,
    number_or_none,
)
from mnemoflow.eval.meteor import meteor
from mnemoflow.eval.rouge_l_zh import rouge_l_zh


def _locomo_category(info: dict[str, Any]) -> int | None:
    """``info.category`` as an int 1-5 (the release's int, or its digit text), else None."""
    category = info["category"]
    if isinstance(category, str) and category.strip().isdigit():
        category = int(category)
    if isinstance(category, bool) or not isinstance(category, int) or not 1 <= category <= 5:
        return None
    return category


@metric_family
class Locomo(MetricFamily):
    name = "Locomo"
    value = "f1"
    required_info = ("golden_answer", "category")

    def check(self, info: dict[str, Any], ident: Any) -> None:
        super().check(info, ident)
        category = _locomo_category(info)
        if category is None:
            raise DataError(
                f"questions: record {ident}: field 'info.category': {info['category']!r} is not "
                "one of 1-5"
            )
        if category == 5:
            try:
                options_of(info["golden_answer"])
            except ValueError:
                raise DataError(
                    f"questions: record {ident}: field 'info.golden_answer': a category-5 gold "
                    'must be the options object {"a": ..., "b": ...} (or its JSON text)'
                ) from None

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        category = _locomo_category(item.info)
        value = memorybench_locomo_f1(item.response, item.info["golden_answer"], category)
        return [ItemScore(self.value, float(value))]


@metric_family
class DialSim(MetricFamily):
    name = "DialSim"
    value = "accuracy"
    required_info = ("golden_answer",)
    failure_value = 0.0
    judge_task = dialsim_accuracy.TASK

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        gold = str(item.info["golden_answer"])
        value, raw, ok = await dialsim_accuracy.dialsim_accuracy(
            item.prompt, gold, item.response, gateway
        )
        # unscored (None) when the judge never gave a verdict: item_value counts failure_value
        return [ItemScore(self.value, value if ok else None, raw, ok)]


@metric_family
class LexEval(MetricFamily):
    name = "LexEval"
    value = "rougel"
    required_info = ("golden_answer",)

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        return [ItemScore(self.value, rouge_l_zh(item.response, str(item.info["golden_answer"])))]


@metric_family
class NFCats(MetricFamily):
    name = "NFCats"
    value = "score"
    failure_value = nfcats_judge.FAILURE_SCORE
    judge_task = nfcats_judge.TASK

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        value, raw, ok = await nfcats_judge.nfcats_score(item.prompt, item.response, gateway)
        return [ItemScore(self.value, value if ok else None, raw, ok)]


@metric_family
class WritingPrompts(MetricFamily):
    name = "WritingPrompts"
    value = "meteor"
    required_info = ("golden_answer",)

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        # CPU-bound (WordNet lookups): off the event loop, so other items keep calling
        gold = str(item.info["golden_answer"])
        return [ItemScore(self.value, await asyncio.to_thread(meteor, gold, item.response))]


class RubricJudged(MetricFamily):
    """A family scored by one judge call that reads one rubric of the item's ``info`` (HelloBench's
    checklist, WritingBench's criteria): ``rate(gateway, prompt, response, rubric)``."""

    rubric: ClassVar[str]
    rate: ClassVar[Callable[..., Awaitable[Any]]]

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        rate = type(self).rate
        return [
            from_judged(await rate(gateway, item.prompt, item.response, item.info[self.rubric]))
        ]


@metric_family
class HelloBench(RubricJudged):
    name = "HelloBench"
    value = "avg_score"
    rubric = "checklist"
    required_info = (rubric,)
    rate = checklist_judge.checklist_score
    failure_value = 0.0
    judge = FamilyJudge(
        "hellobench_checklist",
        checklist_judge.PROMPT_VERSION,
        "judge",
        checklist_judge.REFERENCE_SAMPLING,
        (
            "HelloBench-Academic&Knowledge-QA",
            "HelloBench-Academic&Knowledge-Writing",
            "HelloBench-Creative&Design",
        ),
    )

    def check(self, info: dict[str, Any], ident: Any) -> None:
        super().check(info, ident)
        if not (isinstance(info["checklist"], list) and info["checklist"]):
            raise DataError(
                f"questions: record {ident}: field 'info.checklist': not a non-empty list"
            )


@metric_family
class WritingBench(RubricJudged):
    name = "WritingBench"
    value = "score"
    rubric = "criteria"
    required_info = (rubric,)
    rate = writingbench_critic.critic_score
    failure_value = 1.0  # the bottom of the critic's 1-10 scale
    judge = FamilyJudge(
        "writingbench_critic",
        writingbench_critic.PROMPT_VERSION,
        writingbench_critic.ROLE,
        writingbench_critic.REFERENCE_SAMPLING,
        (
            "WritingBench-Politics&Law",
            "WritingBench-Academic&Engineering",
            "WritingBench-Creative&Design",
        ),
    )


@metric_family
class LimitGen(MetricFamily):
    name = "LimitGen"
    value = "rating"
    sub_metrics = ("accuracy",)
    required_info = ("category", "ground_truth")
    failure_value = 0.0
    judge = FamilyJudge(
        "limitgen", limitgen.PROMPT_VERSION, "judge", limitgen.REFERENCE_SAMPLING, ("LimitGen-Syn",)
    )

    def check(self, info: dict[str, Any], ident: Any) -> None:
        super().check(info, ident)
        if info["category"] not in limitgen.ERROR_TYPES:
            raise DataError(
                f"questions: record {ident}: field 'info.category': {info['category']!r} is not "
                f"one of {sorted(limitgen.ERROR_TYPES)}"
            )

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        judged = await limitgen.limitgen_rating(gateway, item.response, item.info)
        accuracy = number_or_none(judged.details.get("accuracy"))
        return [
            ItemScore("accuracy", accuracy, "", judged.parse_ok, judged.prompt_version),
            from_judged(judged),
        ]


#: Fusions being asked right now, by (store, item key): a second caller for the same item waits
#: for the first one's answer instead of asking again.
_IN_FLIGHT: dict[tuple[int, str], asyncio.Future] = {}


class Fused(MetricFamily):
    """A multi-metric family: its ``sub_metrics`` fused into one 1-10 score by a judge call
    (``fuse``), asked once per item and kept in the fusion store."""

    value = "llm_as_judge_score"
    failure_value = 1.0  # the bottom of the fused 1-10 scale
    #: ``fuse(gateway, test_idx, prompt, response, info, store, bertscore_model)`` -> JudgedScore
    #: whose details hold the sub-metrics as computed.
    fuse: ClassVar[Callable[..., Awaitable[Any]]]
    #: Sub-metric -> the ``sub_raw_replies`` key of the judge replies it came from.
    raw_replies_of: ClassVar[dict[str, str]] = {}

    async def score(
        self, item: Item, gateway: Any, *, fusion: Any = None, bertscore: Any = None
    ) -> list[ItemScore]:
        """The sub-metrics (as computed, stored in the fused score's details), then the fused
        score."""
        judged = await self._fused(item, gateway, fusion, bertscore)
        details = judged.details or {}
        subs = details.get("sub_metrics", {})
        failures = set(details.get("sub_parse_failures", []))
        raw = details.get("sub_raw_replies", {})
        out = []
        for name in self.sub_metrics:
            key = self.raw_replies_of.get(name)
            replies = raw.get(key) if key else None
            out.append(
                ItemScore(
                    name,
                    number_or_none(subs.get(name)),
                    json.dumps(replies, ensure_ascii=False) if replies else "",
                    name not in failures,
                    judged.prompt_version if replies else "",
                )
            )
        return [*out, from_judged(judged)]

    async def _fused(self, item: Item, gateway: Any, fusion: Any, bertscore: Any):
        """The fused score of the item: stored, or computed and stored (once, however many
        callers ask at the same time)."""
        store = fusion_store(fusion)
        test_idx = item_test_idx(item.question)
        slot = (id(store), item_key(self.name, test_idx, item.response))
        task = _IN_FLIGHT.get(slot)
        if task is None:
            # bertscore: None (bundled MiniLM), one BertScoreModel, or {family: BertScoreModel}
            model = bertscore.get(self.name) if isinstance(bertscore, Mapping) else bertscore
            task = asyncio.ensure_future(
                self.fuse(gateway, test_idx, item.prompt, item.response, item.info, store, model)
            )
            _IN_FLIGHT[slot] = task
            task.add_done_callback(lambda _: _IN_FLIGHT.pop(slot, None))
        return await asyncio.shield(task)


@metric_family
class JuDGE(Fused):
    name = "JuDGE"
    sub_metrics = (
        "reasoning_meteor",
        "judge_meteor",
        "reasoning_bert_score",
        "judge_bert_score",
        "crime_recall",
        "crime_precision",
        "crime_f1",
        "penalcode_index_recall",
        "penalcode_index_precision",
        "penalcode_index_f1",
        "time_score",
        "amount_score",
    )
    required_info = ("golden_answer",)
    fuse = staticmethod(judge_doc.judge_doc_score)
    judge = FamilyJudge(
        "judge_doc_fusion", judge_doc.PROMPT_VERSION, "judge", FUSION_SAMPLING, ("JuDGE",)
    )


@metric_family
class IdeaBench(Fused):
    name = "IdeaBench"
    sub_metrics = (
        "bert_score",
        "llm_rating_score",
        "llm_novelty_ranking_score",
        "llm_feasibility_ranking_score",
    )
    required_info = ("abstract",)
    fuse = staticmethod(ideabench.ideabench_score)
    judge = FamilyJudge(
        "ideabench", ideabench.PROMPT_VERSION, "judge", FUSION_SAMPLING, ("IdeaBench",)
    )
    raw_replies_of = {
        "llm_rating_score": "overlap",
        "llm_novelty_ranking_score": "novelty",
        "llm_feasibility_ranking_score": "feasibility",
    }


@metric_family
class JREL(Fused):
    name = "JRE-L"
    sub_metrics = ("Rouge-L", "BERTScore-F1", "CLI", "FKGL", "DCRS")
    required_info = ("pr-abstract",)
    fuse = staticmethod(jrel.jrel_score)
    judge = FamilyJudge("jrel_fusion", jrel.PROMPT_VERSION, "judge", FUSION_SAMPLING, ("JRE-L",))
