"""MemoryBench's simulated user: reacts to the assistant's answer with feedback (memorybench.md §2).

Two kinds, as in the reference (``FeedbackAgent.get_feedback``):

- rule-based for corpus datasets (Locomo-k, DialSim-*): the last answer is scored with the
  dataset's own metric (LoCoMo correct iff F1 > 0.5, DialSim iff its accuracy, which may cost a
  judge call); the reply texts and like / dislike actions are the official ones.
- LLM-based for every other dataset: the family's persona, expertise, criteria and additional
  context (system prompt) and its task, the conversation so far, the privileged evaluation context
  (reference answer, checklist, criteria ...), the item's language and the JSON template (user
  prompt), all with the reference's texts (LittleDinoC/MemoryBench-code 59d1b60, see
  :data:`FAMILIES`; docs/feedback.md lists the few differences); the reply is JSON
  {reasoning, implicit_action, behavior, response}, asked with a ``response_format`` json_schema
  where the endpoint supports it, parsed strictly. The gateway re-asks an unparseable reply; one
  that still does not parse ends the dialogue with a recorded ``implicit_action`` of ``unparsed``
  (counted in the ledger), never a silent "end".

The simulator sees the gold (``question['answer']`` and ``meta.info``); the assistant never does:
it only gets the conversation. This layer knows no metric module: the scorer of the rule-based kind
is passed in (``evaluate(question, response) -> float``) by the protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

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


# ---- families: persona, expertise, criteria and privileged evaluation context -------------------
#
# The texts below are transcribed from the reference, LittleDinoC/MemoryBench-code at commit
# 59d1b60 (src/agent/evaluators/*_evaluator.py for the per-family texts, src/agent/user_simulator.py
# for how they are assembled). They are data the benchmark defines; keep them verbatim.

#: The reference's WritingBench domains (``_extract_criteria_info``), matched here against the
#: release's spelling ("WritingBench-Politics&Law"); the reference looks for "Politics & Law" and so
#: always says "General Writing" (memorybench.md 5.7), a bug not copied.
WRITINGBENCH_DOMAINS = (
    ("Politics&Law", "Politics & Law"),
    ("Academic&Engineering", "Academic & Engineering"),
    ("Literature&Arts", "Literature & Arts"),
    ("Education", "Education"),
)


class Family(NamedTuple):
    """One simulated-user family: the arguments of the reference's ``build_base_system_prompt``
    (persona, expertise, criteria, additional context) and ``build_base_user_prompt``'s task."""

    key: str
    patterns: tuple[str, ...]
    persona: str
    expertise: str
    criteria: tuple[str, ...]
    additional_context: str
    task: str


