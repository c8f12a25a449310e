"""The MemoryBench feedback simulator: strict parsing, the offline and rule-based users, and that
the agent never sees what only the simulator may see."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from mnemoflow.data.synthetic_feedback import questions as synthetic_questions
from mnemoflow.data.tables import DIALOGUES, SESSIONS
from mnemoflow.errors import ConfigError
from mnemoflow.eval.memorybench import memorybench_metrics, synthetic_feedback
from mnemoflow.eval.memorybench.memorybench_metrics import family_for
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import UnparseableReply
from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols.conversation import Turn
from mnemoflow.protocols.step import StepContext
from mnemoflow.simulators.feedback import (
    CORRECT_TEXT,
    RESPONSE_FORMAT,
    UNPARSED,
    WRONG_TEXT,
    FeedbackSimulator,
    evaluation_context,
    parse_feedback,
    system_prompt,
)
from mnemoflow.testing.openai_server import OpenAITestServer

REPLY = {
    "reasoning": "The answer misses the date.",
    "implicit_action": "dislike",
    "behavior": "continue_conversation",
    "response": "Which day exactly?",
}


def offline() -> Gateway:
    return Gateway.from_config({}, None)


def test_parse_accepts_bare_and_fenced_json_alike():
    bare = json.dumps(REPLY)
    fenced = f"```json\n{bare}\n```"
    expected = {
        "reasoning": "The answer misses the date.",
        "implicit_action": "dislike",
        "end": False,
        "response": "Which day exactly?",
    }
    assert parse_feedback(bare) == expected
    assert parse_feedback(fenced) == expected
    assert parse_feedback(f"  ```\n{bare}```  ") == expected


def test_parse_reads_end_with_a_null_response_as_an_empty_text():
    ended = {**REPLY, "implicit_action": "like", "behavior": "end_conversation", "response": None}
    assert parse_feedback(json.dumps(ended)) == {
        "reasoning": "The answer misses the date.",
        "implicit_action": "like",
        "end": True,
        "response": "",
    }


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(REPLY)[:-1],  # truncated
        "Sure! " + json.dumps(REPLY),  # prose before the object
        json.dumps({**REPLY, "implicit_action": "love"}),  # not an allowed action
        json.dumps({**REPLY, "behavior": "stop"}),
        json.dumps({k: v for k, v in REPLY.items() if k != "behavior"}),
        json.dumps([REPLY]),
        json.dumps({**REPLY, "response": 3}),
        "",
    ],
)
def test_parse_rejects_malformed_replies(text):
    with pytest.raises(UnparseableReply):
        parse_feedback(text)


def synthetic_item(split: str = "train") -> dict:
    frame = synthetic_questions({"params": {"items": 3, "seed": 0}})
    return frame[frame.split == split].iloc[0].to_dict()


def test_offline_user_dislikes_a_miss_and_corrects_it_with_the_reference():
    item = synthetic_item()
    reference = json.loads(item["meta"])["reference"]
    simulator = FeedbackSimulator(item, offline(), user=user_of(item["dataset"]))
    history = [Turn("user", item["question"]), Turn("assistant", "I don't know.")]
    turn = asyncio.run(simulator.reply(history))
    assert (turn.implicit_action, turn.terminated) == ("dislike", False)
    assert turn.content == f"That is not right. {reference}"


def test_offline_user_likes_a_match_and_ends():
    item = synthetic_item()
    reference = json.loads(item["meta"])["reference"]
    simulator = FeedbackSimulator(item, offline(), user=user_of(item["dataset"]))
    history = [Turn("user", item["question"]), Turn("assistant", reference)]
    turn = asyncio.run(simulator.reply(history))
    assert (turn.implicit_action, turn.terminated, turn.content) == ("like", True, "")


def test_an_unparseable_user_is_re_asked_then_recorded_and_counted_never_a_silent_end():
    bodies = []

    def reply(body):
        bodies.append(body)
        return "I liked it, thanks!"  # prose, not JSON

    item = synthetic_item()
    with OpenAITestServer(reply=reply) as server:
        gateway = Gateway.from_config(
            {"user": {"base_url": server.base_url, "model": "m", "max_parse_retries": 2}}, None
        )
        simulator = FeedbackSimulator(item, gateway, user=user_of(item["dataset"]))
        history = [Turn("user", item["question"]), Turn("assistant", "Garamond")]
        turn = asyncio.run(simulator.reply(history))
        asyncio.run(gateway.aclose())
    assert (turn.implicit_action, turn.terminated, turn.content) == (UNPARSED, True, "")
    assert simulator.parse_failures == 1
    assert len(bodies) == 3  # the first ask and two re-asks
    assert gateway.ledger.totals().parse_failures == 1
    assert bodies[0]["response_format"] == RESPONSE_FORMAT


def test_structured_output_is_the_user_bindings_switch():
    """``models.user.structured_output: off`` drops the simulator's response_format."""
    bodies = []

    def reply(body):
        bodies.append(body)
        return json.dumps(
            {"reasoning": "r", "implicit_action": "like", "behavior": "end_conversation"}
        )

    item = synthetic_item()
    history = [Turn("user", item["question"]), Turn("assistant", "x")]
    with OpenAITestServer(reply=reply) as server:
        binding = {"base_url": server.base_url, "model": "m", "structured_output": "off"}
        gateway = Gateway.from_config({"user": binding}, None)
        turn = asyncio.run(
            FeedbackSimulator(item, gateway, user=user_of(item["dataset"])).reply(history)
        )
        asyncio.run(gateway.aclose())
    assert turn.implicit_action == "like"
    assert "response_format" not in bodies[0]


