"""With malformed (unparseable but HTTP 200) judge replies, judgements equal a clean run's.

The judge is an OpenAI-compatible test server that grades like a strict judge (yes when the
response contains the reference). One run is clean; the others garble a share of the replies.
Garbled replies are re-asked by the gateway, so every value and ``parse_ok`` must be the clean
run's, and ``raw_reply`` must show the garbled attempt before the verdict.
"""

from __future__ import annotations

import asyncio
import json
import re

import pandas as pd
import pytest

from mnemoflow.eval.static_qa.judges import judge_answers
from mnemoflow.llm.gateway import Gateway
from mnemoflow.testing.openai_server import GARBLED_TEXT, OpenAITestServer, original_body
from mnemoflow.testing.verbose_judge import is_reask, verbose
from tests.eval_fixtures import answers_table, longmemeval_tables

_GRADED = re.compile(r"Correct Answer: (.*?)\n\nModel Response: (.*?)\n\n", re.DOTALL)

RESPONSES = {
    "q_move": ["You moved to Lisbon.", "Lisbon", "Porto, I think.", "I don't know."],
    "q_cat": ["Your cat is Miso.", "Tom", "miso", "A dog."],
    "q_car_abs": ["I don't know.", "A red car.", "You never told me.", "Blue"],
}


def strict_judge(body: dict) -> str:
    """Yes when the model response contains the reference answer (case-insensitive); a re-ask
    is graded on its original prompt, as a deterministic judge would."""
    prompt = original_body(body)["messages"][-1]["content"]
    match = _GRADED.search(prompt)
    if match is None:  # the abstention prompt has an Explanation, not a Correct Answer
        return "yes" if "know" in prompt.split("Model Response:")[-1] else "no"
    reference, response = match.group(1), match.group(2)
    return "yes" if reference.lower() in response.lower() else "no"


def answers(questions: pd.DataFrame) -> pd.DataFrame:
    """Four systems' answers to each question: 12 distinct judge requests."""
    replies = [
        (f"sys{k}", qid, response)
        for qid, responses in RESPONSES.items()
        for k, response in enumerate(responses)
    ]
    return answers_table("longmemeval", questions, replies)


def judge_run(tmp_path, name: str, reasks: int = 2, judge=strict_judge, **faults):
    _, _, questions = longmemeval_tables()
    with OpenAITestServer(reply=judge, **faults) as server:
        judge = {"base_url": server.base_url, "model": "judge-test", "max_parse_retries": reasks}
        models = {"judge": judge}
        gateway = Gateway.from_config(models, cache_path=tmp_path / f"{name}.sqlite")

        async def run():
            try:
                return await judge_answers(gateway, "longmemeval", questions, answers(questions))
            finally:
                await gateway.aclose()

        out = asyncio.run(run())
        stats = server.stats()
    gateway.close()
    return out, stats, gateway.ledger.totals()


@pytest.mark.parametrize(
    "faults",
    # 30 % garbled: a request garbled three times running has odds 0.027, so this case allows
    # 5 re-asks (odds 0.3 ** 6 = 0.0007 per request); the draws are seeded, the test is exact.
    [{"faults": ["garbled"]}, {"fault_rates": {"garbled": 0.3}, "reasks": 5}],
    ids=["every-first-reply-garbled", "30-percent-garbled"],
)
def test_judgements_under_malformed_replies_equal_a_clean_run(tmp_path, faults):
    clean, clean_stats, clean_ledger = judge_run(tmp_path, "clean")
    faulty, stats, ledger = judge_run(tmp_path, "faulty", **faults)
    assert clean_stats.faults["garbled"] == 0 and clean_ledger.reasks == 0
    garbled = stats.faults["garbled"]
    assert garbled >= 1  # the run did see malformed replies ...
    assert (ledger.reasks, ledger.parse_failures) == (garbled, 0)  # ... and re-asked each one
    keys = ["system", "question_id", "metric"]
    compared = ["judge", "value", "parse_ok"]
    left = clean.set_index(keys)[compared].sort_index()
    right = faulty.set_index(keys)[compared].sort_index()
    pd.testing.assert_frame_equal(left, right)
    # the clean verdicts, by hand: yes exactly where the response holds the reference
    values = clean.set_index(["question_id", "system"])["value"].to_dict()
    assert [values[("q_move", f"sys{k}")] for k in range(4)] == [1.0, 1.0, 0.0, 0.0]
    assert [values[("q_cat", f"sys{k}")] for k in range(4)] == [1.0, 0.0, 1.0, 0.0]
    assert [values[("q_car_abs", f"sys{k}")] for k in range(4)] == [1.0, 0.0, 0.0, 0.0]
    # raw_reply keeps the garbled attempt before the verdict
    reasked = faulty[faulty["raw_reply"].str.startswith("[")]
    stored = [json.loads(raw) for raw in reasked["raw_reply"]]
    assert sum(len(attempts) - 1 for attempts in stored) == garbled
    for attempts, value in zip(stored, reasked["value"], strict=True):
        assert attempts[:-1] == [GARBLED_TEXT] * (len(attempts) - 1)
        assert attempts[-1] == ("yes" if value == 1.0 else "no")


def test_a_judge_that_never_parses_is_a_stored_failure_not_a_guess(tmp_path):
    out, stats, ledger = judge_run(tmp_path, "broken", faults=["garbled"] * 3)
    assert stats.faults["garbled"] == 3 * len(out)  # 1 + max_parse_retries (2) per request
    assert (~out["parse_ok"]).all() and out["value"].isna().all()
    assert ledger.parse_failures == len(out) == 12
    assert json.loads(out["raw_reply"].iloc[0]) == [GARBLED_TEXT] * 3


def test_a_verbose_judge_with_thinking_gives_the_clean_run_s_verdicts(tmp_path):
    """The judge writes verdicts as judge models do (misleading first words, echoes of the
    instructions, markdown, a thinking block with a wrong draft before every reply); some first
    replies state both verdicts and are re-asked for the label alone: 0 misread verdicts."""
    followups = []

    def verbose_judge(body):
        if is_reask(body):
            followups.append(body["messages"][-1]["content"])
        return verbose(strict_judge(body), body)

    clean, _, _ = judge_run(tmp_path, "clean")
    wordy, stats, ledger = judge_run(tmp_path, "verbose", judge=verbose_judge, think="inline")
    keys = ["system", "question_id", "metric"]
    compared = ["judge", "value", "parse_ok"]
    left = clean.set_index(keys)[compared].sort_index()
    right = wordy.set_index(keys)[compared].sort_index()
    pd.testing.assert_frame_equal(left, right)
    assert ledger.parse_failures == 0 and ledger.reasks == len(followups) >= 1
    assert all("reply with only the single word yes or no" in text for text in followups)
    # raw_reply keeps the replies as written, thinking included (docs/gateway.md); the verdict
    # is read after it, so `mnemoflow reparse` reads the stored replies the same way
    assert wordy["raw_reply"].str.contains("<think>").all()
