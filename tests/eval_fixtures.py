"""Small unified-table fixtures shaped like the LongMemEval and LoCoMo loaders' output."""

from __future__ import annotations

import json

import pandas as pd

from mnemoflow.data.tables import ANSWERS, EPISODE_SESSIONS, QUESTIONS, SESSIONS

LME_SESSIONS = [
    # session_id, time, [(role, content, has_evidence)]
    (
        "s_a",
        "2023/05/01 (Mon) 10:00",
        [
            ("user", "I adopted a cat named Miso last week.", True),
            ("assistant", "Congratulations on adopting Miso!", False),
            ("user", "I also bought a red bike.", False),
            ("assistant", "Enjoy the new bike.", False),
        ],
    ),
    (
        "answer_s_b",
        "2023/05/10 (Wed) 09:00",
        [
            ("user", "I moved to Lisbon for my new job.", True),
            ("assistant", "Lisbon is a lovely city.", False),
        ],
    ),
    (
        "s_c",
        "2023/04/20 (Thu) 08:00",
        [
            ("user", "My sister lives in Porto.", False),
            ("assistant", "Porto is great for a weekend.", True),
        ],
    ),
]
LME_ORDER = ["s_c", "s_a", "answer_s_b"]  # history order (by date)


def _lme_question(qid, qtype, question, answer, evidence, sessions):
    return {
        "benchmark": "longmemeval",
        "dataset": "fixture",
        "episode_id": qid,
        "question_id": qid,
        "split": "test",
        "question": question,
        "answer": answer,
        "question_type": qtype,
        "question_time": "2023/05/20 (Sat) 12:00",
        "options": [],
        "gold_option": -1,
        "evidence_ids": evidence,
        "checkpoint": 0,
        "lang": "en",
        "meta": json.dumps(
            {
                "abstention": qid.endswith("_abs"),
                "answer_session_ids": sessions,
                "answer_turn_ids": evidence,
            }
        ),
    }


def longmemeval_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(sessions stored once, episode_sessions, questions) in the LongMemEval layout."""
    turns = []
    for index, (session_id, time, items) in enumerate(LME_SESSIONS):
        for k, (role, content, evidence) in enumerate(items, start=1):
            turns.append(
                {
                    "benchmark": "longmemeval",
                    "episode_id": "",
                    "session_id": session_id,
                    "session_index": index,
                    "session_time": time,
                    "step": 0,
                    "turn_id": f"{session_id}_{k}",
                    "turn_index": k - 1,
                    "role": role,
                    "speaker": role,
                    "content": content,
                    "has_evidence": evidence,
                }
            )
    questions = [
        _lme_question(
            "q_move",
            "single-session-user",
            "Where did I move for my new job?",
            "Lisbon",
            ["answer_s_b_1"],
            ["answer_s_b"],
        ),
        _lme_question(
            "q_cat", "multi-session", "What is the name of my cat?", "Miso", ["s_a_1"], ["s_a"]
        ),
        _lme_question(
            "q_car_abs",
            "single-session-user",
            "What color is my car?",
            "You did not mention a car.",
            [],
            [],
        ),
        _lme_question(
            "q_porto",
            "single-session-assistant",
            "What did you say about Porto?",
            "It is great for a weekend",
            ["s_c_2"],
            ["s_c"],
        ),
    ]
    episodes = []
    for question in questions:
        for index, session_id in enumerate(LME_ORDER):
            time = next(t for s, t, _ in LME_SESSIONS if s == session_id)
            episodes.append(
                {
                    "benchmark": "longmemeval",
                    "episode_id": question["episode_id"],
                    "session_id": session_id,
                    "session_index": index,
                    "session_time": time,
                    "step": 0,
                }
            )
    return (
        pd.DataFrame(turns, columns=SESSIONS.names),
        pd.DataFrame(episodes, columns=EPISODE_SESSIONS.names),
        pd.DataFrame(questions, columns=QUESTIONS.names),
    )


LOCOMO_TURNS = [
    ("D1", "8:00 pm on 8 May, 2023", "Caroline", "I went to an LGBTQ support group yesterday."),
    ("D1", "8:00 pm on 8 May, 2023", "Melanie", "That sounds powerful! I painted a sunrise."),
    ("D1", "8:00 pm on 8 May, 2023", "Caroline", "I am researching adoption agencies."),
    ("D2", "1:00 pm on 25 May, 2023", "Melanie", "I ran a charity race for mental health."),
    ("D2", "1:00 pm on 25 May, 2023", "Caroline", "I love reading and want to be a counselor."),
]

LOCOMO_QA = [
    # category, question, answer, evidence, adversarial answer
    (1, "What did Caroline research?", "Adoption agencies", ["D1:3"], None),
    (2, "When did Caroline go to the support group?", "7 May 2023", ["D1:1"], None),
    (3, "Would Caroline pursue writing?", "Likely no; she wants to be a counselor", ["D2:2"], None),
    (4, "What did Melanie paint?", "A sunrise", ["D1:2"], None),
    (5, "What did Caroline paint?", "", ["D1:2"], "a sunrise"),
]


def locomo_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sessions, questions) for one LoCoMo-shaped conversation ``conv-1``."""
    turns, counters = [], {}
    for session, time, speaker, text in LOCOMO_TURNS:
        counters[session] = counters.get(session, 0) + 1
        turns.append(
            {
                "benchmark": "locomo",
                "episode_id": "conv-1",
                "session_id": f"conv-1_{session}",
                "session_index": int(session[1:]) - 1,
                "session_time": time,
                "step": 0,
                "turn_id": f"{session}:{counters[session]}",
                "turn_index": counters[session] - 1,
                "role": "user" if speaker == "Caroline" else "assistant",
                "speaker": speaker,
                "content": text,
                "has_evidence": False,
            }
        )
    names = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
    questions = []
    for index, (category, question, answer, evidence, adversarial) in enumerate(LOCOMO_QA):
        meta = {"category": category}
        if adversarial is not None:
            meta["adversarial_answer"] = adversarial
        questions.append(
            {
                "benchmark": "locomo",
                "dataset": "locomo10",
                "episode_id": "conv-1",
                "question_id": f"conv-1_q{index}",
                "split": "test",
                "question": question,
                "answer": answer,
                "question_type": names[category],
                "question_time": "",
                "options": [],
                "gold_option": -1,
                "evidence_ids": evidence,
                "checkpoint": 0,
                "lang": "en",
                "meta": json.dumps(meta),
            }
        )
    return pd.DataFrame(turns, columns=SESSIONS.names), pd.DataFrame(
        questions, columns=QUESTIONS.names
    )


def answers_table(benchmark: str, questions: pd.DataFrame, replies) -> pd.DataFrame:
    """The answers table of ``replies``, ``(system, question_id, response)`` triples, to
    ``questions`` (one of the tables above): static QA step 0, no retrieval, no cost."""
    by_id = questions.set_index("question_id")
    rows = [
        {
            "benchmark": benchmark,
            "system": system,
            "protocol": "static_qa",
            "step": 0,
            "episode_id": by_id.loc[qid, "episode_id"],
            "question_id": qid,
            "question_type": by_id.loc[qid, "question_type"],
            "response": response,
            "retrieved_ids": [],
            "ranked_ids": [],
            "context_tokens": 0,
            "model": "m",
            "cache_hit": False,
            "tokens_in": 0,
            "tokens_out": 0,
            "latency_s": 0.0,
        }
        for system, qid, response in replies
    ]
    return pd.DataFrame(rows, columns=ANSWERS.names)