def locomo_item(gold: str, category: int) -> dict:
    info = {"golden_answer": gold, "category": category}
    return {
        "dataset": "Locomo-0",
        "question_id": "Locomo-0_3",
        "question": "When did Caroline go to the support group?",
        "answer": gold,
        "lang": "en",
        "meta": json.dumps({"test_idx": 3, "info": info}),
    }


@pytest.mark.parametrize(
    ("answer", "action", "text", "end"),
    [
        ("7 May 2023", "like", CORRECT_TEXT, True),  # F1 1.0
        ("May 2023", "like", CORRECT_TEXT, True),  # P 1, R 2/3: F1 0.8 > 0.5
        ("7 June 2022", "dislike", WRONG_TEXT, False),  # one of three tokens: F1 1/3
    ],
)
def test_rule_based_user_on_a_locomo_item_likes_iff_official_f1_above_half(
    answer, action, text, end
):
    gateway = offline()
    item = locomo_item("7 May 2023", 2)
    simulator = FeedbackSimulator(item, gateway, fb.evaluator(memorybench_metrics, gateway))
    turn = asyncio.run(simulator.reply([Turn("user", item["question"]), Turn("assistant", answer)]))
    assert (turn.implicit_action, turn.content, turn.terminated) == (action, text, end)


class Recording(Gateway):
    """The offline gateway, keeping every request it was asked."""

    def __init__(self):
        base = Gateway.from_config({}, None)
        super().__init__(base.specs)
        self.requests = []

    async def chat(self, request, parse=None):
        self.requests.append(request)
        return await super().chat(request, parse)


def test_the_simulator_sees_the_gold_and_the_agent_never_does():
    frame = synthetic_questions({"params": {"items": 4, "seed": 1}})
    train = frame[frame.split == "train"].to_dict("records")
    gateway = Recording()
    keys = {"benchmark": "b", "system": "none", "protocol": "on_policy", "step": 1}
    config = fb.FeedbackConfig(max_rounds=3)
    asyncio.run(
        fb.live_dialogues(
            train, lambda item: None, StepContext({"type": "none"}, gateway, keys), config,
            fb.metrics_module("synthetic_feedback"), every_round=True,
        )
    )  # fmt: skip
    agent = [r for r in gateway.requests if r.role == "agent"]
    user = [r for r in gateway.requests if r.role == "user"]
    assert len(user) == 8  # per item: round 0 missed (disliked), round 1 corrected (liked)
    for item in train:
        reference = json.loads(item["meta"])["reference"]
        assert any(reference in r.messages[1]["content"] for r in user)
        first = [r for r in agent if r.messages == [{"role": "user", "content": item["question"]}]]
        assert len(first) == 1  # round 0 saw the question only
        assert item["answer"] not in json.dumps(first[0].fields)
    for request in agent:
        text = json.dumps([request.messages, request.fields])
        assert "EVALUATION CONTEXT" not in text and "Reference" not in text


