"""The interactive (AMemGym) loop on a tiny environment: who sees what, rounds per period, memory
writes per buffer rule, checkpoints that never change memory, replay, parse failures."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from mnemoflow.agents.interactive import InteractiveAgent, policy_of
from mnemoflow.data.amemgym import read_environment
from mnemoflow.data.validate import DataError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import HANDLERS, _load_handlers
from mnemoflow.memory.base import build
from mnemoflow.protocols import interactive as it
from mnemoflow.protocols.conversation import Turn
from mnemoflow.protocols.snapshot import MANIFEST
from mnemoflow.protocols.step import StepContext
from mnemoflow.simulators.state_user import StateRevealingUser
from tests.amemgym_fixtures import write_environment

RAG = {"type": "rag", "update_batch": 2, "local_window": 4, "top_k": 5}


@pytest.fixture
def users(tmp_path):
    return read_environment(write_environment(tmp_path))


def gateway(**models) -> Gateway:
    return Gateway.from_config({"embedder": {"backend": "offline"}, **models}, None)


class Recording:
    """A gateway that records every chat request before passing it on."""

    def __init__(self, inner: Gateway):
        self.inner = inner
        self.requests = []

    async def chat(self, request, parse=None):
        self.requests.append(request)
        return await self.inner.chat(request, parse=parse)

    async def embed(self, texts, role="embedder"):
        return await self.inner.embed(texts, role)

    def record_parse_failure(self, role, task):
        self.inner.record_parse_failure(role, task)


def keys(system: str, step: int, protocol: str = it.PROTOCOL) -> dict:
    return {"benchmark": "amemgym", "system": system, "protocol": protocol, "step": step}


def run_chain(users, spec, folder: Path, llm, steps=3, protocol=it.PROTOCOL, sources=None):
    """Steps 0..steps-1 of one system; returns the StepResults, snapshots in folder/step{k}."""
    results, previous = [], None
    for k in range(steps):
        snapshot = folder / f"step{k}"
        source = None if sources is None else sources[k]
        result = asyncio.run(
            it.run_step(
                users, k, StepContext(spec, llm, keys(spec["type"], k, protocol)), previous,
                snapshot, it.Schedule(), source=source,
            )
        )  # fmt: skip
        results.append(result)
        previous = snapshot
    return results


def snapshot_files(folder: Path) -> dict[str, bytes]:
    """Every file of a snapshot except the manifest (which names the protocol)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


# --- who sees what ---------------------------------------------------------------------------


def test_simulated_user_sees_profile_date_first_query_last_two_messages_and_schema(users):
    ana = users[0]
    history = [
        Turn("user", "[Current Time: 2024-02-26 19:30:00]\nMy diet is keto now. Cook?", 0),
        Turn("assistant", "EARLIER-ANSWER", 0),
        Turn("user", "LATER-QUESTION", 1),
        Turn("assistant", "LATEST-ANSWER", 1),
    ]
    request = StateRevealingUser(ana, "2024-02-28", None).request(history)
    prompt = request.messages[0]["content"]
    assert request.role == "user"
    assert "Initial User Profile on (2024-01-28):\nname: ana\noccupation: teacher" in prompt
    assert "Current Date: 2024-02-28" in prompt
    assert "Initial Query: [Current Time: 2024-02-26 19:30:00]\nMy diet is keto now." in prompt
    assert "User: LATER-QUESTION\nAssistant: LATEST-ANSWER" in prompt
    assert "EARLIER-ANSWER" not in prompt  # only the last two messages
    assert "Full Schema (DO NOT reveal values for variables in this schema):" in prompt
    assert '"diet": [\n    "vegan",\n    "keto",\n    "paleo",\n    "raw"\n  ]' in prompt
    assert set(request.fields) == {
        "profile", "start_time", "current_date", "initial_query", "recent", "schema_types", "round"
    }  # fmt: skip
    assert request.fields["recent"] == [
        {"role": "user", "content": "LATER-QUESTION"},
        {"role": "assistant", "content": "LATEST-ANSWER"},
    ]


