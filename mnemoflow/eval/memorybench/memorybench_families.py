"""MemoryBench's eleven metric families, one class each (docs/metrics.md "Wiring").

Locomo-k ``f1``, DialSim ``accuracy``, LexEval ``rougel``, NFCats ``score``, WritingPrompts
``meteor``, HelloBench ``avg_score`` (checklist judge), WritingBench ``score`` (critic role),
LimitGen-Syn ``accuracy`` + ``rating``, and the multi-metric families JuDGE / IdeaBench / JRE-L:
their sub-metrics (as the fusion computed them) and the one fused ``llm_as_judge_score``.

Each class also states its family under the judge protocol (``judge_score``: the calls of
:mod:`~mnemoflow.eval.memorybench.memorybench_judge_protocol`, which finds the family here): adding
a family is one class in this module and its worked example.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from mnemoflow.data.limitgen import aspect_of
from mnemoflow.data.validate import DataError
from mnemoflow.eval.memorybench import (
    checklist_judge,
    dialsim_accuracy,
    ideabench,
    jrel,
    judge_doc,
    limitgen,
    nfcats_judge,
    writingbench_critic,
)
from mnemoflow.eval.memorybench import memorybench_judge_protocol as jp
from mnemoflow.eval.memorybench import memorybench_judge_texts as texts
from mnemoflow.eval.memorybench.fusion import REFERENCE_SAMPLING as FUSION_SAMPLING
from mnemoflow.eval.memorybench.fusion import item_key
from mnemoflow.eval.memorybench.memorybench_judge_texts import WRITINGPROMPTS_RUBRIC
from mnemoflow.eval.memorybench.memorybench_locomo_f1 import memorybench_locomo_f1, options_of
from mnemoflow.eval.memorybench.memorybench_metrics import (
    FamilyJudge,
    Item,
    ItemScore,
    MetricFamily,
    SimulatedUser,
    from_judged,
    fusion_store,
    item_test_idx,
    metric_family,
    number_or_none,
)
from mnemoflow.eval.metrics.meteor import meteor
from mnemoflow.eval.metrics.rouge_l_zh import rouge_l_zh


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
    judge_required_info = ("golden_answer",)

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

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        return await jp.score_locomo(item.question, item.info, item.response, gateway)


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

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        return await jp.score_dialsim(item.question, item.info, item.response, gateway)


@metric_family
class LexEval(MetricFamily):
    name = "LexEval"
    value = "rougel"
    required_info = ("golden_answer",)

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        return [ItemScore(self.value, rouge_l_zh(item.response, str(item.info["golden_answer"])))]

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        dataset = str(item.question["dataset"])
        rubric = jp.lexeval_rubric(dataset, item.response)
        return await jp.score_shared(
            dataset, item.question, item.info, item.response, rubric, gateway, stops=True
        )

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are an AI assistant simulating a knowledgeable user seeking legal information or "
        "assistance."
    )
    user_expertise = (
        "You have domain expertise to recognize quality legal information without revealing "
        "specific ground truth details."
    )
    user_criteria = (
        "Legal accuracy and correctness of information provided",
        "Completeness in addressing the legal question or issue",
        "Clarity and understandability for a non-lawyer",
        "Practical usefulness of the advice or information",
        "Whether the assistant properly acknowledged limitations or suggested consulting a "
        "lawyer when appropriate",
    )
    user_additional_context = (
        "Natural conversation flow and user satisfaction with legal guidance received"
    )
    user_task = "seeking accurate legal information or guidance"

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        if not gold:
            return ""
        return (
            f"Reference Answer: {gold}\n"
            "Use this reference to evaluate the accuracy and completeness of the legal "
            "information provided."
        )


@metric_family
class NFCats(MetricFamily):
    name = "NFCats"
    value = "score"
    failure_value = nfcats_judge.FAILURE_SCORE
    judge_task = nfcats_judge.TASK
    judge_failure_value = 0.2  # 1-5 / 5 starts at 0.2 (the reference's own fallback score)

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        value, raw, ok = await nfcats_judge.nfcats_score(item.prompt, item.response, gateway)
        return [ItemScore(self.value, value if ok else None, raw, ok)]

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        return await jp.score_nfcats(item.question, item.info, item.response, gateway)

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are an AI assistant simulating a knowledgeable user asking various types of "
        "non-factoid questions that require thoughtful, comprehensive responses."
    )
    user_expertise = (
        "You can evaluate the quality of responses to different question types including "
        "comparisons, debates, evidence-based explanations, instructions, and experience-based "
        "questions."
    )
    user_criteria = (
        "Appropriateness of response type to the question category (comparison, debate, "
        "evidence-based, instruction, etc.)",
        "Completeness and thoroughness of the answer",
        "Logical structure and clarity of explanation",
        "Relevance and accuracy of information provided",
        "Practical usefulness and helpfulness to the questioner",
        "Balanced perspective when addressing debatable topics",
        "Clear step-by-step guidance for instructional questions",
    )
    user_additional_context = (
        "The questions span multiple categories including COMPARISON, DEBATE, EVIDENCE-BASED, "
        "INSTRUCTION, EXPERIENCE, REASON, and FACTOID. Each requires a different approach to "
        "provide a satisfactory response."
    )
    user_task = (
        "asking a non-factoid question that requires a thoughtful, comprehensive answer tailored "
        "to the question type"
    )

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        return (
            "This dataset contains non-factoid questions from various categories (COMPARISON, "
            "DEBATE, EVIDENCE-BASED, INSTRUCTION, EXPERIENCE, REASON, FACTOID). Evaluate whether "
            "the assistant's response appropriately addresses the type and nature of the question "
            "asked."
        )


@metric_family
class WritingPrompts(MetricFamily):
    name = "WritingPrompts"
    value = "meteor"
    required_info = ("golden_answer",)

    async def score(self, item: Item, gateway: Any, **options: Any) -> list[ItemScore]:
        # CPU-bound (WordNet lookups): off the event loop, so other items keep calling
        gold = str(item.info["golden_answer"])
        return [ItemScore(self.value, await asyncio.to_thread(meteor, gold, item.response))]

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        dataset, rubric = str(item.question["dataset"]), WRITINGPROMPTS_RUBRIC
        return await jp.score_shared(
            dataset, item.question, item.info, item.response, rubric, gateway
        )

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are simulating a creative writing enthusiast who has requested a story based on a "
        "specific prompt."
    )
    user_expertise = (
        "You have experience reading and evaluating creative writing, and can recognize engaging "
        "storytelling, character development, and narrative structure."
    )
    user_criteria = (
        "Creativity and originality in interpreting the prompt",
        "Narrative coherence and flow",
        "Engaging characters and dialogue",
        "Imaginative world-building and setting",
        "Emotional engagement and impact",
        "Writing quality and style",
    )
    user_additional_context = (
        "Focus on natural user responses that reflect appreciation for creative storytelling. "
        "Consider how well the story captures the essence of the original prompt while being "
        "entertaining and well-written."
    )
    user_task = "requesting a creative story based on a writing prompt"

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        if not gold:
            return ""
        return (
            f"Reference Story for Comparison:\n{gold}\n\n"
            "Use this reference story to evaluate how well the generated response interprets the "
            "prompt. Consider creativity, narrative quality, character development, and overall "
            "storytelling compared to this reference. Provide constructive feedback on strengths "
            "and areas for improvement."
        )


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

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        return await jp.score_hellobench(item.question, item.info, item.response, gateway)

    def check(self, info: dict[str, Any], ident: Any) -> None:
        super().check(info, ident)
        if not (isinstance(info["checklist"], list) and info["checklist"]):
            raise DataError(
                f"questions: record {ident}: field 'info.checklist': not a non-empty list"
            )

    # the simulated user (reference texts, verbatim)
    user_persona = "You are an AI assistant simulating a user seeking high-quality content."
    user_expertise = (
        "You have expertise to recognize well-crafted content that meets the specified standards "
        "and can evaluate responses based on quality criteria provided in the checklist."
    )
    user_criteria = (
        "Overall content quality",
        "Adherence to user requirements",
        "User satisfaction",
    )
    user_additional_context = (
        "Evaluate based on the specific checklist criteria provided, being fair and constructive."
    )
    user_task = "seeking high-quality content"

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        checklist = info.get("checklist") or []
        if not checklist:
            return ""
        text = "Quality Criteria (evaluate the response based on these standards):\n"
        for item in checklist:
            content = item.get("checklist_content", "") if isinstance(item, dict) else item
            text += f"- {content}\n"
        return text + (
            "\nUse these criteria to evaluate the response quality and provide feedback based on "
            "how well the content meets these standards."
        )


#: The reference's WritingBench domains (``_extract_criteria_info``), matched here against the
#: release's spelling ("WritingBench-Politics&Law"); the reference looks for "Politics & Law" and so
#: always says "General Writing" (memorybench.md 5.7), a bug not copied.
WRITINGBENCH_DOMAINS = (
    ("Politics&Law", "Politics & Law"),
    ("Academic&Engineering", "Academic & Engineering"),
    ("Literature&Arts", "Literature & Arts"),
    ("Education", "Education"),
)


def writingbench_domain(dataset: str) -> str:
    """The WritingBench domain the reference means to name (its 5.7 bug not copied)."""
    for spelled, domain in WRITINGBENCH_DOMAINS:
        if spelled.replace("&", "").lower() in dataset.replace(" ", "").replace("&", "").lower():
            return domain
    return "General Writing"


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

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        return await jp.score_writingbench(item.question, item.info, item.response, gateway)

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are an AI assistant simulating a user who requested writing assistance in the "
        "{domain} domain."
    )
    user_expertise = (
        "You have specific evaluation criteria that the writing must meet and can recognize "
        "quality writing."
    )
    user_criteria = (
        "Criteria compliance",
        "Overall writing quality",
        "Task completeness",
        "User satisfaction",
    )
    user_additional_context = (
        "Consider: criteria compliance, overall quality, task completeness, and user satisfaction."
    )
    user_task = "requesting writing assistance in the {domain} domain"

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        text = f"Domain: {writingbench_domain(dataset)}\n"
        criteria = info.get("criteria") or []
        if criteria:
            text += "Evaluation Criteria:\n"
            for i, c in enumerate(criteria, 1):
                if isinstance(c, dict):
                    text += f"{i}. {c.get('name', f'Criterion {i}')}: "
                    text += f"{c.get('criteria_description', '')}\n"
                else:
                    text += f"{i}. {c}\n"
            text += (
                "\nUse these criteria to evaluate writing quality and provide feedback based on "
                "how well the writing meets these standards."
            )
        return text

    def simulated_user(self, dataset: str) -> SimulatedUser | None:
        """The user with the dataset's domain filled in (:func:`writingbench_domain`)."""
        user = super().simulated_user(dataset)
        domain = writingbench_domain(dataset)
        return dataclasses.replace(
            user, persona=user.persona.format(domain=domain), task=user.task.format(domain=domain)
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

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        dataset = str(item.question["dataset"])
        return await jp.score_limitgen(dataset, item.question, item.info, item.response, gateway)

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are simulating an expert scientific reviewer evaluating an AI system's ability to "
        "identify limitations in research papers."
    )
    user_expertise = (
        "You understand scientific research methodology, experimental design, result analysis, "
        "and literature review standards. You can assess whether identified limitations are "
        "accurate, relevant, and appropriately categorized."
    )
    user_criteria = (
        "Accuracy of limitation identification in the specified aspect",
        "Appropriateness of the limitation category",
        "Quality and specificity of limitation descriptions",
        "Avoidance of limitations explicitly mentioned in the paper",
        "Adherence to the requested JSON format",
    )
    user_additional_context = (
        "Focus on whether the AI correctly identifies 3 major limitations in the specified aspect "
        "(methodology, experimental design, result analysis, or literature review) without "
        "revealing limitations already mentioned in the paper."
    )
    user_task = (
        "seeking identification of scientific paper limitations in a specific research aspect"
    )

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        # the release has no aspect field: the category's (data.limitgen)
        category = str(info.get("category", ""))
        aspect = info.get("aspect") or aspect_of(category)
        text = ""
        if info.get("ground_truth", gold):
            text += f"Expected limitation type: {info.get('ground_truth', gold)}\n"
        if category:
            text += f"Target category: {category}\n"
        if aspect:
            text += f"Target aspect: {aspect}\n"
        if text:
            text += (
                "Use this information to evaluate the accuracy and appropriateness of the "
                "identified limitations."
            )
        return text