def test_a_test_items_gold_never_reaches_the_agent_in_any_round_or_when_it_is_asked(tmp_path):
    """Training gold reaches the agent through the user's corrections (the benchmark's signal); a
    test item's gold must not, neither while conversing nor when the item is asked."""
    frame = synthetic_questions({"params": {"items": 4, "seed": 1}})
    test = frame["split"] == "test"
    gold = {qid: f"zq{n}gold" for n, qid in enumerate(frame.loc[test, "question_id"])}
    frame.loc[test, "answer"] = frame.loc[test, "question_id"].map(gold)
    frame.loc[test, "meta"] = [
        json.dumps({**json.loads(meta), "reference": gold[qid]})
        for qid, meta in zip(frame.loc[test, "question_id"], frame.loc[test, "meta"], strict=True)
    ]
    gateway = Recording()
    config = fb.FeedbackConfig(batch_size=4, max_rounds=3)
    keys = {"benchmark": "b", "system": "bm25_message", "protocol": "on_policy", "step": 1}
    system = {"type": "bm25_message", "top_k": 5}
    none = pd.DataFrame(columns=SESSIONS.names)
    begin, after = tmp_path / "step0", tmp_path / "step1"
    metrics = fb.metrics_module("synthetic_feedback")

    async def step():
        empty = pd.DataFrame(columns=DIALOGUES.names)
        ctx = StepContext(system, gateway, keys)
        await fb.ingest_step("on_policy", 0, empty, frame, none, ctx, None, begin)
        dialogues = await fb.live_step(1, frame, begin, ctx, config, metrics)
        await fb.ingest_step("on_policy", 1, dialogues, frame, none, ctx, begin, after)
        return await fb.answer_step("on_policy", frame, none, after, ctx, config)

    answers = asyncio.run(step())
    assert sorted(answers.question_id) == sorted(gold)
    agent = [r for r in gateway.requests if r.role == "agent"]
    seen = json.dumps([[r.messages, r.fields] for r in agent], default=str)
    assert len(agent) > len(gold)  # conversation rounds and the answers to the test items
    assert not [g for g in gold.values() if g in seen]
    train_gold = frame.loc[~test, "answer"]
    assert any(g in seen for g in train_gold)  # the corrections did reach it


def test_each_family_gets_its_own_privileged_context():
    lexeval = {"dataset": "LexEval-QA", "answer": "Article 5", "meta": "{}"}
    limitgen = {
        "dataset": "LimitGen-Syn",
        "answer": "",
        "meta": json.dumps({"info": {"ground_truth": "data", "category": "c", "aspect": "a"}}),
    }
    assert evaluation_context(user_of(lexeval["dataset"]), lexeval).startswith(
        "Reference Answer: Article 5\n"
    )
    assert evaluation_context(user_of(limitgen["dataset"]), limitgen) == (
        "Expected limitation type: data\nTarget category: c\nTarget aspect: a\n" + LIMITGEN_USE
    )


#: The reference's closing line of LimitGen's EVALUATION CONTEXT (limitgen_evaluator.py, 59d1b60).
LIMITGEN_USE = (
    "Use this information to evaluate the accuracy and appropriateness of the identified "
    "limitations."
)


def test_limitgen_target_aspect_comes_from_the_category():
    """The release's LimitGen items carry only ``category``; the reference derives the aspect."""
    info = {"ground_truth": "No ablation of the attention module.", "category": "ablation"}
    item = {"dataset": "LimitGen-Syn", "answer": "", "meta": json.dumps({"info": info})}
    assert evaluation_context(user_of(item["dataset"]), item) == (
        "Expected limitation type: No ablation of the attention module.\n"
        "Target category: ablation\nTarget aspect: experimental design\n" + LIMITGEN_USE
    )


@pytest.mark.parametrize(
    ("dataset", "family"),
    [
        # LexEval-Judge holds "judge" too: the reference tests "lexeval" first (evaluator_factory)
        ("LexEval-Judge", "LexEval"),
        ("LexEval-Summarization", "LexEval"),
        ("JuDGE", "JuDGE"),
        ("WritingBench-Politics&Law", "WritingBench"),
        ("HelloBench-Academic&Knowledge-Writing", "HelloBench"),
        ("IdeaBench", "IdeaBench"),
        ("JRE-L", "JRE-L"),
        ("LimitGen-Syn", "LimitGen"),
        ("WritingPrompts", "WritingPrompts"),
        ("NFCats", "NFCats"),
    ],
)
def test_family_is_chosen_in_the_reference_order(dataset, family):
    chosen = family_for(dataset)
    assert chosen.name == family
    assert user_of(dataset).persona == chosen.simulated_user(dataset).persona


def test_an_unknown_dataset_has_no_user_but_one_line_naming_it_and_the_families():
    with pytest.raises(ConfigError) as info:
        user_of("Unknown")
    assert str(info.value).startswith(
        "memorybench: dataset 'Unknown' is not a MemoryBench dataset; families: DialSim, "
    )
    assert "\n" not in str(info.value)
    # the rule-based families have no LLM user: their scorer is their metric
    assert user_of("Locomo-0") is None and user_of("DialSim-friends") is None