def test_simulated_user_request_does_not_depend_on_state_questions_or_exposed_values(users):
    ana = users[0]
    history = [Turn("user", "[Current Time: t]\nHello", 0), Turn("assistant", "Hi", 0)]
    before = StateRevealingUser(ana, "2024-02-28", None).request(history)
    periods = [
        dataclasses.replace(
            p,
            state={"diet": "STATE-X", "city": "STATE-Y"},
            sessions=[dataclasses.replace(s, exposed_states={"diet": "EXP-Z"}) for s in p.sessions],
        )
        for p in ana.periods
    ]
    changed = dataclasses.replace(ana, periods=periods, questions=[])
    after = StateRevealingUser(changed, "2024-02-28", None).request(history)
    assert after.messages == before.messages
    assert after.fields == before.fields


def test_during_a_run_every_user_request_holds_at_most_two_recent_messages(users, tmp_path):
    llm = Recording(gateway())
    run_chain(users, RAG, tmp_path, llm, steps=2)
    followups = [r for r in llm.requests if r.role == "user"]
    # period 0: 1 round per session, no follow-up; period 1: 2 users x 2 sessions x 1 follow-up
    assert len(followups) == 4
    assert [len(r.fields["recent"]) for r in followups] == [2, 2, 2, 2]
    for request in followups:
        assert request.fields["current_date"] == "2024-02-28"  # period 1 ends then
        assert request.fields["initial_query"].startswith("[Current Time: 2024-02-2")
        text = request.messages[0]["content"]
        for other in ("What should I cook for dinner?", "Where should I train"):
            assert other not in text  # the checkpoint questions are never shown


# --- rounds per period -----------------------------------------------------------------------


def test_rounds_per_period_and_first_message(users, tmp_path):
    results = run_chain(users, {"type": "full_context", "max_tokens": 10**9}, tmp_path, gateway())
    step0, step1 = results[0].dialogues, results[1].dialogues
    # 2 users x 2 sessions x (1 round = 2 turns) in period 0; x (2 rounds = 4 turns) after
    assert len(step0) == 8 and len(step1) == 16
    session = step1[step1.dialogue_id == "ana_p1_s0"]
    assert session.role.tolist() == ["user", "assistant", "user", "assistant"]
    assert session["round"].tolist() == [0, 0, 1, 1]
    assert session.content.iloc[0] == (
        "[Current Time: 2024-02-26 19:30:00]\nMy diet is keto now. What should I cook this week?"
    )
    assert set(step1.source) == {"generated"}
    assert set(step1.step) == {1} and set(step1.protocol) == {"interactive"}


def test_schedule_knobs_set_the_rounds():
    schedule = it.Schedule(num_rounds_init=2, num_rounds_update=5)
    assert [schedule.rounds(p) for p in (0, 1, 7)] == [2, 5, 5]


# --- memory writes per buffer rule -----------------------------------------------------------


def test_rag_buffer_writes_the_oldest_update_batch_across_sessions_and_periods(users, tmp_path):
    run_chain(users, RAG, tmp_path, gateway(), steps=2)
    memory0 = build(RAG, llm=gateway())
    memory0.load(tmp_path / "step0" / "ana")
    # period 0: 4 messages, below update_batch + local_window = 6: nothing written yet
    assert len(memory0.store) == 0
    assert [m.turn_id for m in memory0.buffer.messages] == [
        "ana_p0_s0_1", "ana_p0_s0_2", "ana_p0_s1_1", "ana_p0_s1_2"
    ]  # fmt: skip
    memory1 = build(RAG, llm=gateway())
    memory1.load(tmp_path / "step1" / "ana")
    # period 1 adds 8 messages: at 6 buffered the oldest 2 are written, four times -> 8 stored
    assert sorted(memory1.store.source_ids()) == sorted(
        ["ana_p0_s0_1", "ana_p0_s0_2", "ana_p0_s1_1", "ana_p0_s1_2"]
        + [f"ana_p1_s0_{k}" for k in (1, 2, 3, 4)]
    )
    assert [m.turn_id for m in memory1.buffer.messages] == [f"ana_p1_s1_{k}" for k in (1, 2, 3, 4)]
    stored = memory1.store.get("ana_p0_s0_1").text
    assert stored.startswith("USER INPUT: [Current Time: 2024-01-26 19:30:00]\nMy diet is vegan")


