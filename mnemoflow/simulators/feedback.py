"""MemoryBench's simulated user: reacts to the assistant's answer with feedback (memorybench.md §2).

Two kinds, as in the reference (``FeedbackAgent.get_feedback``):

- rule-based for corpus datasets (Locomo-k, DialSim-*): the last answer is scored with the
  dataset's own metric (LoCoMo correct iff F1 > 0.5, DialSim iff its accuracy, which may cost a
  judge call); the reply texts and like / dislike actions are the official ones.
- LLM-based for every other dataset: a persona and the privileged evaluation context of the
  dataset's family (reference answer, checklist, criteria ...), the conversation so far and the
  item's language; the reply is JSON {reasoning, implicit_action, behavior, response}, asked with a
  ``response_format`` json_schema where the endpoint supports it, parsed strictly. The gateway
  re-asks an unparseable reply; one that still does not parse ends the dialogue with a recorded
  ``implicit_action`` of ``unparsed`` (counted in the ledger), never a silent "end".

The simulator sees the gold (``question['answer']`` and ``meta.info``); the assistant never does:
it only gets the conversation. This layer knows no metric module: the scorer of the rule-based kind
is passed in (``evaluate(question, response) -> float``) by the protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mnemoflow.data.limitgen import aspect_of
from mnemoflow.llm.types import ChatRequest, UnparseableReply

ACTIONS = ("like", "dislike", "copy", "none")
BEHAVIORS = ("continue_conversation", "end_conversation")
#: ``implicit_action`` of a user turn whose reply could not be parsed (the dialogue ends there).
UNPARSED = "unparsed"

CORRECT_TEXT = "Great! That's correct. Thank you for the accurate answer."
WRONG_TEXT = (
    "That doesn't seem quite right. Could you please try again and provide a more accurate answer?"
)

#: The reply schema (pydantic ``UserFeedback`` of the reference, written out).
FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "implicit_action": {"type": "string", "enum": list(ACTIONS)},
        "behavior": {"type": "string", "enum": list(BEHAVIORS)},
        "response": {"type": ["string", "null"]},
    },
    "required": ["reasoning", "implicit_action", "behavior", "response"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "user-feedback", "schema": FEEDBACK_SCHEMA},
}


# ---- families: persona and privileged evaluation context ----------------------------------------

#: (name patterns, persona, task description, criteria), tested in the reference's order
#: (``evaluator_factory._normalize_dataset_name``): first match wins, so LexEval-Judge is LexEval
#: (not JuDGE); an unknown name falls back to LexEval.
FAMILIES: list[tuple[tuple[str, ...], str, str, list[str]]] = [
    (
        ("lexeval", "legal"),
        "You are a knowledgeable user seeking legal information.",
        "asking a legal question",
        ["legal accuracy", "completeness", "clarity"],
    ),
    (
        ("writingbench",),
        "You are a user who requested writing help in the General Writing domain.",
        "asking for a piece of writing",
        ["meets the stated requirements", "structure", "style and fluency"],
    ),
    (
        ("hellobench",),
        "You are a user seeking high-quality content.",
        "asking for a long, high-quality answer",
        ["covers the checklist", "depth", "clarity"],
    ),
    (
        ("ideabench", "idea"),
        "You are a biomedical researcher.",
        "asking for research hypotheses",
        ["novelty", "feasibility", "closeness to the target paper"],
    ),
    (
        ("jre-l", "jrel", "journalist"),
        "You are a science journalist or editor.",
        "asking for a popular-science title and abstract",
        ["faithful to the paper", "readable by the public", "engaging"],
    ),
    (
        ("limitgen", "limit"),
        "You are an expert reviewer.",
        "asking for the limitations of a paper",
        ["identifies the expected limitation", "specific", "well argued"],
    ),
    (
        ("judge", "judgment"),
        "You are a Chinese legal professional or law student who asked for a judgment document.",
        "asking for a criminal judgment document",
        ["legal accuracy", "completeness of reasoning", "correct statutes and sentence"],
    ),
    (
        ("writingprompts",),
        "You are a creative-writing enthusiast.",
        "asking for a story about a prompt",
        ["creativity", "coherence", "fits the prompt"],
    ),
    (
        ("nfcats",),
        "You are a user asking non-factoid questions.",
        "asking a non-factoid question",
        ["helpfulness", "correctness", "concision"],
    ),
    (
        ("synthetic",),
        "You are a user who expects the assistant to remember your preferences and house rules.",
        "asking about your own preferences, house rules and facts",
        ["matches what you told the assistant", "precise"],
    ),
]


def family_of(dataset: str) -> tuple[str, str, str, list[str]]:
    """(family key, persona, task description, criteria) of a dataset name (LexEval default)."""
    name = dataset.lower()
    for patterns, persona, task, criteria in FAMILIES:
        if any(p in name for p in patterns):
            return patterns[0], persona, task, criteria
    return "lexeval", *FAMILIES[0][1:]


def is_rule_based(dataset: str) -> bool:
    """Corpus datasets get the rule-based simulator (the reference's name test)."""
    name = dataset.lower()
    return "locomo" in name or "dialsim" in name


def _meta(question: dict[str, Any]) -> dict[str, Any]:
    meta = question.get("meta") or {}
    if isinstance(meta, str):
        meta = json.loads(meta) if meta.strip() else {}
    return meta


def _info(question: dict[str, Any]) -> dict[str, Any]:
    info = _meta(question).get("info") or {}
    return info if isinstance(info, dict) else {}


def reference_of(question: dict[str, Any]) -> str:
    """The privileged reference text the offline simulator grades against and corrects from."""
    meta = _meta(question)
    if meta.get("reference"):
        return str(meta["reference"])
    return str(question.get("answer") or "")


def evaluation_context(question: dict[str, Any]) -> str:
    """The EVALUATION CONTEXT block of the family (privileged; never shown to the assistant)."""
    family = family_of(str(question.get("dataset", "")))[0]
    info, gold = _info(question), reference_of(question)
    if family == "judge":
        return f"Reference judgment document: {gold}"
    if family == "writingbench":
        criteria = info.get("criteria") or info.get("checklist") or []
        lines = [
            f"{i}. {c.get('name', '')}: {c.get('criteria_description', '')}"
            if isinstance(c, dict)
            else f"{i}. {c}"
            for i, c in enumerate(criteria, 1)
        ]
        return "Domain: General Writing\nEvaluation Criteria:\n" + "\n".join(lines)
    if family == "hellobench":
        checklist = info.get("checklist") or []
        items = [c.get("checklist_content", c) if isinstance(c, dict) else c for c in checklist]
        return "Quality Criteria the response should satisfy:\n" + "\n".join(
            f"- {c}" for c in items
        )
    if family == "writingprompts":
        return (
            f"Reference Story for Comparison:\n{gold}\n"
            "Compare creativity, coherence and fit to the prompt with the reference."
        )
    if family == "nfcats":
        return "The question is non-factoid: a good answer is concise, informative and correct."
    if family == "jre-l":
        return (
            f"Reference Popular Title: {info.get('pr-title', '')}\n"
            f"Reference Popular Abstract: {info.get('pr-abstract', gold)}"
        )
    if family == "ideabench":
        return (
            f"Reference Paper Title: {info.get('title', '')}\n"
            f"Reference Paper Abstract: {info.get('abstract', gold)}"
        )
    if family == "limitgen":  # the release has no aspect field: the category's (data.limitgen)
        category = str(info.get("category", ""))
        aspect = info.get("aspect") or aspect_of(category)
        return (
            f"Expected limitation type: {info.get('ground_truth', gold)}\n"
            f"Target category: {category}\nTarget aspect: {aspect}"
        )
    return (
        f"Reference Answer: {gold}\n"
        "Use the reference answer to judge whether the assistant's answer is correct and complete."
    )


def _language_line(lang: str) -> str:
    if lang == "zh":
        return "Your response must be in Chinese (中文)."
    if lang == "en":
        return "Your response must be in English."
    return f"Respond in the conversation language (lang: {lang})."


def system_prompt(dataset: str) -> str:
    _, persona, _, criteria = family_of(dataset)
    return (
        f"{persona}\n\n"
        "CRITICAL: Always focus on the initial prompt/request as the primary context for "
        "evaluation.\nIMPORTANT: DO NOT REPEAT QUESTIONS OR REQUESTS you already made.\n"
        "IMPORTANT: Always start your reasoning process first.\n"
        "Decide, in order:\n1. Reasoning\n2. Implicit action (like, dislike, copy, none)\n"
        "3. Behavior decision (continue_conversation or end_conversation)\n"
        "4. Response (only if continuing)\n\nConsider factors like:\n"
        + "\n".join(f"- {c}" for c in criteria)
    )


def user_prompt(dataset: str, history: list[Any], context: str, lang: str) -> str:
    task = family_of(dataset)[2]
    lines = [
        f"{'User' if turn.role == 'user' else 'Assistant'}: {turn.content.strip()}"
        for turn in history
    ]
    return (
        "Analyze this conversation and predict the user's response:\n\n"
        f"The user is {task}. CRITICAL: Focus on the initial request as the core topic.\n\n"
        "Conversation History:\n" + "\n".join(lines) + "\n\n"
        f"EVALUATION CONTEXT:\n{context}\n\n{_language_line(lang)}\n\n"
        'Respond with JSON: {"reasoning": "...", "implicit_action": "like|dislike|copy|none", '
        '"behavior": "continue_conversation|end_conversation", "response": "... or null"}\n'
        "Requirements: response is null when ending; otherwise what the user says next.\n"
        "Respond with valid JSON only."
    )


# ---- strict parsing -----------------------------------------------------------------------------

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*?)\n?```$", re.DOTALL)


def parse_feedback(text: str) -> dict[str, Any]:
    """The simulator's JSON reply, bare or in one ```json fence; anything else is unparseable."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise UnparseableReply(f"feedback is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UnparseableReply("feedback JSON is not an object")
    missing = [k for k in ("reasoning", "implicit_action", "behavior") if k not in data]
    if missing:
        raise UnparseableReply(f"feedback JSON lacks {missing}")
    if data["implicit_action"] not in ACTIONS:
        raise UnparseableReply(f"implicit_action {data['implicit_action']!r} not in {ACTIONS}")
    if data["behavior"] not in BEHAVIORS:
        raise UnparseableReply(f"behavior {data['behavior']!r} not in {BEHAVIORS}")
    response = data.get("response")
    if response is not None and not isinstance(response, str):
        raise UnparseableReply("response is neither a string nor null")
    return {
        "reasoning": str(data["reasoning"]),
        "implicit_action": data["implicit_action"],
        "end": data["behavior"] == "end_conversation",
        "response": response or "",
    }