def user_of(dataset: str):
    """The simulated user the feedback protocol passes for ``dataset`` (its family's texts)."""
    if dataset.startswith("synthetic"):
        return synthetic_feedback.simulated_user(dataset)
    return memorybench_metrics.simulated_user(dataset)


def test_lexeval_judge_gets_the_reference_answer_not_a_judgment_document():
    item = {"dataset": "LexEval-Judge", "answer": "判处有期徒刑三年", "meta": "{}"}
    assert evaluation_context(user_of(item["dataset"]), item).startswith(
        "Reference Answer: 判处有期徒刑三年\n"
    )
    assert system_prompt(user_of("LexEval-Judge")).startswith(
        "You are an AI assistant simulating a knowledgeable user seeking legal information or "
        "assistance.\n\n"
    )


# ---- the reference's prompt texts (LittleDinoC/MemoryBench-code 59d1b60, src/agent/evaluators/ and
# src/agent/user_simulator.py), transcribed here independently of the module's table -------------

#: (a dataset name of the family, the reference's user_persona, its number of evaluation criteria)
REFERENCE_FAMILIES = [
    (
        "LexEval-QA",
        "You are an AI assistant simulating a knowledgeable user seeking legal information or "
        "assistance.",
        5,
    ),
    (
        "JuDGE",
        "You are simulating a Chinese legal professional or law student seeking assistance with "
        "legal document generation.",
        6,
    ),
    (
        "WritingBench-Politics&Law",
        "You are an AI assistant simulating a user who requested writing assistance in the "
        "Politics & Law domain.",
        4,
    ),
    (
        "HelloBench-Academic&Knowledge-Writing",
        "You are an AI assistant simulating a user seeking high-quality content.",
        3,
    ),
    (
        "WritingPrompts",
        "You are simulating a creative writing enthusiast who has requested a story based on a "
        "specific prompt.",
        6,
    ),
    (
        "NFCats",
        "You are an AI assistant simulating a knowledgeable user asking various types of "
        "non-factoid questions that require thoughtful, comprehensive responses.",
        7,
    ),
    (
        "JRE-L",
        "You are simulating a science journalist or editor who requested AI assistance to write "
        "journalistic reports of scientific papers for general audiences.",
        8,
    ),
    (
        "IdeaBench",
        "You are simulating a biomedical researcher who requested AI assistance to generate novel "
        "research hypotheses based on background literature abstracts.",
        7,
    ),
    (
        "LimitGen-Syn",
        "You are simulating an expert scientific reviewer evaluating an AI system's ability to "
        "identify limitations in research papers.",
        5,
    ),
]

LEXEVAL_SYSTEM = (
    "You are an AI assistant simulating a knowledgeable user seeking legal information or "
    "assistance.\n\n"
    "You have domain expertise to recognize quality legal information without revealing specific "
    "ground truth details.\n\n"
    "CRITICAL: Always focus on the initial prompt/request as the primary context for evaluation. "
    "The conversation should stay aligned with the original user intent.\n\n"
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
    "Consider factors like:\n"
    "- Legal accuracy and correctness of information provided\n"
    "- Completeness in addressing the legal question or issue\n"
    "- Clarity and understandability for a non-lawyer\n"
    "- Practical usefulness of the advice or information\n"
    "- Whether the assistant properly acknowledged limitations or suggested consulting a lawyer "
    "when appropriate\n\n"
    "Natural conversation flow and user satisfaction with legal guidance received"
)

JSON_TEMPLATE_REFERENCE = """Please provide a realistic user response in strict JSON format:

{
  "reasoning": "Detailed analysis of the assistant's response quality and accuracy (MUST evaluate how well it addresses the initial request)",
  "implicit_action": "like" | "dislike" | "copy" | "none",
  "behavior": "continue_conversation" | "end_conversation",\x20
  "response": "What the user would say next (string or null if ending)"
}

Requirements:
- reasoning: Always provide detailed analysis first. CRITICAL: Always assess how well the assistant's response addresses the initial request and stays focused on the original user intent.
- implicit_action: Must be exactly one of: like, dislike, copy, none
- behavior: Must be exactly: continue_conversation or end_conversation
- response: Text if continuing, null if ending conversation. Must match the conversation language. IMPORTANT: Do not repeat questions or requests that have already been made in the conversation.

Respond with valid JSON only."""  # noqa: E501