def test_direct_systems_store_every_pair_after_each_act(users, tmp_path):
    spec = {"type": "bm25_message", "top_k": 5}
    results = run_chain(users, spec, tmp_path, gateway(), steps=2)
    memory = build(spec, llm=gateway())
    memory.load(tmp_path / "step1" / "ben")
    assert len(memory.messages) == 4 + 8
    assert results[1].manifest["stats"]["ben"]["pairs_written"] == 4


def test_native_sends_no_system_prompt_the_other_policies_do():
    """The reference's native agent sends the history and the message only."""
    for spec, system in (({"type": "full_context"}, False), (RAG, True), ({"type": "none"}, True)):
        llm = Recording(gateway())
        agent = InteractiveAgent(build(spec, llm=gateway()), llm)
        agent.begin_session("s0", "2025-01-01")
        asyncio.run(agent.act([Turn("user", "I moved to Lyon.")]))
        asyncio.run(agent.act([Turn("user", "Any tips?")]))
        fields = {"question": "Which city?", "options": ["Lyon", "Oslo"]}
        asyncio.run(agent.ask("Which city?", "amemgym_choice", fields, lambda t: t))
        for request in llm.requests:
            assert (request.messages[0]["role"] == "system") is system, spec
        if not system:  # native: the earlier round as chat turns, then the new message
            roles = [m["role"] for m in llm.requests[1].messages]
            assert roles == ["user", "assistant", "user"]


def test_policy_of_each_system_family():
    llm = gateway()
    assert policy_of(build({"type": "full_context"}, llm=llm)) == "native"
    assert policy_of(build(RAG, llm=llm)) == "retrieved"
    assert policy_of(build({"type": "agentic_external"}, llm=llm)) == "retrieved"
    assert policy_of(build({"type": "agentic_incontext"}, llm=llm)) == "in_context"
    assert policy_of(build({"type": "bm25_session"}, llm=llm)) == "generic"


def test_awi_organizer_merge_never_deletes(users, tmp_path):
    spec = {"type": "agentic_incontext", "prompt": "organizer", "max_entries": 1000}
    run_chain(users, spec, tmp_path, gateway(), steps=3)
    memory = build(spec, llm=gateway())
    memory.load(tmp_path / "step2" / "ana")
    values = {k: e["value"] for k, e in memory.memory.items()}
    # ana's diet went vegan -> keto: the same key is overwritten, not deleted; city is kept
    assert values["user's diet"] == "keto"
    assert values["user's city"] == "Lisbon"  # Osaka is still in the local window at step 2


# --- checkpoints -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", [RAG, {"type": "agentic_external", "top_k": 5}, {"type": "full_context"}]
)
def test_checkpoint_and_recall_never_change_memory(users, tmp_path, spec):
    llm = gateway()
    run_chain(users, spec, tmp_path, llm, steps=2)
    memory = build(spec, llm=llm)
    memory.load(tmp_path / "step1" / "ana")
    agent = InteractiveAgent(memory, llm)
    asyncio.run(it.checkpoint(users[0], 1, agent, it.Schedule()))
    asyncio.run(it.recall(users[0], 1, agent))
    again = tmp_path / "again"
    again.mkdir()
    memory.save(again)
    assert snapshot_files(again) == snapshot_files(tmp_path / "step1" / "ana")
    assert agent.writes == 0