def _reference_paper(kind: str, title: Any, abstract: Any, use: str) -> str:
    """The simulated user's view of a reference paper (IdeaBench, JRE-L): title, abstract, use."""
    return f"Reference {kind} Title: {title}\nReference {kind} Abstract: {abstract}\n\n{use}"


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

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        dataset = str(item.question["dataset"])
        return await jp.score_merged(
            dataset, item.question, item.info, item.response, gateway,
            gold="golden_answer", rubrics=texts.JUDGE_RUBRICS,
            merge_prompt=texts.JUDGE_MERGE_PROMPT,
            slots=("INPUT_FACTS", "GENERATED_JUDGMENT", "GOLDEN_JUDGMENT"),
        )  # fmt: skip

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are simulating a Chinese legal professional or law student seeking assistance with "
        "legal document generation."
    )
    user_expertise = (
        "You understand Chinese legal procedures, judgment document structure, and legal "
        "reasoning. You can assess whether a generated legal judgment document follows proper "
        "format, includes necessary legal elements, and demonstrates sound legal reasoning based "
        "on the provided case facts."
    )
    user_criteria = (
        "Structural completeness of the legal judgment document",
        "Accurate application of relevant Chinese laws and regulations",
        "Logical consistency between case facts and legal conclusions",
        "Proper legal document formatting and professional language use",
        "Completeness of required legal elements (case summary, legal analysis, verdict, etc.)",
        "Accuracy of legal reasoning and citation of appropriate statutes",
    )
    user_additional_context = (
        "Focus on evaluating the assistant's ability to generate comprehensive, legally sound "
        "Chinese criminal judgment documents. Consider whether the response demonstrates "
        "understanding of Chinese legal procedures and produces a document that would be "
        "acceptable in actual legal practice."
    )
    user_task = (
        "requesting generation of a complete Chinese criminal judgment document based on provided "
        "case facts"
    )

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        if not gold:
            return ""
        return (
            f"Reference judgment document: {gold}\n"
            "Use this reference to evaluate the completeness, structure, and legal accuracy of "
            "the generated judgment document."
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

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        dataset = str(item.question["dataset"])
        return await jp.score_ideabench(dataset, item.question, item.info, item.response, gateway)

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are simulating a biomedical researcher who requested AI assistance to generate novel "
        "research hypotheses based on background literature abstracts."
    )
    user_expertise = (
        "You have expertise across diverse biomedical subdomains including genomics, COVID-19 "
        "research, cancer immunotherapy, traumatic brain injury, plant biology, vitamin D and "
        "immune systems, heart failure studies, and other biomedical fields. You understand what "
        "makes hypotheses novel, feasible, and scientifically sound across these domains."
    )
    user_criteria = (
        "Novel and distinct from existing work in the specific biomedical subdomain",
        "Scientifically feasible and testable given current methodologies",
        "Well-reasoned based on the provided abstracts and domain knowledge",
        "Properly formatted according to requirements (3 hypotheses with ---IDEA-SEPARATOR---)",
        "Scientific rigor and methodological soundness",
        "Domain-specific novelty assessment",
        "Overall research value and potential impact",
    )
    user_additional_context = (
        "Consider: scientific rigor, domain-specific novelty assessment, proper separation "
        "formatting, and overall research value."
    )
    user_task = (
        "seeking novel hypotheses based on literature abstracts across diverse biomedical "
        "subdomains (genomics, COVID-19, cancer, TBI, plant biology, etc.)"
    )

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        use = (
            "Use this reference to evaluate the quality and relevance of the generated "
            "hypotheses. Consider how well the hypotheses relate to the research direction and "
            "findings represented by this reference paper."
        )
        return _reference_paper("Paper", info.get("title", ""), info.get("abstract", gold), use)