#: Tested in the reference's order (``evaluator_factory._normalize_dataset_name``): first match
#: wins, so LexEval-Judge is LexEval (not JuDGE). The nine reference families, then mnemoflow's
#: built-in synthetic benchmark; an unknown name falls back to LexEval. WritingBench's "{domain}" is
#: filled from the dataset name (:func:`writingbench_domain`).
FAMILIES: tuple[Family, ...] = (
    Family(
        "lexeval",
        ("lexeval", "legal"),
        "You are an AI assistant simulating a knowledgeable user seeking legal information or "
        "assistance.",
        "You have domain expertise to recognize quality legal information without revealing "
        "specific ground truth details.",
        (
            "Legal accuracy and correctness of information provided",
            "Completeness in addressing the legal question or issue",
            "Clarity and understandability for a non-lawyer",
            "Practical usefulness of the advice or information",
            "Whether the assistant properly acknowledged limitations or suggested consulting a "
            "lawyer when appropriate",
        ),
        "Natural conversation flow and user satisfaction with legal guidance received",
        "seeking accurate legal information or guidance",
    ),
    Family(
        "writingbench",
        ("writingbench",),
        "You are an AI assistant simulating a user who requested writing assistance in the "
        "{domain} domain.",
        "You have specific evaluation criteria that the writing must meet and can recognize "
        "quality writing.",
        (
            "Criteria compliance",
            "Overall writing quality",
            "Task completeness",
            "User satisfaction",
        ),
        "Consider: criteria compliance, overall quality, task completeness, and user satisfaction.",
        "requesting writing assistance in the {domain} domain",
    ),
    Family(
        "hellobench",
        ("hellobench",),
        "You are an AI assistant simulating a user seeking high-quality content.",
        "You have expertise to recognize well-crafted content that meets the specified standards "
        "and can evaluate responses based on quality criteria provided in the checklist.",
        (
            "Overall content quality",
            "Adherence to user requirements",
            "User satisfaction",
        ),
        "Evaluate based on the specific checklist criteria provided, being fair and constructive.",
        "seeking high-quality content",
    ),
    Family(
        "ideabench",
        ("ideabench", "idea"),
        "You are simulating a biomedical researcher who requested AI assistance to generate novel "
        "research hypotheses based on background literature abstracts.",
        "You have expertise across diverse biomedical subdomains including genomics, COVID-19 "
        "research, cancer immunotherapy, traumatic brain injury, plant biology, vitamin D and "
        "immune systems, heart failure studies, and other biomedical fields. You understand what "
        "makes hypotheses novel, feasible, and scientifically sound across these domains.",
        (
            "Novel and distinct from existing work in the specific biomedical subdomain",
            "Scientifically feasible and testable given current methodologies",
            "Well-reasoned based on the provided abstracts and domain knowledge",
            "Properly formatted according to requirements (3 hypotheses with ---IDEA-SEPARATOR---)",
            "Scientific rigor and methodological soundness",
            "Domain-specific novelty assessment",
            "Overall research value and potential impact",
        ),
        "Consider: scientific rigor, domain-specific novelty assessment, proper separation "
        "formatting, and overall research value.",
        "seeking novel hypotheses based on literature abstracts across diverse biomedical "
        "subdomains (genomics, COVID-19, cancer, TBI, plant biology, etc.)",
    ),
    Family(
        "jre-l",
        ("jre-l", "jrel", "journalist"),
        "You are simulating a science journalist or editor who requested AI assistance to write "
        "journalistic reports of scientific papers for general audiences.",
        "You have expertise in science journalism across diverse fields including computer "
        "science, cybersecurity, privacy research, mobile computing, cloud services, encryption "
        "technologies, biomedical research, environmental science, and other technical domains. "
        "You understand what makes scientific writing accessible to the general public while "
        "maintaining accuracy.",
        (
            "Accessible and readable for general audiences without technical background",
            "Accurate to the original scientific work without oversimplification",
            "Engaging and newsworthy in its presentation style",
            "Well-structured with appropriate journalistic elements (headlines, lead paragraphs, "
            "context)",
            "Properly balancing technical detail with readability",
            "Readability for lay audiences",
            "Journalistic style and structure",
            "Engagement factor and clarity of technical concepts",
        ),
        "Your evaluation focuses on the journalistic transformation of academic content rather "
        "than the underlying research quality. Consider: readability for lay audiences, accuracy "
        "to source material, journalistic style and structure, engagement factor, and clarity of "
        "technical concepts.",
        "seeking to transform scientific papers into accessible journalistic reports for general "
        "audiences",
    ),
    Family(
        "limitgen",
        ("limitgen", "limit"),
        "You are simulating an expert scientific reviewer evaluating an AI system's ability to "
        "identify limitations in research papers.",
        "You understand scientific research methodology, experimental design, result analysis, "
        "and literature review standards. You can assess whether identified limitations are "
        "accurate, relevant, and appropriately categorized.",
        (
            "Accuracy of limitation identification in the specified aspect",
            "Appropriateness of the limitation category",
            "Quality and specificity of limitation descriptions",
            "Avoidance of limitations explicitly mentioned in the paper",
            "Adherence to the requested JSON format",
        ),
        "Focus on whether the AI correctly identifies 3 major limitations in the specified aspect "
        "(methodology, experimental design, result analysis, or literature review) without "
        "revealing limitations already mentioned in the paper.",
        "seeking identification of scientific paper limitations in a specific research aspect",
    ),
    Family(
        "judge",
        ("judge", "judgment"),
        "You are simulating a Chinese legal professional or law student seeking assistance with "
        "legal document generation.",
        "You understand Chinese legal procedures, judgment document structure, and legal "
        "reasoning. You can assess whether a generated legal judgment document follows proper "
        "format, includes necessary legal elements, and demonstrates sound legal reasoning based "
        "on the provided case facts.",
        (
            "Structural completeness of the legal judgment document",
            "Accurate application of relevant Chinese laws and regulations",
            "Logical consistency between case facts and legal conclusions",
            "Proper legal document formatting and professional language use",
            "Completeness of required legal elements (case summary, legal analysis, verdict, etc.)",
            "Accuracy of legal reasoning and citation of appropriate statutes",
        ),
        "Focus on evaluating the assistant's ability to generate comprehensive, legally sound "
        "Chinese criminal judgment documents. Consider whether the response demonstrates "
        "understanding of Chinese legal procedures and produces a document that would be "
        "acceptable in actual legal practice.",
        "requesting generation of a complete Chinese criminal judgment document based on provided "
        "case facts",
    ),
    Family(
        "writingprompts",
        ("writingprompts", "writing_prompts"),
        "You are simulating a creative writing enthusiast who has requested a story based on a "
        "specific prompt.",
        "You have experience reading and evaluating creative writing, and can recognize engaging "
        "storytelling, character development, and narrative structure.",
        (
            "Creativity and originality in interpreting the prompt",
            "Narrative coherence and flow",
            "Engaging characters and dialogue",
            "Imaginative world-building and setting",
            "Emotional engagement and impact",
            "Writing quality and style",
        ),
        "Focus on natural user responses that reflect appreciation for creative storytelling. "
        "Consider how well the story captures the essence of the original prompt while being "
        "entertaining and well-written.",
        "requesting a creative story based on a writing prompt",
    ),
    Family(
        "nfcats",
        ("nfcats", "nf-cats"),
        "You are an AI assistant simulating a knowledgeable user asking various types of "
        "non-factoid questions that require thoughtful, comprehensive responses.",
        "You can evaluate the quality of responses to different question types including "
        "comparisons, debates, evidence-based explanations, instructions, and experience-based "
        "questions.",
        (
            "Appropriateness of response type to the question category (comparison, debate, "
            "evidence-based, instruction, etc.)",
            "Completeness and thoroughness of the answer",
            "Logical structure and clarity of explanation",
            "Relevance and accuracy of information provided",
            "Practical usefulness and helpfulness to the questioner",
            "Balanced perspective when addressing debatable topics",
            "Clear step-by-step guidance for instructional questions",
        ),
        "The questions span multiple categories including COMPARISON, DEBATE, EVIDENCE-BASED, "
        "INSTRUCTION, EXPERIENCE, REASON, and FACTOID. Each requires a different approach to "
        "provide a satisfactory response.",
        "asking a non-factoid question that requires a thoughtful, comprehensive answer tailored "
        "to the question type",
    ),
    # mnemoflow's own built-in benchmark (data/synthetic_feedback.py); not in the reference.
    Family(
        "synthetic",
        ("synthetic",),
        "You are an AI assistant simulating a user who expects the assistant to remember your "
        "preferences, house rules and facts you told it.",
        "You know exactly what you told the assistant and can recognize whether its answer "
        "matches it.",
        (
            "Whether the answer matches what you told the assistant",
            "Precision of the answer",
        ),
        "",
        "asking about your own preferences, house rules and facts",
    ),
)
DEFAULT_FAMILY = FAMILIES[0]