def test_checkpoint_prompt_is_the_reference_prompt_with_seeded_options(users):
    question = users[0].questions[0]
    schedule = it.Schedule(option_seed=5)
    order = schedule.order(users[0], question)
    # seeded per (seed, user, question): another seed or user gives another order
    assert order == [2, 1, 0, 3]
    assert it.Schedule(option_seed=6).order(users[0], question) == [3, 2, 1, 0]
    assert schedule.order(users[1], users[1].questions[0]) == [0, 2, 1, 3]
    prompt, options = it.checkpoint_prompt(question, order)
    assert options == [question.choices[i].answer for i in order]
    assert prompt.startswith(
        "What should I cook for dinner?\n\nPlease select the most suitable answer for my current "
        "situation from the following options:\n(considering my current relevant preferences "
        f"and state information)\n\n1: {options[0]}\n2: {options[1]}\n"
    )
    assert prompt.endswith(
        '```json\n{\n    "answer": int\n}\n```\nOnly keep the JSON format output, do not include '
        "any other content.\n"
    )


def test_checkpoint_replies_are_stored_raw_with_order_and_parse_status(users, tmp_path):
    results = run_chain(users, RAG, tmp_path, gateway(), steps=1)
    replies = results[0].replies
    assert len(replies) == 4  # 2 users x 2 questions
    row = replies.iloc[0]
    assert (row.user_id, row.period, row.question_index) == ("ana", 0, 0)
    assert row.option_order == it.Schedule().order(users[0], users[0].questions[0])
    assert bool(row.parse_ok) and row.attempts == 1
    assert json.loads(row.reply.strip("`").removeprefix("json"))["answer"] in (1, 2, 3, 4)
    recall = results[0].recall
    assert len(recall) == 4 and set(recall.columns) >= {"user_id", "period", "question_index"}
    # period 0 (1 round): the recall probe reads back what the first queries said
    assert json.loads(recall.iloc[1].reply.strip("`").removeprefix("json")) == {
        "city": "Lisbon",
        "diet": "vegan",
    }


def test_unparseable_checkpoint_reply_is_reasked_then_counted_as_a_failure(
    users, tmp_path, monkeypatch
):
    _load_handlers()
    monkeypatch.setitem(HANDLERS, "amemgym_choice", lambda fields: "Option 2 seems best to me.")
    llm = gateway()
    results = run_chain(users, RAG, tmp_path, llm, steps=1)
    replies = results[0].replies
    assert replies.parse_ok.tolist() == [False] * 4
    assert replies.attempts.tolist() == [3] * 4  # 1 + max_parse_retries (2)
    assert replies.reply.tolist() == ["Option 2 seems best to me."] * 4
    entry = llm.ledger.entries["agent/amemgym_choice"]
    assert (entry.parse_failures, entry.reasks) == (4, 8)


def test_parse_failure_is_scored_wrong_by_the_scorer(users, tmp_path, monkeypatch):
    from mnemoflow.eval.amemgym import amemgym_score as score  # an import error must fail, not skip

    _load_handlers()
    monkeypatch.setitem(HANDLERS, "amemgym_choice", lambda fields: "Option 2 seems best to me.")
    results = run_chain(users, RAG, tmp_path, gateway(), steps=1)
    replies = results[0].replies[it.SCORER_COLUMNS["replies"]]
    question_scores, scores = score.score_replies(users, replies)
    assert question_scores.correct.astype(float).tolist() == [0.0] * 4
    assert question_scores.parse_ok.tolist() == [False] * 4
    accuracy = scores[(scores.metric == "accuracy") & scores.period.isna()]
    assert accuracy.value.tolist() == [0.0]


# --- upper bound -----------------------------------------------------------------------------


