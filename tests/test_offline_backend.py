import asyncio

import numpy as np
import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import OfflineBackendError, hashed_embedding
from mnemoflow.llm.offline.judge import judge_qa
from mnemoflow.llm.offline.reader import ABSTAIN, answer
from mnemoflow.llm.types import ChatRequest

CONTEXT = [
    {"text": "user: By the way, my diet is vegan.", "time": "2023-01-01"},
    {"text": "user: My sister's diet is keto, funny enough.", "time": "2023-01-02"},
    {"text": "user: Update: my diet is now pescatarian.", "time": "2023-02-01"},
    {"text": "user: Can you give me tips about the weather?", "time": "2023-02-02"},
]


def test_reader_prefers_the_newest_own_statement():
    reply = answer({"question": "What is my diet?", "context": CONTEXT})
    assert "pescatarian" in reply


def test_reader_abstains_without_evidence():
    assert answer({"question": "What is my car model?", "context": CONTEXT}) == ABSTAIN
    assert answer({"question": "What is my diet?", "context": []}) == ABSTAIN


def test_reader_never_answers_with_a_remembered_copy_of_the_question():
    context = [
        "Speaker user says: Pick my report font, please.",
        "Speaker user says: That is not right. My preferred report font is Garamond.",
    ]
    reply = answer({"question": "Pick my report font, please.", "context": context})
    assert reply == "My preferred report font is Garamond."
    assert answer({"question": "Pick my report font, please.", "context": context[:1]}) == ABSTAIN


def test_reader_chooses_an_option_from_the_evidence():
    fields = {
        "question": "What is my diet?",
        "context": CONTEXT,
        "options": ["vegan", "pescatarian"],
    }
    assert answer(fields) == "pescatarian"


@pytest.mark.parametrize(
    ("reference", "response", "abstention", "verdict"),
    [
        ("pescatarian", "user: Update: my diet is now pescatarian.", False, "yes"),
        ("green tea", "I drink green tea every morning", False, "yes"),
        ("green tea", "I drink coffee", False, "no"),
        ("pescatarian", "I don't know.", False, "no"),
        ("never said", "I don't know.", True, "yes"),
        ("never said", "Your car is a Golf.", True, "no"),
    ],
)
def test_judge_by_token_overlap(reference, response, abstention, verdict):
    fields = {"question": "q", "reference": reference, "response": response}
    assert judge_qa({**fields, "abstention": abstention}) == verdict


def test_hashed_embeddings_are_normalized_and_lexical():
    a, b, c = (hashed_embedding(t) for t in ("green tea", "tea green", "volcano documentary"))
    assert np.isclose(np.linalg.norm(a), 1.0)
    assert np.allclose(a, b) and float(a @ c) < 0.5


def test_unknown_task_is_an_error_not_a_reply():
    gateway = Gateway.from_config({}, None)
    request = ChatRequest(role="agent", task="no_such_task", messages=[], fields={})
    with pytest.raises(OfflineBackendError, match="no handler for task 'no_such_task'"):
        asyncio.run(gateway.chat(request))


def test_offline_replies_are_cached_and_recorded_as_offline_heuristic(tmp_path):
    fields = {"question": "What is my diet?", "context": CONTEXT}
    request = ChatRequest(role="agent", task="answer", messages=[], fields=fields)
    first = Gateway.from_config({}, tmp_path / "c.sqlite")
    reply = asyncio.run(first.chat(request))
    assert reply.model == "offline-heuristic" and not reply.cache_hit
    second = Gateway.from_config({}, tmp_path / "c.sqlite")
    again = asyncio.run(second.chat(request))
    assert again.cache_hit and again.text == reply.text
    assert second.ledger.totals().cache_hits == 1