def family_of(dataset: str) -> Family:
    """The simulated-user family of a dataset name (LexEval for an unknown name)."""
    name = dataset.lower()
    for family in FAMILIES:
        if any(p in name for p in family.patterns):
            return family
    return DEFAULT_FAMILY


def writingbench_domain(dataset: str) -> str:
    """The WritingBench domain the reference means to name (its 5.7 bug not copied)."""
    for spelled, domain in WRITINGBENCH_DOMAINS:
        if spelled.replace("&", "").lower() in dataset.replace(" ", "").replace("&", "").lower():
            return domain
    return "General Writing"


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
    """The EVALUATION CONTEXT block of the family (privileged; never shown to the assistant).

    The reference's texts (59d1b60, each evaluator's ``generate_user_prompt``); empty where the
    reference's is (no gold / no checklist), and then :func:`user_prompt` leaves the block out.
    """
    dataset = str(question.get("dataset", ""))
    family = family_of(dataset).key
    info, gold = _info(question), reference_of(question)
    if family == "judge":
        if not gold:
            return ""
        return (
            f"Reference judgment document: {gold}\n"
            "Use this reference to evaluate the completeness, structure, and legal accuracy of "
            "the generated judgment document."
        )
    if family == "writingbench":
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
    if family == "hellobench":
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
    if family == "writingprompts":
        if not gold:
            return ""
        return (
            f"Reference Story for Comparison:\n{gold}\n\n"
            "Use this reference story to evaluate how well the generated response interprets the "
            "prompt. Consider creativity, narrative quality, character development, and overall "
            "storytelling compared to this reference. Provide constructive feedback on strengths "
            "and areas for improvement."
        )
    if family == "nfcats":
        return (
            "This dataset contains non-factoid questions from various categories (COMPARISON, "
            "DEBATE, EVIDENCE-BASED, INSTRUCTION, EXPERIENCE, REASON, FACTOID). Evaluate whether "
            "the assistant's response appropriately addresses the type and nature of the question "
            "asked."
        )
    if family == "jre-l":
        return (
            f"Reference Popular Title: {info.get('pr-title', '')}\n"
            f"Reference Popular Abstract: {info.get('pr-abstract', gold)}\n\n"
            "Use this reference to evaluate the quality of the journalistic transformation. "
            "Consider how well the generated content compares to this reference in terms of "
            "accessibility, accuracy, and engagement for general audiences."
        )
    if family == "ideabench":
        return (
            f"Reference Paper Title: {info.get('title', '')}\n"
            f"Reference Paper Abstract: {info.get('abstract', gold)}\n\n"
            "Use this reference to evaluate the quality and relevance of the generated "
            "hypotheses. Consider how well the hypotheses relate to the research direction and "
            "findings represented by this reference paper."
        )
    if family == "limitgen":  # the release has no aspect field: the category's (data.limitgen)
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
    if not gold:  # LexEval (and the default), the synthetic benchmark
        return ""
    if family == "synthetic":  # mnemoflow's own benchmark: not legal information
        return (
            f"Reference Answer: {gold}\n"
            "Use this reference to evaluate whether the assistant's answer matches what you told "
            "it."
        )
    return (
        f"Reference Answer: {gold}\n"
        "Use this reference to evaluate the accuracy and completeness of the legal information "
        "provided."
    )


def _language_line(lang: str) -> str:
    head = (
        "IMPORTANT: If you provide a response (when behavior is continue_conversation), it must be"
    )
    if lang == "zh":
        return f"{head} in Chinese (中文)."
    if lang == "en":
        return f"{head} in English."
    return f"{head} in the conversation language (lang: {lang})."


def system_prompt(dataset: str) -> str:
    """The reference's ``build_base_system_prompt`` for the dataset's family (59d1b60)."""
    family = family_of(dataset)
    domain = writingbench_domain(dataset)
    criteria = "\n".join(f"- {c}" for c in family.criteria)
    prompt = (
        f"{family.persona.format(domain=domain)}\n\n"
        f"{family.expertise}\n\n"
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
    if family.additional_context:
        prompt += f"\n\n{family.additional_context}"
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


def user_prompt(dataset: str, history: list[Any], context: str, lang: str) -> str:
    """The reference's ``build_base_user_prompt`` (59d1b60): task, conversation, the privileged
    EVALUATION CONTEXT (left out when empty), the language line, the JSON template."""
    task = family_of(dataset).task.format(domain=writingbench_domain(dataset))
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