def test_upper_bound_asks_once_per_user_question_option(users):
    llm = Recording(gateway())
    frame = asyncio.run(it.upper_bound(users, llm, it.Schedule()))
    # 2 users x 2 questions x 4 options
    assert len(frame) == 16 and len(llm.requests) == 16
    assert all(r.role == "agent" and r.task == "amemgym_choice" for r in llm.requests)
    # JSON mode, as the reference's call_llm(json=True)
    assert all(r.response_format == {"type": "json_object"} for r in llm.requests)
    first = llm.requests[0].messages[0]["content"]
    assert "Given that my current relevant preferences and state information are as" in first
    assert '{\n  "diet": "vegan"\n}' in first
    # offline: given the state, the option naming it is picked every time
    for row in frame.itertuples():
        answer = json.loads(row.reply.strip("`").removeprefix("json"))["answer"]
        assert row.option_order[answer - 1] == row.option_index


# --- off-policy replay -----------------------------------------------------------------------


@pytest.mark.parametrize("spec", [RAG, {"type": "agentic_external", "top_k": 5}])
def test_replay_reproduces_the_on_policy_memory_of_a_deterministic_system(users, tmp_path, spec):
    on = run_chain(users, spec, tmp_path / "on", gateway())
    sources = [result.dialogues for result in on]
    replayed = run_chain(
        users, spec, tmp_path / "off", gateway(), protocol=it.REPLAY, sources=sources
    )
    for k in range(3):
        assert snapshot_files(tmp_path / "off" / f"step{k}") == snapshot_files(
            tmp_path / "on" / f"step{k}"
        )
        assert replayed[k].dialogues.content.tolist() == on[k].dialogues.content.tolist()
        assert set(replayed[k].dialogues.source) == {"replayed"}
    assert replayed[2].replies.reply.tolist() == on[2].replies.reply.tolist()


def test_replay_of_another_systems_dialogues_makes_no_agent_act_calls(users, tmp_path):
    native = run_chain(users, {"type": "full_context"}, tmp_path / "native", gateway(), steps=2)
    llm = Recording(gateway())
    run_chain(
        users, RAG, tmp_path / "rag", llm, steps=2, protocol=it.REPLAY,
        sources=[r.dialogues for r in native],
    )  # fmt: skip
    tasks = {r.task for r in llm.requests}
    assert "interactive_act" not in tasks and "amemgym_user_followup" not in tasks
    memory = build(RAG, llm=gateway())
    memory.load(tmp_path / "rag" / "step1" / "ana")
    assert len(memory.store) == 8 and len(memory.buffer.messages) == 4


def test_replay_rejects_a_dialogue_of_another_environment(users, tmp_path):
    on = run_chain(users, RAG, tmp_path / "on", gateway(), steps=1)
    bad = on[0].dialogues.copy()
    bad.loc[0, "content"] = "[Current Time: 1999-01-01 00:00:00]\nSomething else"
    with pytest.raises(Exception, match="user ana period 0 session 0"):
        run_chain(users, RAG, tmp_path / "off", gateway(), steps=1, protocol=it.REPLAY,
                  sources=[bad])  # fmt: skip


# --- offline handlers ------------------------------------------------------------------------


def test_offline_choice_prefers_the_option_the_latest_user_statement_supports():
    _load_handlers()
    options = ["A vegan recipe", "A keto recipe", "A raw food salad"]
    latest = ["user: My diet is vegan now.", "user: My diet is keto now."]
    reply = HANDLERS["amemgym_choice"]({"options": options, "context": latest})
    assert reply == '```json\n{"answer": 2}\n```'
    # the assistant's own words are not the user's state: the user's latest statement wins
    echoed = [*latest, "assistant: From what I remember, your diet is vegan."]
    assert HANDLERS["amemgym_choice"]({"options": options, "context": echoed}) == reply
    # nothing known: the first option (chance under the seeded option order)
    blank = HANDLERS["amemgym_choice"]({"options": options, "context": []})
    assert blank == '```json\n{"answer": 1}\n```'


