"""Reading prompts: LongMemEval context modes / formats / methods, LoCoMo answer prompts."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from mnemoflow.agents import locomo_reader as lr
from mnemoflow.agents import longmemeval_reader as lme
from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import MemoryItem
from tests.eval_fixtures import locomo_tables, longmemeval_tables


def _episode(qid="q_move"):
    sessions, episodes, questions = longmemeval_tables()
    turns = lme.episode_turns(sessions, episodes, qid)
    question = questions.set_index("question_id").loc[qid].to_dict() | {"question_id": qid}
    return turns, question


def test_episode_turns_follow_the_episode_order():
    turns, _ = _episode()
    assert list(dict.fromkeys(turns["session_id"])) == ["s_c", "s_a", "answer_s_b"]


def test_long_context_renders_sessions_in_json_with_dates():
    turns, question = _episode()
    options = lme.ReadingOptions(mode="long_context", history_format="json")
    chunks = lme.prepare(lme.history_chunks(question, turns, options), options)
    request = lme.build_request(question, chunks, options)
    prompt = request.messages[0]["content"]
    assert "### Session 1:\nSession Date: 2023/04/20 (Thu) 08:00" in prompt
    assert (
        json.dumps(
            [
                {"role": "user", "content": "My sister lives in Porto."},
                {"role": "assistant", "content": "Porto is great for a weekend."},
            ]
        )
        in prompt
    )
    assert "Current Date: 2023/05/20 (Sat) 12:00\nQuestion: Where did I move" in prompt
    assert request.task == "answer" and request.role == "agent"
    assert [c["time"] for c in request.fields["context"]] == [
        "2023/04/20 (Thu) 08:00",
        "2023/05/01 (Mon) 10:00",
        "2023/05/10 (Wed) 09:00",
    ]


def test_nl_format_and_user_only():
    turns, question = _episode()
    options = lme.ReadingOptions(mode="long_context", history_format="nl", user_only=True)
    chunks = lme.prepare(lme.history_chunks(question, turns, options), options)
    prompt = lme.build_request(question, chunks, options).messages[0]["content"]
    assert "\n\nuser: I moved to Lisbon for my new job." in prompt
    assert "assistant:" not in prompt


def test_budget_keeps_the_newest_sessions():
    turns, question = _episode()
    full = lme.ReadingOptions(mode="long_context")
    chunks = lme.history_chunks(question, turns, full)
    newest_cost = lme.count_tokens(lme.render_history(chunks[-1:], "json"))
    tight = lme.ReadingOptions(mode="long_context", budget_tokens=newest_cost + 1)
    kept = lme.prepare(chunks, tight)
    assert [c.time for c in kept] == ["2023/05/10 (Wed) 09:00"]
    # a single session over budget keeps its last turns
    session = chunks[1]
    last_turn = replace(session, turns=session.turns[-1:], source_ids=session.source_ids[-1:])
    tiny = lme.ReadingOptions(
        mode="long_context", budget_tokens=lme.count_tokens(lme.render_history([last_turn], "json"))
    )
    kept = lme.prepare([session], tiny)
    assert [c.source_ids for c in kept] == [["s_a_4"]]


def test_history_budget_counts_model_tokens():
    # o200k_base splits a session date into 13 tokens: 202|3|/|05|/|10| (|Wed|)| |09|:|00
    # (a word-based estimate says 8), and a JSON turn list costs its punctuation too
    assert lme.count_tokens("2023/05/10 (Wed) 09:00") == 13
    assert lme.count_tokens('{"role": "user"}') == 6


def test_oracle_reads_only_the_evidence_sessions():
    turns, question = _episode("q_cat")
    options = lme.ReadingOptions(mode="oracle")
    chunks = lme.history_chunks(question, turns, options)
    assert [c.source_ids[0] for c in chunks] == ["s_a_1"]


def test_retrieval_expands_a_user_turn_to_its_round_and_resorts_by_date():
    turns, question = _episode()
    items = [
        MemoryItem(
            id="m1",
            text="I moved to Lisbon for my new job.",
            score=2.0,
            source_ids=["answer_s_b_1"],
            time="2023/05/10 (Wed) 09:00",
        ),
        MemoryItem(
            id="m2",
            text="My sister lives in Porto.",
            score=1.0,
            source_ids=["s_c_1"],
            time="2023/04/20 (Thu) 08:00",
        ),
        MemoryItem(
            id="m3", text="The user likes cycling.", score=0.5, source_ids=[], time="2023/05/02"
        ),
    ]
    options = lme.ReadingOptions(mode="retrieval", top_k=2)
    chunks = lme.prepare(lme.item_chunks(items, turns), options)
    # top_k keeps the first two retrieved, then they are shown by date
    assert [c.source_ids for c in chunks] == [["s_c_1", "s_c_2"], ["answer_s_b_1", "answer_s_b_2"]]
    assert lme.context_ids(chunks) == ["s_c_1", "s_c_2", "answer_s_b_1", "answer_s_b_2"]
    fact = lme.item_chunks(items[2:], turns)[0]
    assert fact.text == "The user likes cycling." and fact.turns == []


def test_official_log_ids_undo_noans_and_expand_turns():
    turns, _ = _episode()
    chunks = lme.id_chunks(["noans_s_a_3", "answer_s_b", "unknown_1"], turns)
    # the official corpus_id replace('noans_', 'answer_') maps noans_s_a_3 to answer_s_a_3 here,
    # which is not a turn of this fixture, so it is skipped like any unknown id
    assert [c.source_ids for c in chunks] == [["answer_s_b_1", "answer_s_b_2"]]
    assert [c.source_ids for c in lme.id_chunks(["s_a_3"], turns)] == [["s_a_3", "s_a_4"]]


def test_chunks_for_dispatches_on_the_mode():
    turns, question = _episode()
    log = lme.chunks_for(question, turns, lme.ReadingOptions(top_k=1), log_ids=["noans_s_c_1"])
    assert log == []  # answer_s_c_1 is no turn of the fixture
    log = lme.chunks_for(question, turns, lme.ReadingOptions(top_k=1), log_ids=["s_c_1", "s_a"])
    assert [c.source_ids for c in log] == [["s_c_1", "s_c_2"]]
    oracle = lme.chunks_for(question, turns, lme.ReadingOptions(mode="oracle"))
    assert lme.context_ids(oracle) == ["answer_s_b_1", "answer_s_b_2"]
    assert lme.chunks_for(question, turns, lme.ReadingOptions(mode="no_history")) == []


def test_no_history_and_chain_of_note_prompts():
    turns, question = _episode()
    none = lme.build_request(question, [], lme.ReadingOptions(mode="no_history"))
    assert none.messages[0]["content"] == "Where did I move for my new job?"
    assert none.fields["context"] == []
    options = lme.ReadingOptions(mode="long_context", method="con")
    request = lme.build_request(question, lme.history_chunks(question, turns, options), options)
    assert "first extract all the relevant information" in request.messages[0]["content"]
    assert request.messages[0]["content"].endswith("Answer (step by step):")


def test_separate_notes_then_answer_offline(tmp_path):
    turns, question = _episode()
    options = lme.ReadingOptions(mode="long_context", method="con_separate")
    chunks = lme.prepare(lme.history_chunks(question, turns, options), options)
    notes_requests = lme.note_requests(question, chunks)
    assert len(notes_requests) == 3 and {r.task for r in notes_requests} == {"reading_note"}
    gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")

    async def run():
        notes = [(await gateway.chat(r)).text for r in notes_requests]
        request = lme.build_request(question, lme.with_notes(chunks, notes), options)
        return notes, request, (await gateway.chat(request)).text

    notes, request, answer = asyncio.run(run())
    # Porto's session has nothing on the question; the bike session shares "new" with it
    assert notes[0] == "empty" and notes[2] == "I moved to Lisbon for my new job."
    assert '{"session_summary": "empty"}' in request.messages[0]["content"]
    assert [c["text"] for c in request.fields["context"]] == notes
    assert answer == "I moved to Lisbon for my new job."  # the note that answers the question


def test_bad_reader_options_name_the_key():
    with pytest.raises(ConfigError, match="reader.mode"):
        lme.ReadingOptions(mode="everything")
    with pytest.raises(ConfigError, match="unknown keys"):
        lme.ReadingOptions.from_config({"topk": 3})


# --- LoCoMo -------------------------------------------------------------------------------------


def _locomo(index):
    turns, questions = locomo_tables()
    return turns, questions.iloc[index].to_dict()


def test_locomo_plain_and_temporal_questions():
    turns, question = _locomo(3)
    request = lr.build_request(question, [], lr.LocomoReadingOptions(mode="long_context"), turns)
    prompt = request.messages[0]["content"]
    assert prompt.startswith("Below is a conversation between two people: Caroline and Melanie.")
    assert '\nDATE: 8:00 pm on 8 May, 2023\nCONVERSATION:\nCaroline said, "I went to' in prompt
    assert prompt.endswith("Question: What did Melanie paint? Short answer:")
    assert "exact words from the context" in prompt
    _, temporal = _locomo(1)
    asked, options = lr.question_text(temporal)
    assert asked.endswith("Use DATE of CONVERSATION to answer with an approximate date.")
    assert options == []


def test_locomo_adversarial_is_a_seeded_two_option_choice():
    turns, question = _locomo(4)
    options = lr.LocomoReadingOptions(mode="oracle", seed=3)
    request = lr.build_request(question, [], options, turns)
    choices = request.fields["options"]
    assert sorted(choices) == sorted(["Not mentioned in the conversation", "a sunrise"])
    assert f"(a) {choices[0]} (b) {choices[1]}" in request.messages[0]["content"]
    assert lr.build_request(question, [], options, turns).fields["options"] == choices
    orders = {
        tuple(lr.choice_options({**question, "question_id": f"c_q{i}"}, 0)) for i in range(20)
    }
    assert len(orders) == 2  # both orders occur across questions
    assert request.messages[0]["content"].startswith("8:00 pm on 8 May, 2023: Melanie said,")


def test_locomo_resolve_choice_follows_the_official_letter_rule():
    options = ["a sunrise", "Not mentioned in the conversation"]
    assert lr.resolve_choice("a", options) == "a sunrise"
    assert lr.resolve_choice("(b)", options) == "Not mentioned in the conversation"
    assert lr.resolve_choice("B", options) == "Not mentioned in the conversation"
    assert lr.resolve_choice("Not mentioned.", options) == "Not mentioned."
    assert lr.resolve_choice("a", []) == "a"


def test_locomo_retrieval_keeps_rank_order_and_budget_keeps_newest_turns():
    turns, question = _locomo(0)
    items = [
        {"text": "x", "time": "", "source_ids": ["D2:1"]},
        {"text": "x", "time": "", "source_ids": ["D1:3"]},
        {"text": "Caroline likes books.", "time": "May 2023", "source_ids": []},
    ]
    request = lr.build_request(question, items, lr.LocomoReadingOptions(mode="retrieval"), turns)
    lines = request.messages[0]["content"].split("\n\n")[0].split("\n")
    assert lines[0].startswith('1:00 pm on 25 May, 2023: Melanie said, "I ran')
    assert lines[1].startswith('8:00 pm on 8 May, 2023: Caroline said, "I am researching')
    assert lines[2] == "May 2023: Caroline likes books."
    # passages carry the speaker, as the prompt does ("What did Caroline research?")
    assert request.fields["context"][1] == {
        "text": 'Caroline said, "I am researching adoption agencies."',
        "time": "8:00 pm on 8 May, 2023",
    }
    context, kept = lr.conversation_context(
        turns, budget_tokens=65
    )  # o200k tokens: the two newest turns fit
    assert kept == ["D2:1", "D2:2"]
    assert "DATE: 1:00 pm on 25 May, 2023" in context and "8 May" not in context


def test_locomo_reader_options_from_config():
    assert lr.LocomoReadingOptions.from_config({"mode": "oracle", "seed": 2}).seed == 2
    with pytest.raises(ConfigError, match="unknown keys"):
        lr.LocomoReadingOptions.from_config({"top_k": 5})
    with pytest.raises(ConfigError, match="reader.mode"):
        lr.LocomoReadingOptions(mode="no_history")


def test_option_parser_accepts_one_named_option_or_a_decline():
    from mnemoflow.agents.readers import option_parser
    from mnemoflow.llm.types import UnparseableReply

    parse = option_parser(["cat", "black cat", "dog"])
    assert parse("The black cat.") == "The black cat."  # the longer option wins over "cat"
    assert parse("Dog") == "Dog"
    assert parse("I don't know.") == "I don't know."
    for text in ("", "  ", "a cat or a dog", "a parrot"):
        with pytest.raises(UnparseableReply):
            parse(text)


def test_locomo_choice_parser_re_asks_only_empty_replies():
    from mnemoflow.llm.types import UnparseableReply

    parse = lr.choice_parser(["a sunrise", "Not mentioned in the conversation"])
    assert parse("(b)") == "Not mentioned in the conversation"
    assert parse("She painted a lake.") == "She painted a lake."  # free text is an answer
    with pytest.raises(UnparseableReply):
        parse(" ")


class _Scripted:
    """An agent backend whose replies come from a list, one per call."""

    def __init__(self, texts):
        self.texts = list(texts)
        self.calls = 0

    async def complete(self, request, spec):
        from mnemoflow.llm.types import Completion

        self.calls += 1
        return Completion(text=self.texts.pop(0), model="scripted")

    async def aclose(self):
        return None


def test_generic_reader_with_options_re_asks_a_reply_naming_no_option(tmp_path):
    from mnemoflow.agents.readers import read

    gateway = Gateway({}, cache_path=tmp_path / "cache.sqlite")
    backend = _Scripted(["Something else entirely.", "Lisbon"])
    gateway._backends["agent"] = backend
    question = {"question": "Where?", "question_time": "", "options": ["Lisbon", "Porto"]}
    answer = asyncio.run(read("generic", {}, question, [], None, gateway, use_options=True))
    assert (answer.response, answer.reply.attempts, backend.calls) == ("Lisbon", 2, 2)
    assert gateway.ledger.totals().reasks == 1
