"""Self-evolving AWI (AMemGym Table 3): feedback texts, the types section as snapshot state,
evolution on a tiny environment, the no-evolution control, unparseable rewrites, the offline
heuristic, and the scores / report rows built from the evolution records."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from mnemoflow.agents import self_evolution as se
from mnemoflow.data import amemgym_procedural
from mnemoflow.data.amemgym import read_environment
from mnemoflow.errors import ConfigError
from mnemoflow.eval.amemgym.amemgym_replies import parse_answer
from mnemoflow.eval.amemgym.amemgym_rows import evolution_rows
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline import HANDLERS, _load_handlers
from mnemoflow.llm.offline.writer import section_types
from mnemoflow.memory import writer
from mnemoflow.memory.base import Message, build
from mnemoflow.protocols import interactive as it
from mnemoflow.protocols.step import StepContext
from mnemoflow.report.evolution import evolution_table
from mnemoflow.report.summary import summary_markdown
from tests.amemgym_fixtures import write_environment
from tests.scripted_backend import scripted_gateway

AWI = {"type": "agentic_incontext", "update_batch": 2, "local_window": 4, "prompt": "organizer"}
OPTIONS = ["Cook a vegan curry", "Grill a steak", "Order a pizza"]


@pytest.fixture
def users(tmp_path):
    return read_environment(write_environment(tmp_path))


class Recording:
    """A gateway that records every chat request before passing it on."""

    def __init__(self, inner):
        self.inner = inner
        self.requests = []

    async def chat(self, request, parse=None):
        self.requests.append(request)
        return await self.inner.chat(request, parse=parse)

    def record_parse_failure(self, role, task):
        self.inner.record_parse_failure(role, task)


#: Two rounds per session in period 0 too (v1.extra-like), so memory is updated in every period.
SCHEDULE = it.Schedule(num_rounds_init=2)


def chain(users, spec, folder, steps=3, make_gateway=None):
    """Steps 0..steps-1 with a fresh recording gateway each; (results, requests per step)."""
    results, requests, previous = [], [], None
    for k in range(steps):
        llm = Recording(make_gateway() if make_gateway else Gateway.from_config({}))
        keys = {"benchmark": "b", "system": "s", "protocol": it.PROTOCOL, "step": k}
        snapshot = folder / f"step{k}"
        results.append(
            asyncio.run(
                it.run_step(users, k, StepContext(spec, llm, keys), previous, snapshot, SCHEDULE)
            )
        )
        requests.append(llm.requests)
        previous = snapshot
    return results, requests


def organizer_sections(requests) -> set[str]:
    """The types sections the step's memory updates were sent (read back from the prompt)."""
    out = set()
    for r in requests:
        if r.task == writer.ORGANIZE:
            system = r.messages[0]["content"]
            assert system.startswith(writer.ORGANIZE_INTRO) and system.endswith(
                writer.ORGANIZE_RULES
            )
            out.add(system[len(writer.ORGANIZE_INTRO) : -len(writer.ORGANIZE_RULES)])
    return out


def load(spec, folder):
    memory = build(spec, llm=Gateway.from_config({}))
    memory.load(folder)
    return memory


# --- feedback texts ---------------------------------------------------------------------------


def test_question_only_feedback_is_the_question_and_the_memories_shown():
    item = se.feedback_item("question_only", " What should I cook? ", OPTIONS, 2, "- diet: vegan")
    assert item == {"question": "Question: What should I cook?;", "memories_shown": "- diet: vegan"}


def test_complete_feedback_letters_the_options_and_names_the_option_actually_chosen():
    # worked example: the assistant answered 2 ("Grill a steak"); its letter is B. The reference's
    # letters[answer] would say C, and for answer 3 a non-existent D.
    item = se.feedback_item("complete", "What should I cook?", OPTIONS, 2, "- diet: vegan")
    assert item == {
        "question": "Question: What should I cook?;\n(A) Cook a vegan curry;\n"
        "(B) Grill a steak;\n(C) Order a pizza;",
        "assistant_choice": "B",
        "memories_shown": "- diet: vegan",
    }
    assert se.feedback_item("complete", "q", OPTIONS, 3, "")["assistant_choice"] == "C"
    assert se.feedback_item("complete", "q", OPTIONS, 1, "")["assistant_choice"] == "A"


def test_complete_feedback_says_when_the_answer_did_not_parse():
    item = se.feedback_item("complete", "q", OPTIONS, None, "")
    assert item["assistant_choice"] == se.NO_ANSWER
    with pytest.raises(ValueError, match="not one of options 1..3"):
        se.chosen_letter(4, 3)