def test_offline_recall_leaves_out_a_type_the_context_never_mentions():
    _load_handlers()
    reply = HANDLERS["amemgym_recall"](
        {
            "schema": {"diet": ["vegan", "keto"], "city": ["Lisbon", "Osaka"]},
            "context": ["My diet is vegan.", "Actually my diet is keto these days."],
        }
    )
    assert json.loads(reply.strip("`").removeprefix("json")) == {"diet": "keto"}


def test_offline_user_follow_up_names_a_schema_type_and_no_value():
    _load_handlers()
    fields = {"initial_query": "[Current Time: t]\nMy diet is keto.", "round": 1}
    reply = HANDLERS["amemgym_user_followup"]({**fields, "schema_types": ["dietary_style"]})
    assert reply == (
        "That's helpful! Could you also tell me what else I should consider about my dietary style?"
    )
    # another round picks another template and type; never a value
    later = {**fields, "round": 2, "schema_types": ["dietary_style", "home_city", "budget"]}
    assert HANDLERS["amemgym_user_followup"](later) == (
        "Good to know. Is there anything else I should keep in mind regarding my budget?"
    )


def test_offline_assistant_acknowledges_a_new_value_and_recalls_the_believed_one():
    _load_handlers()
    act = HANDLERS["interactive_act"]
    stale = [{"role": "", "text": "USER INPUT: [Current Time: t]\nMy diet is vegan now. Ideas?"}]
    update = "[Current Time: 2024-02-26 19:30:00]\nMy diet is keto now. What should I cook?"
    # a message that states a value is acknowledged with it, never answered with the old one
    assert act({"message": update, "context": stale}) == (
        "Thanks for sharing. Here are some suggestions about diet, keto, cook. "
        "Noted: your diet is keto now."
    )
    # a message about the type brings up what the memory holds; nothing held, nothing said
    ask = "[Current Time: 2024-02-26 19:30:00]\nAnything else about my diet?"
    base = "Thanks for sharing. Here are some suggestions about anything, else, diet."
    assert act({"message": ask, "context": []}) == base
    assert (
        act({"message": ask, "context": stale})
        == base + " From what I remember, your diet is vegan."
    )


def test_dialogue_rows_keep_session_order_past_ten_sessions(tmp_path):
    # Sorting rows by dialogue_id text put "ana_p0_s10" before "ana_p0_s2"; the table keeps the
    # order in which the sessions were conversed.
    from tests.amemgym_fixtures import environment

    env = environment()
    first = env[0]["periods"][0]["sessions"][0]
    env[0]["periods"][0]["sessions"] = [
        {**first, "session_time": f"2024-01-{10 + s} 19:30:00"} for s in range(11)
    ]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(env))
    many = read_environment(path)
    [result] = run_chain(many, {"type": "bm25_message", "top_k": 5}, tmp_path, gateway(), steps=1)
    ana = result.dialogues[result.dialogues.episode_id == "ana"]
    assert list(dict.fromkeys(ana.dialogue_id)) == [f"ana_p0_s{s}" for s in range(11)]
    assert ana["round"].tolist() == [0] * 22 and ana.role.tolist() == ["user", "assistant"] * 11


def test_replay_rejects_a_dialogue_with_another_number_of_rounds(users, tmp_path):
    # The reference asserts len(messages) == 2 x max_rounds; a truncated transcript (here ana's
    # period-1 session 0 without its second round) used to be memorized silently.
    on = run_chain(users, RAG, tmp_path / "on", gateway(), steps=2)
    step1 = on[1].dialogues
    cut = step1[~((step1.dialogue_id == "ana_p1_s0") & (step1["round"] == 1))]
    with pytest.raises(DataError) as info:
        run_chain(users, RAG, tmp_path / "off", gateway(), steps=2, protocol=it.REPLAY,
                  sources=[on[0].dialogues, cut.reset_index(drop=True)])  # fmt: skip
    assert str(info.value) == (
        "source dialogues: user ana period 1 session 0: the replayed dialogue has 2 turns, "
        "the schedule's 2 rounds make 4"
    )