@metric_family
class JREL(Fused):
    name = "JRE-L"
    sub_metrics = ("Rouge-L", "BERTScore-F1", "CLI", "FKGL", "DCRS")
    required_info = ("pr-abstract",)
    fuse = staticmethod(jrel.jrel_score)
    judge = FamilyJudge("jrel_fusion", jrel.PROMPT_VERSION, "judge", FUSION_SAMPLING, ("JRE-L",))

    async def judge_score(self, item: Item, gateway: Any) -> ItemScore:
        dataset = str(item.question["dataset"])
        return await jp.score_merged(
            dataset, item.question, item.info, item.response, gateway,
            gold="pr-abstract", rubrics=texts.JREL_RUBRICS, merge_prompt=texts.JREL_MERGE_PROMPT,
            slots=("INPUT_TEXT", "GENERATED_ARTICLE", "GOLDEN_PASSAGE"),
        )  # fmt: skip

    # the simulated user (reference texts, verbatim)
    user_persona = (
        "You are simulating a science journalist or editor who requested AI assistance to write "
        "journalistic reports of scientific papers for general audiences."
    )
    user_expertise = (
        "You have expertise in science journalism across diverse fields including computer "
        "science, cybersecurity, privacy research, mobile computing, cloud services, encryption "
        "technologies, biomedical research, environmental science, and other technical domains. "
        "You understand what makes scientific writing accessible to the general public while "
        "maintaining accuracy."
    )
    user_criteria = (
        "Accessible and readable for general audiences without technical background",
        "Accurate to the original scientific work without oversimplification",
        "Engaging and newsworthy in its presentation style",
        "Well-structured with appropriate journalistic elements (headlines, lead paragraphs, "
        "context)",
        "Properly balancing technical detail with readability",
        "Readability for lay audiences",
        "Journalistic style and structure",
        "Engagement factor and clarity of technical concepts",
    )
    user_additional_context = (
        "Your evaluation focuses on the journalistic transformation of academic content rather "
        "than the underlying research quality. Consider: readability for lay audiences, accuracy "
        "to source material, journalistic style and structure, engagement factor, and clarity of "
        "technical concepts."
    )
    user_task = (
        "seeking to transform scientific papers into accessible journalistic reports for general "
        "audiences"
    )

    def user_context(self, dataset: str, info: dict[str, Any], gold: str) -> str:
        use = (
            "Use this reference to evaluate the quality of the journalistic transformation. "
            "Consider how well the generated content compares to this reference in terms of "
            "accessibility, accuracy, and engagement for general audiences."
        )
        title, abstract = info.get("pr-title", ""), info.get("pr-abstract", gold)
        return _reference_paper("Popular", title, abstract, use)