def test_evolution_request_has_a_non_empty_system_prompt_and_the_section():
    request = se.evolution_request("1. diet: what they eat", "complete", [{"q": 1}], [])
    assert request.role == "agent" and request.task == "evolve-memory-types"
    assert request.messages[0] == {"role": "system", "content": se.EVOLVE_SYSTEM}
    assert "Types of Information to Remember" in se.EVOLVE_SYSTEM  # the reference sent ""
    assert "1. diet: what they eat" in request.messages[1]["content"]


@pytest.mark.parametrize(
    "reply",
    [
        "no json here",
        '{"new_types": "", "changes": []}',
        '{"new_types": "1. a: b", "changes": "added a"}',
        '{"changes": ["x"]}',
        "[1, 2]",
    ],
)
def test_parse_evolution_rejects_malformed_replies(reply):
    with pytest.raises(ValueError):
        se.parse_evolution(reply)


def test_parse_evolution_reads_a_fenced_reply():
    text = '```json\n{"new_types": "1. a: b\\n2. c: d", "changes": ["added c"]}\n```'
    assert se.parse_evolution(text) == ("1. a: b\n2. c: d", ["added c"])


# --- the section as state ---------------------------------------------------------------------


def test_evolved_section_with_braces_survives_save_load_and_reaches_the_update_prompt(tmp_path):
    spec = {**AWI, "evolve": "complete"}
    memory = build(spec, llm=Gateway.from_config({}))
    section = '1. diet {kind}: what they eat, e.g. {"diet": "vegan"} or {}\n2. {current_memories}'
    memory.set_memory_types(section)
    memory.save(tmp_path)
    again = load(spec, tmp_path)
    assert again.memory_types == section
    message = Message(turn_id="t1", session_id="s", role="user", content="hi", time="2024")
    request = writer.organize_request([], [message], again.memory_types)
    assert request.messages[0]["content"] == (
        writer.ORGANIZE_INTRO + section + writer.ORGANIZE_RULES
    )
    assert request.fields["memory_types"] == section


def test_evolve_needs_the_organizer_prompt_and_a_known_variant():
    with pytest.raises(ConfigError, match=r"systems.x.evolve: .*prompt: organizer"):
        build({"type": "agentic_incontext", "evolve": "complete"}, name="x")
    with pytest.raises(ConfigError, match=r"systems.x.evolve"):
        build({**AWI, "evolve": "always"}, name="x")


# --- evolution on a tiny environment ----------------------------------------------------------


@pytest.mark.parametrize("variant", ["question_only", "complete"])
def test_step_k_plus_1_updates_memory_with_the_section_step_k_evolved(users, tmp_path, variant):
    spec = {**AWI, "evolve": variant}
    results, requests = chain(users, spec, tmp_path)
    step0 = results[0].evolution.set_index("user_id")
    assert list(step0.index) == ["ana", "ben"]
    # offline, complete feedback leaves ana's section alone: both of her answers were supported
    # by her memories (see the offline heuristic); question-only adds every uncovered topic
    expected = {"question_only": [True, True], "complete": [False, True]}[variant]
    assert step0["changed"].tolist() == expected
    assert step0["old_section"].tolist() == [writer.MEMORY_TYPES] * 2
    # period 0's updates used the initial section ...
    assert organizer_sections(requests[0]) == {writer.MEMORY_TYPES}
    # ... and the snapshot carries the evolved one, which period 1's updates use
    for uid in ("ana", "ben"):
        assert load(spec, tmp_path / "step0" / uid).memory_types == step0.loc[uid, "new_section"]
    ben = step0.loc["ben", "new_section"]
    assert ben.startswith(writer.MEMORY_TYPES + "\n8. ")
    assert organizer_sections(requests[1]) == set(step0["new_section"])
    assert ben in organizer_sections(requests[1])
    step1 = results[1].evolution
    assert (step1["old_section"] == step0["new_section"].to_numpy()).all()
    assert organizer_sections(requests[2]) == set(step1["new_section"])
    # the rewrite is one agent call per user and period, recorded with its feedback
    evolves = [r for r in requests[0] if r.task == se.EVOLVE_TASK]
    assert [r.role for r in evolves] == ["agent", "agent"]
    feedback = json.loads(step0.loc["ana", "feedback"])
    assert [f["question"].splitlines()[0] for f in feedback] == [
        "Question: What should I cook for dinner?;",
        "Question: Where should I train on weekends?;",
    ]
    assert ("assistant_choice" in feedback[0]) == (variant == "complete")


