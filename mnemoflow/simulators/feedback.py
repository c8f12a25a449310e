"""MemoryBench's simulated user: reacts to the assistant's answer with feedback (memorybench.md §2).

Two kinds, as in the reference (``FeedbackAgent.get_feedback``):

- rule-based for corpus datasets (Locomo-k, DialSim-*): the last answer is scored with the
  dataset's own metric (LoCoMo correct iff F1 > 0.5, DialSim iff its accuracy, which may cost a
  judge call); the reply texts and like / dislike actions are the official ones.
- LLM-based for every other dataset: the family's persona, expertise, criteria and additional
  context (system prompt) and its task, the conversation so far, the privileged evaluation context
  (reference answer, checklist, criteria ...), the item's language and the JSON template (user
  prompt), all with the reference's texts (LittleDinoC/MemoryBench-code 59d1b60; the family's
  texts come from its class, passed in as ``user``; docs/feedback.md lists the few
  differences); the reply is JSON {reasoning, implicit_action, behavior, response}, asked
  with a ``response_format`` json_schema where the endpoint supports it, parsed strictly. The
  gateway re-asks an unparseable reply; one that still does not parse ends the dialogue with a
  recorded ``implicit_action`` of ``unparsed`` (counted in the ledger), never a silent "end".

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


# ---- the user's texts ---------------------------------------------------------------------------
#
# The persona, expertise, criteria, additional context, task and privileged evaluation context of
# a dataset's user are its family's (``eval/memorybench/memorybench_families.py``; the synthetic
# benchmark's in ``eval/memorybench/synthetic_feedback.py``): the protocol passes them in as
# ``user`` (a ``SimulatedUser``: ``persona``, ``expertise``, ``criteria``, ``additional_context``,
# ``task``, ``context(info, gold)``); this layer assembles them with the reference's fixed texts
# (LittleDinoC/ MemoryBench-code 59d1b60, src/agent/user_simulator.py).


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


def evaluation_context(user: Any, question: dict[str, Any]) -> str:
    """The EVALUATION CONTEXT block of the item (privileged; never shown to the assistant): the
    user's ``context`` of the item's ``info`` and reference; empty where the reference's is (no
    gold / no checklist), and then :func:`user_prompt` leaves the block out."""
    return user.context(_info(question), reference_of(question))


def _language_line(lang: str) -> str:
    head = (
        "IMPORTANT: If you provide a response (when behavior is continue_conversation), it must be"
    )
    if lang == "zh":
        return f"{head} in Chinese (中文)."
    if lang == "en":
        return f"{head} in English."
    return f"{head} in the conversation language (lang: {lang})."


def system_prompt(user: Any) -> str:
    """The reference's ``build_base_system_prompt`` for ``user`` (59d1b60)."""
    criteria = "\n".join(f"- {c}" for c in user.criteria)
    prompt = (
        f"{user.persona}\n\n"
        f"{user.expertise}\n\n"
        "CRITICAL: Always focus on the initial prompt/request as the primary context for "
        "evaluation. The conversation should stay aligned with the original user intent.\n\n"
        "IMPORTANT: DO NOT REPEAT QUESTIONS OR REQUESTS that have already been asked in the "
        "conversation. Avoid asking the same question multiple times.\n\n"
        "IMPORTANT: Always start your reasoning process first, then provide the other feedback "
        "elements.\n\n"
        "Your response should include:\n"
        "1. Reasoning: Detailed analysis of the assistant's response quality and accuracy (always "
        "consider how well it addresses the initial prompt)\n"
        "2. Implicit action: What the user would likely do (like, dislike, copy, none)\n"
        "3. Behavior decision: Whether to continue or end the conversation\n"
        "4. Response: What the user would say (only if continuing the conversation)\n\n"
        f"Consider factors like:\n{criteria}"
    )
    if user.additional_context:
        prompt += f"\n\n{user.additional_context}"
    return prompt


#: The reference's JSON template and requirements (``build_base_user_prompt``, 59d1b60), verbatim
#: (the behavior line's trailing space included).
JSON_TEMPLATE = (
    "Please provide a realistic user response in strict JSON format:\n\n"
    "{\n"
    '  "reasoning": "Detailed analysis of the assistant\'s response quality and accuracy (MUST '
    'evaluate how well it addresses the initial request)",\n'
    '  "implicit_action": "like" | "dislike" | "copy" | "none",\n'
    '  "behavior": "continue_conversation" | "end_conversation", \n'
    '  "response": "What the user would say next (string or null if ending)"\n'
    "}\n\n"
    "Requirements:\n"
    "- reasoning: Always provide detailed analysis first. CRITICAL: Always assess how well the "
    "assistant's response addresses the initial request and stays focused on the original user "
    "intent.\n"
    "- implicit_action: Must be exactly one of: like, dislike, copy, none\n"
    "- behavior: Must be exactly: continue_conversation or end_conversation\n"
    "- response: Text if continuing, null if ending conversation. Must match the conversation "
    "language. IMPORTANT: Do not repeat questions or requests that have already been made in the "
    "conversation.\n\n"
    "Respond with valid JSON only."
)


def user_prompt(user: Any, history: list[Any], context: str, lang: str) -> str:
    """The reference's ``build_base_user_prompt`` (59d1b60): task, conversation, the privileged
    EVALUATION CONTEXT (left out when empty), the language line, the JSON template."""
    task = user.task
    names = {"user": "User", "assistant": "Assistant"}
    conversation = "".join(
        f"{names[turn.role]}: {turn.content}\n" for turn in history if turn.role in names
    ).strip()
    prompt = (
        "Analyze this conversation and predict the user's response:\n\n"
        f"The user is {task}. CRITICAL: Focus on the initial request as the core topic that "
        "should be the primary focus throughout this entire conversation. All responses should "
        "be evaluated based on how well they address this original user intent.\n\n"
        f"Conversation History:\n{conversation}\n\n"
    )
    if context:
        prompt += f"EVALUATION CONTEXT:\n{context}\n\n"
    return prompt + f"{_language_line(lang)}\n\n{JSON_TEMPLATE}"


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
    """The simulated user of one training item (a questions-table row, gold included): rule-based
    with ``evaluate``, else LLM-based with ``user`` (the item's family's texts)."""

    def __init__(
        self,
        question: dict[str, Any],
        gateway: Any,
        evaluate: Evaluate | None = None,
        user: Any = None,
    ):
        self.question = question
        self.gateway = gateway
        self.evaluate = evaluate
        self.user = user
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
        user = self.user
        if user is None:
            raise ValueError(f"{self.dataset}: the LLM-based simulator needs the family's user")
        lang = str(self.question.get("lang") or "en")
        context = evaluation_context(user, self.question)
        first = next((t.content for t in history if t.role == "user"), "")
        return ChatRequest(
            role="user",
            task="user_feedback_json",
            messages=[
                {"role": "system", "content": system_prompt(user)},
                {"role": "user", "content": user_prompt(user, history, context, lang)},
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
