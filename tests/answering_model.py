"""A model for the test server that answers the workflow's prompts *right*, from what it is shown.

``answer(body)`` is a reply function for :class:`~mnemoflow.testing.openai_server.OpenAITestServer`:
it reads only the request's messages (never the data files, the gold or the user's state) plus
the vocabulary the tiny benchmarks are written in (the synthetic attributes, the feedback subjects,
the AMemGym fixture's values: world knowledge a real model shares with the data's author), and
answers as a careful model would:

- a static-QA reader answers the latest value the user stated for the asked attribute in its
  memory excerpts (a relative's value is not the user's), or says it does not know;
- a judge says yes when the response holds the correct answer (or abstains when it should);
- a MemoryBench-style assistant answers from a correction in its context; the simulated user
  likes an answer holding the reference's value and otherwise corrects it with the reference;
- an AMemGym assistant believes the latest value the user stated (or its memories record) per
  type, picks the option naming those values, recalls them as JSON; its conversational replies
  and the simulated user's follow-ups name no value; the AWI organizer records stated values.

So a pipeline that reads the reply after the server's ``<think>`` block scores every answer
right, while one that reads the draft inside it (``{"answer": 1}``, "Verdict: WRONG", ...) does
not. Any prompt it does not know fails the request loudly (an ``AssertionError`` in the server
is a 500 the run reports), so a new prompt cannot pass silently.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mnemoflow.data.synthetic import ATTRIBUTES
from mnemoflow.data.synthetic_feedback import SUBJECTS
from mnemoflow.testing.openai_server import original_body
from tests.amemgym_fixtures import CITIES, DIETS

#: The AMemGym fixture's types and every value its schema allows.
AMEM_VALUES = {"diet": [*DIETS, "raw"], "city": [*CITIES, "Paris"]}
DONT_KNOW = "I don't know; you never told me."
CHAT_REPLY = "Happy to help with that. Here is a simple plan you can start with."
USER_FOLLOW_UP = "That's helpful! Could you also suggest how to fit it into a busy week?"


def answer(body: dict[str, Any]) -> str:
    messages = original_body(body)["messages"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    last = messages[-1]["content"]
    if "Reply with yes or no only." in last:
        return _judge(last)
    if last.startswith("Memory excerpts:"):
        return _static_reader(last)
    if "Analyze this conversation and predict the user's response" in last:
        return _feedback_user(last)
    if "\n\nBased on the context provided, respond naturally" in last:
        return _feedback_assistant(messages)
    if "Personal Information Organizer" in system:
        return _organizer(last)
    if last.startswith("You are simulating a user in a conversation"):
        return USER_FOLLOW_UP
    context = "\n".join(m["content"] for m in messages[:-1])
    if "Given that my current relevant preferences and state information" in last:
        shown = last.split("are as follows:", 1)[1].split("Please select", 1)[0]
        return _choose(last, json.loads(shown))
    if "Please select the most suitable answer for my current situation" in last:
        return _choose(last, _believed(context))
    if "Based on our previous conversation, select the most appropriate option" in last:
        asked = json.loads(last.split("\n\nBased on our previous", 1)[0])
        believed = _believed(context)
        return "```json\n" + json.dumps({t: believed.get(t, "") for t in asked}) + "\n```"
    if last.startswith("[Current Time: ") or last == USER_FOLLOW_UP:
        return CHAT_REPLY
    if _subject_in(last):  # a feedback item asked with no context (no memory), or a later round
        return _feedback_assistant(messages)
    raise AssertionError(f"answering model: unknown prompt {last[:120]!r}")


# ---- static QA (the synthetic benchmark) ----------------------------------------------------


def _static_reader(prompt: str) -> str:
    question = prompt.split("\nQuestion: ", 1)[1].split("\n", 1)[0]
    attribute = next(a for a in ATTRIBUTES if question == f"What is my {a.phrase}?")
    values = "|".join(re.escape(v) for v in attribute.values)
    stated = re.compile(
        rf"\bmy {re.escape(attribute.phrase)} (?:is now|is|has changed to) ({values})\b"
    )
    latest = None
    excerpts = prompt.split("\n\nCurrent date:", 1)[0]
    for stamp, text in re.findall(r"^\[([^\]]+)\] (.*)$", excerpts, flags=re.MULTILINE):
        for value in stated.findall(text):
            if latest is None or stamp >= latest[0]:
                latest = (stamp, value)
    return f"Your {attribute.phrase} is {latest[1]}." if latest else DONT_KNOW


def _judge(prompt: str) -> str:
    response = prompt.split("\nModel response: ", 1)[1].rsplit("\n\n", 1)[0]
    if "\nCorrect answer: " in prompt:
        gold = prompt.split("\nCorrect answer: ", 1)[1].split("\n", 1)[0]
        return "yes" if gold.lower() in response.lower() else "no"
    abstains = re.search(r"\b(?:don't|do not) know\b|never (?:told|mentioned)", response, re.I)
    return "yes" if abstains else "no"  # an abstention question


# ---- MemoryBench-style feedback (the synthetic_feedback benchmark) ----------------------------


def _subject_in(text: str) -> str | None:
    for _, subject, _ in SUBJECTS:
        if re.search(rf"\b{re.escape(subject)}\b", text):
            return subject
    return None


def _feedback_assistant(messages: list[dict[str, Any]]) -> str:
    """The item's subject from the first user message's question; its value from the latest
    correction in the context (memory excerpts or the conversation so far)."""
    first = next(m["content"] for m in messages if m["role"] == "user")
    question = first.split("\n\nUser: \n", 1)[-1].split("\n\nBased on the context", 1)[0]
    subject = _subject_in(question)
    if subject is None:
        raise AssertionError(f"answering model: no known subject in {question!r}")
    context = "\n".join(m["content"] for m in messages)
    said = re.findall(rf"\b{re.escape(subject)} is ([^.\n]+)\.", context)
    return f"Your {subject} is {said[-1]}." if said else DONT_KNOW


def _feedback_user(prompt: str) -> str:
    reference = prompt.split("Reference Answer: ", 1)[1].split("\n", 1)[0]
    value = re.search(r" is (.+)\.$", reference).group(1)
    history = prompt.split("Conversation History:\n", 1)[1].split("\n\nEVALUATION CONTEXT", 1)[0]
    replied = history.rsplit("\nAssistant: ", 1)[1]
    if value.lower() in replied.lower():
        verdict = {"implicit_action": "like", "behavior": "end_conversation", "response": None}
    else:
        verdict = {
            "implicit_action": "dislike",
            "behavior": "continue_conversation",
            "response": f"That's not right. {reference}",
        }
    return json.dumps({"reasoning": "compared with the reference", **verdict})


# ---- AMemGym (the tiny fixture environment) ---------------------------------------------------


def _believed(context: str) -> dict[str, str]:
    """Per type, the value of its latest statement ("My diet is keto", a memory "diet: keto")."""
    latest: dict[str, tuple[int, str]] = {}
    for kind, values in AMEM_VALUES.items():
        pattern = rf"\b{kind}(?: is|\"?:) ?\"?({'|'.join(map(re.escape, values))})\b"
        for match in re.finditer(pattern, context, flags=re.IGNORECASE):
            value = next(v for v in values if v.lower() == match.group(1).lower())
            if kind not in latest or match.start() >= latest[kind][0]:
                latest[kind] = (match.start(), value)
    return {kind: value for kind, (_, value) in latest.items()}


def _choose(prompt: str, state: dict[str, str]) -> str:
    """The option naming the most of ``state``'s values (the first on a tie), as JSON."""
    options = re.findall(r"^(\d+): (.*)$", prompt, flags=re.MULTILINE)
    words = {v.lower() for v in state.values()}

    def named(text: str) -> int:
        return len(words & set(re.findall(r"\w+", text.lower())))

    best = max(options, key=lambda option: (named(option[1]), -int(option[0])))
    return '```json\n{\n    "answer": ' + best[0] + "\n}\n```"


def _organizer(prompt: str) -> str:
    conversation = json.loads(prompt.split("Conversation:\n", 1)[1])
    said = "\n".join(m["content"] for m in conversation if m["role"] == "user")
    return json.dumps(_believed(said))