def test_complete_feedback_letter_matches_the_checkpoint_answer(users, tmp_path):
    results, requests = chain(users, {**AWI, "evolve": "complete"}, tmp_path, steps=1)
    replies = results[0].replies
    feedback = json.loads(results[0].evolution.set_index("user_id").loc["ana", "feedback"])
    for item, (_, row) in zip(feedback, replies[replies.user_id == "ana"].iterrows(), strict=True):
        answer = parse_answer(row["reply"], len(row["option_order"]))
        assert item["assistant_choice"] == "ABCD"[answer - 1]
        shown = [line for line in item["question"].splitlines()[1:]]
        assert len(shown) == len(row["option_order"])


def test_evolution_changes_what_gets_remembered(tmp_path):
    """On a procedural environment the offline writer also remembers sentences naming an evolved
    type (the screen-time statement under "evening"): the evolved memory holds more types."""
    data = amemgym_procedural.generate({"users": 1, "periods": 2, "seed": 7})
    amemgym_procedural.write_data(data, tmp_path)
    users = read_environment(tmp_path / "data.json")
    for name in ("evolved", "control"):
        (tmp_path / name).mkdir()
    chain(users, {**AWI, "evolve": "question_only"}, tmp_path / "evolved")
    chain(users, {**AWI, "evolve": "none"}, tmp_path / "control")
    uid = users[0].id
    evolved = load(AWI, tmp_path / "evolved" / "step2" / uid)
    control = load(AWI, tmp_path / "control" / "step2" / uid)
    added = set(evolved.memory) - set(control.memory)
    named = {t for t, _ in section_types(evolved.memory_types)}
    assert added <= named
    assert sorted(added) == ["evening"]
    said = "My screen time outside work is most of the evening each day."
    assert evolved.memory["evening"]["value"] == said


def test_no_evolution_keeps_the_section_and_sends_awis_exact_prompts(users, tmp_path):
    (tmp_path / "none").mkdir()
    (tmp_path / "awi").mkdir()
    spec = {**AWI, "evolve": "none"}
    results, requests = chain(users, spec, tmp_path / "none")
    _, plain = chain(users, AWI, tmp_path / "awi")
    for k in range(3):
        rows = results[k].evolution
        assert rows["changed"].tolist() == [False, False]
        assert rows["attempts"].tolist() == [0, 0]
        assert (rows["new_section"] == writer.MEMORY_TYPES).all()
        assert not [r for r in requests[k] if r.task == se.EVOLVE_TASK]
        assert organizer_sections(requests[k]) == {writer.MEMORY_TYPES}
        assert [r.messages for r in requests[k]] == [r.messages for r in plain[k]]
    assert load(spec, tmp_path / "none" / "step2" / "ana").memory_types == writer.MEMORY_TYPES


def test_a_system_without_evolve_records_no_evolution(users, tmp_path):
    results, _ = chain(users, AWI, tmp_path, steps=1)
    assert results[0].evolution.empty
    assert list(results[0].evolution.columns) == se.EVOLUTION.names


def test_unparseable_rewrite_keeps_the_section_and_is_counted(users, tmp_path):
    _load_handlers()

    def script(request, n):
        if request.task == se.EVOLVE_TASK:
            return "I would add the user's diet."
        return HANDLERS[request.task](request.fields)

    def make():
        return scripted_gateway(script, roles=("agent",))[0]

    spec = {**AWI, "evolve": "complete"}
    results, requests = chain(users, spec, tmp_path, steps=2, make_gateway=make)
    rows = results[1].evolution
    assert rows["parse_ok"].tolist() == [False, False]
    assert rows["attempts"].tolist() == [3, 3]  # 1 + the agent role's 2 re-asks
    assert rows["raw_replies"].map(len).tolist() == [3, 3]
    assert rows["changed"].tolist() == [False, False]
    assert (rows["new_section"] == writer.MEMORY_TYPES).all()
    memory = load(spec, tmp_path / "step1" / "ana")
    assert memory.memory_types == writer.MEMORY_TYPES
    assert (memory.evolutions, memory.evolution_failures) == (2, 2)
    assert organizer_sections(requests[1]) == {writer.MEMORY_TYPES}
    assert results[1].manifest["stats"]["ana"]["evolution_failures"] == 2


# --- the offline heuristic --------------------------------------------------------------------


def test_offline_question_only_adds_the_uncovered_topics_of_every_question():
    _load_handlers()
    reply = json.loads(
        HANDLERS[se.EVOLVE_TASK](
            {
                "variant": "question_only",
                "memory_types": "1. Diet: what the user eats.",
                "feedback": [
                    {"question": "What should I cook for dinner?", "memories": "- diet: vegan"},
                    {"question": "How can I reduce stress at work?", "memories": "- work: nurse"},
                ],
            }
        )
    )
    assert reply["new_types"].splitlines() == [
        "1. Diet: what the user eats.",
        '2. cook: what the user says about their cook (needed for "What should I cook for '
        'dinner?").',
        '3. dinner: what the user says about their dinner (needed for "What should I cook for '
        'dinner?").',
        '4. reduce: what the user says about their reduce (needed for "How can I reduce stress at '
        'work?").',
        '5. stress: what the user says about their stress (needed for "How can I reduce stress at '
        'work?").',
    ]
    assert len(reply["changes"]) == 4