@pytest.mark.parametrize(("dataset", "persona", "n_criteria"), REFERENCE_FAMILIES)
def test_each_family_has_the_reference_persona_and_criteria_count(dataset, persona, n_criteria):
    prompt = system_prompt(user_of(dataset))
    assert prompt.startswith(persona + "\n\n")
    criteria = prompt.split("Consider factors like:\n", 1)[1].split("\n\n", 1)[0]
    assert len(criteria.splitlines()) == n_criteria
    assert all(line.startswith("- ") for line in criteria.splitlines())
    assert len(user_of(dataset).criteria) == n_criteria


def test_lexeval_system_prompt_is_the_reference_text():
    """Persona, the no-reveal expertise line, the fixed block, all five criteria, the additional
    context, in the reference's order and separators."""
    prompt = system_prompt(user_of("LexEval-QA"))
    assert "without revealing specific ground truth details" in prompt
    assert prompt == LEXEVAL_SYSTEM


def test_system_prompts_carry_the_reference_expertise_and_additional_context():
    judge = system_prompt(user_of("JuDGE"))
    assert "\n\nYou understand Chinese legal procedures, judgment document structure" in judge
    assert judge.endswith("produces a document that would be acceptable in actual legal practice.")
    assert system_prompt(user_of("NFCats")).endswith(
        "\n\nThe questions span multiple categories including COMPARISON, DEBATE, EVIDENCE-BASED, "
        "INSTRUCTION, EXPERIENCE, REASON, and FACTOID. Each requires a different approach to "
        "provide a satisfactory response."
    )
    assert (
        "- Properly formatted according to requirements (3 hypotheses with "
        "---IDEA-SEPARATOR---)\n" in system_prompt(user_of("IdeaBench"))
    )


def test_lexeval_user_prompt_is_assembled_as_the_reference():
    item = {"dataset": "LexEval-QA", "answer": "Article 5", "meta": "{}", "lang": "en"}
    history = [Turn("user", "Which article applies?"), Turn("assistant", "Article 7.")]
    request = FeedbackSimulator(item, offline(), user=user_of(item["dataset"])).request(history)
    assert request.messages[0]["content"] == LEXEVAL_SYSTEM
    assert request.messages[1]["content"] == (
        "Analyze this conversation and predict the user's response:\n\n"
        "The user is seeking accurate legal information or guidance. CRITICAL: Focus on the "
        "initial request as the core topic that should be the primary focus throughout this "
        "entire conversation. All responses should be evaluated based on how well they address "
        "this original user intent.\n\n"
        "Conversation History:\nUser: Which article applies?\nAssistant: Article 7.\n\n"
        "EVALUATION CONTEXT:\nReference Answer: Article 5\n"
        "Use this reference to evaluate the accuracy and completeness of the legal information "
        "provided.\n\n"
        "IMPORTANT: If you provide a response (when behavior is continue_conversation), it must "
        "be in English.\n\n" + JSON_TEMPLATE_REFERENCE
    )
    # the offline user reads these fields, not the prompt: unchanged by the prompt texts
    assert request.fields == {
        "question": "Which article applies?",
        "response": "Article 7.",
        "reference": "Article 5",
        "lang": "en",
        "round": 1,
    }


def test_language_line_and_empty_context_as_the_reference():
    history = [Turn("user", "写一份判决书"), Turn("assistant", "……")]
    judge_item = {"dataset": "JuDGE", "answer": "", "meta": "{}", "lang": "zh"}
    zh = FeedbackSimulator(judge_item, None, user=user_of("JuDGE"))
    text = zh.request(history).messages[1]["content"]
    assert "EVALUATION CONTEXT" not in text  # no gold: the reference leaves the block out
    assert (
        "\n\nIMPORTANT: If you provide a response (when behavior is continue_conversation), "
        "it must be in Chinese (中文).\n\nPlease provide" in text
    )
    assert text.endswith(JSON_TEMPLATE_REFERENCE)


def test_writingbench_names_its_domain_from_the_dataset_name():
    """The reference always says "General Writing" (memorybench.md 5.7); mnemoflow names the
    domain the reference's table means for the release's spelling."""
    info = {"criteria": [{"name": "Tone", "criteria_description": "formal"}]}
    item = {
        "dataset": "WritingBench-Politics&Law",
        "answer": "",
        "meta": json.dumps({"info": info}),
    }
    assert evaluation_context(user_of(item["dataset"]), item) == (
        "Domain: Politics & Law\nEvaluation Criteria:\n1. Tone: formal\n\n"
        "Use these criteria to evaluate writing quality and provide feedback based on how well "
        "the writing meets these standards."
    )
    assert "in the Academic & Engineering domain." in system_prompt(
        user_of("WritingBench-Academic&Engineering")
    )
    assert "in the General Writing domain." in system_prompt(
        user_of("WritingBench-Creative&Design")
    )