# ---- the simulators -----------------------------------------------------------------------------


@dataclass
class UserTurn:
    """A user turn, shaped like ``protocols.conversation.Turn`` (this layer may not import it)."""

    role: str
    content: str
    round: int = 0
    implicit_action: str = ""
    terminated: bool = False


Evaluate = Callable[[dict[str, Any], str], Awaitable[float]]


class FeedbackSimulator:
    """The simulated user of one training item (a questions-table row, gold included)."""

    def __init__(
        self,
        question: dict[str, Any],
        gateway: Any,
        evaluate: Evaluate | None = None,
    ):
        self.question = question
        self.gateway = gateway
        self.evaluate = evaluate
        self.dataset = str(question.get("dataset", ""))
        self.parse_failures = 0

    async def reply(self, history: list[Any]) -> UserTurn:
        if is_rule_based(self.dataset):
            content, action, end = await self._rule_based(history)
        else:
            content, action, end = await self._llm_based(history)
        return UserTurn("user", content, implicit_action=action, terminated=end)

    async def _rule_based(self, history: list[Any]) -> tuple[str, str, bool]:
        if self.evaluate is None:
            raise ValueError(f"{self.dataset}: the rule-based simulator needs the dataset's scorer")
        value = await self.evaluate(self.question, history[-1].content)
        correct = value > 0.5 if "locomo" in self.dataset.lower() else value >= 1.0
        if correct:
            return CORRECT_TEXT, "like", True
        return WRONG_TEXT, "dislike", False

    def request(self, history: list[Any]) -> ChatRequest:
        lang = str(self.question.get("lang") or "en")
        context = evaluation_context(self.question)
        first = next((t.content for t in history if t.role == "user"), "")
        return ChatRequest(
            role="user",
            task="user_feedback_json",
            messages=[
                {"role": "system", "content": system_prompt(self.dataset)},
                {"role": "user", "content": user_prompt(self.dataset, history, context, lang)},
            ],
            fields={
                "question": first,
                "response": history[-1].content,
                "reference": reference_of(self.question),
                "lang": lang,
                "round": len([t for t in history if t.role == "assistant"]),
            },
            response_format=RESPONSE_FORMAT,
        )

    async def _llm_based(self, history: list[Any]) -> tuple[str, str, bool]:
        reply = await self.gateway.chat(self.request(history), parse=parse_feedback)
        if not reply.parse_ok:
            self.parse_failures += 1
            return "", UNPARSED, True
        parsed = reply.parsed
        return parsed["response"], parsed["implicit_action"], parsed["end"]
