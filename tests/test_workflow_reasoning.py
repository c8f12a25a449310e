"""Every family through a reasoning model and through an endpoint without structured output.

Every chat role (agent, judge, user, memory_writer) is bound to the local test server, which
answers right (tests/answering_model.py) after a ``<think>`` block holding a wrong draft in every
format a parser looks for (``think="inline"``, Qwen3 on vLLM with thinking on), or refuses any
``response_format`` with HTTP 400 (``reject_response_format=True``, vLLM without guided decoding).
One tiny run of static QA (synthetic), MemoryBench feedback (synthetic_feedback) and AMemGym
(the tiny fixture environment) per server must give the right answers with no parse failure and
no re-ask; the refused run falls back once per job, counts it in the ledgers, and a rerun of
its model-calling jobs is all cache hits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow.testing.openai_server import OpenAITestServer
from tests.amemgym_fixtures import TINY_BENCHMARK, write_one_user
from tests.answering_model import answer
from tests.workflow import MODEL_RULES, TINY, ledgers, on_policy_feedback, snakemake, workdir

pytestmark = pytest.mark.slow

SUMMARY = ("results/summary.md",)
CHAT_ROLES = ("agent", "judge", "user", "memory_writer")
OVERRIDE = {
    "allow_offline_roles": ["embedder"],  # hashed bag-of-words: no model to call
    "run": {"benchmarks": ["synthetic", "synthetic_feedback", "amemgym_tiny"]},
    "benchmarks": {
        "synthetic": {
            "systems": ["full_context"],
            "shards": 1,
            "params": {
                "users": 1,
                "periods": 1,
                "sessions_per_period": 2,
                "turns_per_session": 4,
                "attributes_per_user": 3,
                "updates_per_period": 1,
                "seed": 3,
            },
        },
        "synthetic_feedback": {"systems": ["bm25_message"], **on_policy_feedback(batch_size=4)},
        "amemgym_tiny": {**TINY_BENCHMARK, "systems": ["native", "awi"]},
    },
}


def finished_run(tmp_path: Path, rerun: bool, **server_options) -> tuple[Path, dict]:
    """A run of the three families against a server made with ``server_options``; returns its
    working directory and the server's counters: ``first`` (with the first run's ``ledgers``),
    and with ``rerun`` those of a rerun of every model-calling job (the cache kept). The report
    is not made: it calls no model."""
    wd = workdir(tmp_path)
    write_one_user(wd)
    counts = {}
    with OpenAITestServer(reply=answer, **server_options) as server:
        endpoint = {"base_url": server.base_url, "model": "qwen3", "concurrency": 4}
        models = {role: endpoint for role in CHAT_ROLES} | {"embedder": {"backend": "offline"}}
        override = wd / "override.yaml"
        override.write_text(json.dumps({**OVERRIDE, "models": models}))
        snakemake(wd, targets=SUMMARY, configfiles=(TINY, override))
        counts["first"] = server.stats()
        counts["ledgers"] = every_ledger(wd)  # the first run's (a rerun rewrites them)
        if rerun:
            server.reset()
            # the model-calling jobs only (their ledgers as targets): not the scoring after them
            made = [str(p.relative_to(wd)) for p in wd.glob("results/**/*.ledger.json")]
            snakemake(wd, "--forcerun", *MODEL_RULES, targets=made, configfiles=(TINY, override))
            counts["rerun"] = server.stats()
    return wd, counts


@pytest.fixture(scope="module")
def think_run(tmp_path_factory):
    return finished_run(tmp_path_factory.mktemp("think"), False, think="inline")


@pytest.fixture(scope="module")
def refusing_run(tmp_path_factory):
    return finished_run(tmp_path_factory.mktemp("refuse"), True, reject_response_format=True)


def frames(wd: Path, benchmark: str, name: str) -> pd.DataFrame:
    return pd.concat(pd.read_parquet(p) for p in sorted(wd.glob(f"results/{benchmark}/**/{name}")))


def summary_value(wd: Path, benchmark: str, metric: str) -> dict[tuple, float]:
    summary = pd.read_parquet(wd / "results" / "summary.parquet")
    rows = summary[
        (summary.benchmark == benchmark)
        & (summary.metric == metric)
        & (summary["aggregate"] == "micro")
    ]
    return {(r.system, r.protocol, r.step): r.value for r in rows.itertuples()}


def every_ledger(wd: Path) -> list[dict]:
    return ledgers(wd, "*.ledger.json")


def assert_right_answers(wd: Path) -> None:
    # static QA: the reader's answer after its thinking, judged right by the judge's verdict
    answers = frames(wd, "synthetic", "answers.parquet")
    questions = pd.read_parquet(wd / "results/synthetic/prepared/questions.parquet")
    gold = dict(zip(questions.question_id, questions.answer, strict=True))
    assert len(answers) == len(questions) > 0
    for row in answers.itertuples():
        assert "<think>" not in row.response and "DRAFT" not in row.response
        if gold[row.question_id] != "The user never mentioned this.":
            assert gold[row.question_id] in row.response, (row.question_id, row.response)
    judged = frames(wd, "synthetic", "judgements.parquet")
    assert judged.parse_ok.all() and (judged.value == 1.0).all()
    # judges' raw replies are kept whole: the server's, thinking included, read as its verdict
    assert {raw.rsplit("</think>", 1)[-1].strip() for raw in judged.raw_reply} == {"yes"}

    # feedback: the corrections memorized answer every test item
    value = summary_value(wd, "synthetic_feedback", "item_value")
    assert value[("bm25_message", "on_policy", 1)] == 1.0
    assert value[("bm25_message", "on_policy", 0)] == 0.0  # before any feedback

    # AMemGym: the upper bound and both agents right at every period, every type recalled
    upper = pd.read_parquet(wd / "results/amemgym_tiny/upper_bound.parquet")
    assert len(upper) == 8 and upper.parse_ok.all()  # 2 questions x 4 options
    accuracy = summary_value(wd, "amemgym_tiny", "accuracy")
    assert accuracy == {(s, "interactive", k): 1.0 for s in ("native", "awi") for k in (0, 1)}
    replies = frames(wd, "amemgym_tiny", "checkpoint_replies.parquet")
    assert len(replies) == 8 and replies.parse_ok.all()
    assert not replies.reply.str.contains("<think>").any()  # the reply, its thinking stripped
    # the draft's {"answer": 1} would be wrong: the right option is not always shown first
    chosen = {int(reply.split('"answer": ')[1].split()[0]) for reply in replies.reply}
    assert chosen - {1}
    recall = frames(wd, "amemgym_tiny", "recall_replies.parquet")
    assert len(recall) > 0 and recall.parse_ok.all()
    diagnosis = summary_value(wd, "amemgym_tiny", "recall_parse_failures")
    assert set(diagnosis.values()) <= {0.0}


def assert_no_parse_failure(every: list[dict]) -> None:
    assert len(every) >= 10
    # every chat role answered through the server, and its models are the server's
    called = {
        key.split("/")[0]
        for ledger in every
        for key, entry in ledger["by_role_task"].items()
        if entry["calls"]
    }
    assert called == set(CHAT_ROLES)
    played = {m for ledger in every for role, m in ledger["models"].items() if role in CHAT_ROLES}
    assert played == {"qwen3"}
    totals = [ledger["totals"] for ledger in every]
    assert sum(t["calls"] for t in totals) > 0
    assert [t["parse_failures"] for t in totals] == [0] * len(totals)
    assert [t["reasks"] for t in totals] == [0] * len(totals)
    assert [t["errors"] for t in totals] == [0] * len(totals)


def test_a_reasoning_model_answers_right_in_every_family(think_run):
    wd, counts = think_run
    assert_right_answers(wd)
    assert_no_parse_failure(counts["ledgers"])
    assert counts["first"].total > 0 and not counts["first"].faults


def test_an_endpoint_without_structured_output_answers_right_in_every_family(refusing_run):
    wd, counts = refusing_run
    assert_right_answers(wd)
    assert_no_parse_failure(counts["ledgers"])
    refused = counts["first"].faults["response_format"]
    every = counts["ledgers"]
    fallbacks = [ledger["totals"]["structured_output_fallbacks"] for ledger in every]
    # the upper bound (json_object) fell back once, the feedback user (json_schema) twice (to
    # json_object with the schema, then to none): one refused request per job and form, then
    # none (a job whose replies all came from the cache would send none but count the fallbacks
    # its cached replies record)
    assert 0 < refused <= sum(fallbacks) and max(fallbacks) == 2
    assert sum(fallbacks) < counts["first"].total // 10
    upper = json.loads((wd / "results/amemgym_tiny/upper_bound.ledger.json").read_text())
    assert upper["totals"]["structured_output_fallbacks"] == 1


def test_a_rerun_is_all_cache_hits(refusing_run):
    wd, counts = refusing_run
    assert counts["rerun"].total == 0
    rerun = every_ledger(wd)
    assert_no_parse_failure(rerun)
    totals = [ledger["totals"] for ledger in rerun]
    assert all(t["cache_hits"] == t["calls"] for t in totals)
    # the fallbacks are learnt from the cache: the same counts, with no request refused
    fallbacks = [t["structured_output_fallbacks"] for t in totals]
    assert fallbacks == [
        ledger["totals"]["structured_output_fallbacks"] for ledger in counts["ledgers"]
    ]