def test_offline_complete_skips_a_question_the_memories_supported():
    _load_handlers()
    feedback = [
        # "vegan" sets the chosen (A) apart and the memories mention it: supported, no new type
        {
            "question": "What should I cook?",
            "memories": "- diet: vegan",
            "options": OPTIONS,
            "chosen": "A",
        },  # fmt: skip
        # nothing in memory supports (B): its topic becomes a type, with what the options differ on
        {
            "question": "Where should I run?",
            "memories": "- diet: vegan",
            "options": ["A coastal trail", "A city park"],
            "chosen": "B",
        },  # fmt: skip
    ]
    fields = {"variant": "complete", "memory_types": "1. Diet: food.", "feedback": feedback}
    reply = json.loads(HANDLERS[se.EVOLVE_TASK](fields))
    assert reply["new_types"].splitlines()[1:] == [
        '2. run: what the user says about their run (needed for "Where should I run?"; the '
        "options differ on coastal, trail, city, park)."
    ]


def test_offline_writer_remembers_a_sentence_naming_a_section_type():
    _load_handlers()
    content = "[Current Time: 2024]\nStress-wise, things are up and down. Any tips?"
    message = {"n": 1, "speaker": "user", "role": "user", "time": "t", "content": content}
    fields = {"memory": [], "messages": [message]}
    plain = json.loads(HANDLERS[writer.ORGANIZE]({**fields, "memory_types": writer.MEMORY_TYPES}))
    evolved = json.loads(
        HANDLERS[writer.ORGANIZE]({**fields, "memory_types": "1. stress: how stressed."})
    )
    assert plain == {}
    assert evolved == {"stress": "Stress-wise, things are up and down."}


# --- scores and report ------------------------------------------------------------------------


def records(rows):
    frame = pd.DataFrame(rows)
    return frame.reindex(columns=se.EVOLUTION.names)


def test_evolution_rows_worked_example():
    frame = records(
        [
            {"user_id": "a", "period": 0, "changed": True, "parse_ok": True},
            {"user_id": "b", "period": 0, "changed": False, "parse_ok": False},
            {"user_id": "a", "period": 1, "changed": False, "parse_ok": True},
            {"user_id": "b", "period": 1, "changed": False, "parse_ok": True},
        ]
    )
    keys = {"benchmark": "b", "system": "s", "protocol": "interactive", "step": 1}
    rows = evolution_rows(frame, keys).set_index(["metric", "aggregate"])["value"]
    assert rows[("section_changed", "micro")] == 0.0
    assert rows[("section_changed", "mean_over_periods")] == 0.25  # 1 of 4 rewrites
    assert rows[("evolution_unparsed", "micro")] == 0.0
    assert rows[("evolution_unparsed", "mean_over_periods")] == 1.0
    assert evolution_rows(records([]), keys).empty


def test_self_evolution_table_in_summary():
    rows = []
    for system, changed, acc in (("awi_none", [0.0, 0.0], 0.5), ("awi_q", [1.0, 0.5], 0.625)):
        for step, value in enumerate(changed):
            mean = sum(changed[: step + 1]) / (step + 1)
            rows += [
                (system, step, "section_changed", "micro", value),
                (system, step, "section_changed", "mean_over_periods", mean),
                (system, step, "evolution_unparsed", "micro", float(step)),
                (system, step, "accuracy", "micro", acc),
                (system, step, "accuracy", "mean_over_periods", acc),
                (system, step, "memory_score", "mean_over_periods", acc / 2),
            ]
    summary = pd.DataFrame(
        [
            {
                "benchmark": "amem",
                "system": s,
                "protocol": "interactive",
                "step": step,
                "metric": m,
                "aggregate": a,
                "value": v,
                "n": 2,
            }  # fmt: skip
            for s, step, m, a, v in rows
        ]
    )
    table = evolution_table(summary).set_index("system")
    assert table["periods_evolved"].to_dict() == {"awi_none": 0, "awi_q": 2}
    assert table.loc["awi_q", "users_changed"] == 0.75
    assert table["unparsed"].to_dict() == {"awi_none": 1, "awi_q": 1}
    assert table.loc["awi_q", "memory_score"] == 0.3125
    assert table.loc["awi_q", "periods"] == 2
    assert "## amem: self-evolution (AMemGym Table 3)" in summary_markdown(summary)
