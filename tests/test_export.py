"""``mnemoflow export``: each official format, read back by ``mnemoflow score``, gives the run's
own numbers.

Every test builds a tiny results directory with the workflow's own scoring functions (the static
QA scorer, the feedback step scorer, the AMemGym score job), exports it, re-scores the export
with the ``score`` command and compares. LoCoMo and MemoryBench read the real data beside the
checkout (never copied into the repository).
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from mnemoflow import cli
from mnemoflow.data import registry
from mnemoflow.data.amemgym import gold_choice, option_order, read_environment
from mnemoflow.data.amemgym_procedural import generate, write_data
from mnemoflow.data.registry import load_benchmark
from mnemoflow.data.tables import ANSWERS, read_table, write_table
from mnemoflow.errors import ConfigError
from mnemoflow.eval.memorybench import memorybench_metrics
from mnemoflow.eval.static_qa.rescore import Ranking, answer_rankings, score_tables
from mnemoflow.jobs.context import RunKeys
from mnemoflow.jobs.interactive import ScoreFiles
from mnemoflow.jobs.interactive import score_step as score_job
from mnemoflow.llm.gateway import Gateway
from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols import interactive
from mnemoflow.registry import Entry
from tests.eval_fixtures import locomo_tables, longmemeval_tables
from tests.shared_data import shared_file


def answer_rows(benchmark, system, protocol, questions, responses, ranked=None):
    """An ANSWERS table: one row per (question row, response)."""
    rows = []
    for question, response in zip(questions.to_dict("records"), responses, strict=True):
        ids = (ranked or {}).get(question["question_id"], [])
        rows.append(
            {
                "benchmark": benchmark,
                "system": system,
                "protocol": protocol,
                "step": 0,
                "episode_id": question["episode_id"],
                "question_id": question["question_id"],
                "question_type": question["question_type"],
                "response": response,
                "retrieved_ids": ids,
                "ranked_ids": ids,
                "context_tokens": 0,
                "model": "offline-heuristic",
                "cache_hit": False,
                "tokens_in": 1,
                "tokens_out": 1,
                "latency_s": 0.0,
            }
        )
    return pd.DataFrame(rows, columns=ANSWERS.names)


def static_run(results: Path, name: str, loader: str, questions, sessions, answers, shards=2):
    """results/{name}/prepared/questions.parquet, the answers in ``shards`` shard folders, and
    the step's scores.parquet computed by the workflow's scorer (offline judge)."""
    write_table(questions, results / name / "prepared" / "questions.parquet", "questions")
    step = results / name / answers["system"].iloc[0] / "qa" / "step0"
    for shard in range(shards):
        part = answers.iloc[shard::shards]
        write_table(part, step / f"shard{shard}" / "answers.parquet", "answers")
    gateway = Gateway.from_config({}, cache_path=results / "cache")

    async def run():
        async with gateway:
            # as the workflow's score step: every answer's ranking, an empty one counting 0
            ranking = Ranking(answer_rankings(answers))
            return await score_tables(gateway, loader, questions, sessions, answers, ranking)

    try:
        scored = asyncio.run(run())
    finally:
        gateway.close()
    write_table(scored.scores, step / "scores.parquet", "scores")
    return scored.scores


def export(results: Path, fmt: str, out: Path, *options) -> int:
    argv = ["export", "--results", results, "--format", fmt, "--out", out, *options]
    return cli.main([str(a) for a in argv])


def by_key(scores: pd.DataFrame) -> pd.Series:
    return scores.set_index(["metric", "aggregate"])["value"]


def test_longmemeval_hypotheses_rescore_to_the_run_numbers(tmp_path, monkeypatch, capsys):
    sessions, episodes, questions = longmemeval_tables()
    registry.loaders()  # built-ins first, so that they do not replace the stand-in
    prepared = registry.Prepared(sessions, questions, episodes)
    monkeypatch.setitem(registry.LOADERS.entries, "longmemeval", Entry(lambda spec: prepared, {}))
    responses = ["You moved to Lisbon.", "Your cat is called Tom.", "Miso", "I don't know."]
    # a ranking of turns (evidence first or after a stray turn) and an empty one (recall 0)
    turns = list(sessions["turn_id"])
    ranked = {}
    for i, q in enumerate(questions.to_dict("records")):
        ranked[q["question_id"]] = [] if i == 1 else [*turns[i : i + 1], *q["evidence_ids"]]
    answers = answer_rows(
        "longmemeval_s", "bm25", "qa", questions, responses[: len(questions)], ranked
    )
    results = tmp_path / "results"
    run_scores = static_run(results, "longmemeval_s", "longmemeval", questions, sessions, answers)
    assert export(results, "longmemeval", tmp_path / "out") == 0
    path = tmp_path / "out" / "longmemeval_s.bm25.qa.step0.hypotheses.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0].keys() == {"question_id", "hypothesis"}
    assert {x["question_id"]: x["hypothesis"] for x in lines} == dict(
        zip(questions["question_id"], responses[: len(questions)], strict=True)
    )
    assert "longmemeval_s.bm25.qa.step0: 4 answers" in capsys.readouterr().out
    retrievals = path.with_name("longmemeval_s.bm25.qa.step0.retrievals.jsonl")
    logged = [json.loads(line) for line in retrievals.read_text().splitlines()]
    assert [len(x["retrieval_results"]["ranked_items"]) for x in logged][1] == 0
    argv = ["score", "--benchmark", "longmemeval", "--data", "unused.json"]
    argv += ["--predictions", str(path), "--retrievals", str(retrievals)]
    assert cli.main([*argv, "--out", str(tmp_path / "scored")]) == 0
    rescored = by_key(read_table(tmp_path / "scored" / "scores.parquet", "scores"))
    ours = by_key(run_scores)
    assert ("accuracy", "micro") in ours.index and ("accuracy", "abstention") in ours.index
    assert any("recall_all@5" in metric for metric, _ in ours.index)
    assert sorted(rescored.index) == sorted(ours.index)  # every metric of the run, exactly
    for key in ours.index:
        assert rescored[key] == pytest.approx(ours[key], abs=1e-12), key


def test_locomo_samples_json_rescores_to_the_run_numbers(tmp_path, capsys):
    source = shared_file("locomo", "locomo10.json")
    prepared = load_benchmark({"loader": "locomo", "source": {"path": str(source)}})
    questions = prepared.questions
    # every question of conv-26 and the first 12 of the second sample: one sample partly answered
    first, second = questions["episode_id"].unique()[:2]
    asked = pd.concat(
        [
            questions[questions["episode_id"] == first],
            questions[questions["episode_id"] == second][:12],
        ]
    )
    responses, ranked = [], {}
    for i, q in enumerate(asked.to_dict("records")):
        if q["question_type"] == "adversarial":
            responses.append("Not mentioned in the conversation" if i % 2 else "Yes, in June")
        else:
            responses.append(q["answer"] if i % 3 else "something else entirely")
        evidence = list(q["evidence_ids"])
        if i % 4:  # a ranking for most questions: the evidence first or after a stray turn
            ranked[q["question_id"]] = (["D1:1"] if i % 2 else []) + evidence
    answers = answer_rows("locomo", "bm25_message", "qa", asked, responses, ranked)
    results = tmp_path / "results"
    run_scores = static_run(results, "locomo", "locomo", asked, prepared.sessions, answers)

    assert export(results, "locomo", tmp_path / "out") == 2
    assert "needs --data" in capsys.readouterr().err
    assert export(results, "locomo", tmp_path / "out", "--data", source) == 0
    assert "questions of the exported samples have no answer" in capsys.readouterr().out
    path = tmp_path / "out" / "locomo.bm25_message.qa.step0.samples.json"
    samples = json.loads(path.read_text())
    original = json.loads(Path(source).read_text())
    assert [s["sample_id"] for s in samples] == [first, second]
    assert samples[0]["conversation"] == original[0]["conversation"]  # the sample as released
    qa = samples[0]["qa"][0]
    assert qa["question"] == original[0]["qa"][0]["question"]
    assert qa["bm25_message_prediction"] == responses[0]
    assert "bm25_message_prediction" not in samples[1]["qa"][12]

    argv = ["score", "--benchmark", "locomo", "--data", str(source), "--predictions", str(path)]
    assert cli.main([*argv, "--out", str(tmp_path / "scored")]) == 0
    rescored = by_key(read_table(tmp_path / "scored" / "scores.parquet", "scores"))
    ours = by_key(run_scores)
    assert ("f1", "type:adversarial") in ours.index
    assert ("turn_evidence_recall", "micro") in ours.index
    assert sorted(rescored.index) == sorted(ours.index)  # every metric of the run, exactly
    for key in ours.index:
        assert rescored[key] == pytest.approx(ours[key], abs=1e-12), key
    # a question the memory returned nothing for is written with an empty context: recall 0
    assert samples[0]["qa"][0]["bm25_message_prediction_context"] == []

    # a second prediction field: the key must be named
    samples[0]["qa"][0]["other_prediction"] = "x"
    path.write_text(json.dumps(samples))
    assert cli.main([*argv, "--out", str(tmp_path / "again")]) == 2
    assert "found bm25_message, other; choose one with --prediction-key" in capsys.readouterr().err
    samples[0]["qa"][1]["bm25_message_prediction"] = 3
    path.write_text(json.dumps(samples))
    argv += ["--prediction-key", "bm25_message", "--out", str(tmp_path / "again")]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert f"{path}: record 0 (conv-26) qa[1]: 'bm25_message_prediction' must be a string" in error


def test_memorybench_predictions_rescore_to_the_run_numbers(tmp_path):
    data = shared_file("memorybench", "raw", "NFCats_test.csv")
    configs = shared_file("memorybench", "configs", "datasets")
    spec = {
        "loader": "memorybench",
        "source": {"path": str(data)},
        "set": "dataset:NFCats",
        "configs": str(configs),
    }
    questions = load_benchmark(spec).questions
    asked = questions[questions["split"] == "test"][:12]
    responses = [
        "" if i % 5 == 0 else q["question"][: 40 * (i % 4)]
        for i, q in enumerate(asked.to_dict("records"))
    ]
    answers = answer_rows("nfcats", "bm25_message", "off_policy", asked, responses)
    results = tmp_path / "results"
    write_table(questions, results / "nfcats" / "prepared" / "questions.parquet", "questions")
    step = results / "nfcats" / "bm25_message" / "off_policy" / "step0"
    write_table(answers, step / "answers.parquet", "answers")
    gateway = Gateway.from_config({}, cache_path=tmp_path / "cache")
    keys = {"benchmark": "nfcats", "system": "bm25_message", "protocol": "off_policy", "step": 0}

    async def run():
        async with gateway:
            empty = pd.DataFrame(columns=["role", "implicit_action", "terminated", "dialogue_id"])
            return await fb.score_step(
                answers, asked, empty, keys, gateway, memorybench_metrics, "offline/x"
            )

    try:
        run_scores = asyncio.run(run()).scores
    finally:
        gateway.close()
    assert export(results, "memorybench", tmp_path / "out") == 0
    path = tmp_path / "out" / "nfcats.bm25_message.off_policy.step0.predict.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0].keys() == {"dataset", "test_idx", "response"} and len(lines) == 12
    argv = ["score", "--benchmark", "memorybench", "--data", str(data), "--configs", str(configs)]
    argv += ["--set", "dataset:NFCats", "--predictions", str(path), "--out", str(tmp_path / "s")]
    assert cli.main(argv) == 0
    rescored = read_table(tmp_path / "s" / "scores.parquet")
    value = rescored.set_index(["dataset", "metric"])["value"]
    ours = by_key(run_scores)
    for metric in ("score", "score:scored", "score:all", "score:unscored"):
        assert value[("NFCats", metric)] == pytest.approx(ours[(metric, "micro")]), metric
    assert value[("NFCats", "score")] == pytest.approx(ours[("item_value", "dataset:NFCats")])


def amemgym_run(results: Path) -> tuple[Path, list]:
    """A generated environment, every period's checkpoint replies (right, wrong, unparseable and
    given-up replies), upper-bound and recall replies, scored by the workflow's score job."""
    users = generate({"users": 3, "periods": 2, "questions": 4, "seed": 5})
    bench = results / "amg"
    data = write_data(users, bench / "environment")
    env = read_environment(data)
    upper_rows = []
    for user in env:
        for q in user.questions:
            order = option_order(0, user.id, q.index, len(q.choices))
            for k in range(len(q.choices)):
                pick = order.index(k) + 1 if (k + q.index) % 3 else 1
                reply = f'```json\n{{"answer": {pick}}}\n```' if k != 2 else "not json"
                upper_rows.append(_reply(user.id, None, q.index, reply, order, k=k))
    write_table(
        pd.DataFrame(upper_rows)[interactive.UPPER_BOUND_REPLIES.names],
        bench / "upper_bound.parquet",
        interactive.UPPER_BOUND_REPLIES,
    )
    files = {"replies": [], "recall": []}
    for period in range(3):
        rows, recall = [], []
        for u, user in enumerate(env):
            for q in user.questions:
                order = option_order(0, user.id, q.index, len(q.choices))
                gold = gold_choice(q, user.periods[period])
                shown = order.index(gold) + 1
                case = (u + q.index + period) % 4
                reply = {
                    0: f'```json\n{{"answer": {shown}}}\n```',
                    1: f'{{"answer": {shown % len(order) + 1}}}',
                    2: "I would pick the second one",
                    3: f'{{"answer": {shown}}}',
                }[case]
                rows.append(_reply(user.id, period, q.index, reply, order, ok=case != 3))
                state = {t: user.periods[period].state[t] for t in q.required_info}
                recall.append(_reply(user.id, period, q.index, json.dumps(state), None))
        folder = bench / "sys" / "interactive" / f"step{period}" / "shard0"
        for name, frame, schema in (
            ("checkpoint_replies", rows, interactive.CHECKPOINT_REPLIES),
            ("recall_replies", recall, interactive.RECALL_REPLIES),
        ):
            path = folder / f"{name}.parquet"
            write_table(pd.DataFrame(frame)[schema.names], path, schema)
            files["replies" if name.startswith("check") else "recall"].append(str(path))
        step = folder.parent
        score_job(
            ScoreFiles(
                environment=str(data),
                replies=list(files["replies"]),
                recall=list(files["recall"]),
                upper=str(bench / "upper_bound.parquet"),
                scores=str(step / "scores.parquet"),
                question_scores=str(step / "question_scores.parquet"),
                diagnosis=str(step / "diagnosis.parquet"),
                period_scores=str(step / "period_scores.parquet"),
            ),
            RunKeys(benchmark="amg", system="sys", protocol="interactive", step=period),
            reference_upper_bound=False,
        )
    return data, env


def _reply(user_id, period, question_index, reply, order, ok=True, k=None) -> dict:
    row = {
        "user_id": user_id,
        "period": period,
        "question_index": question_index,
        "option_order": order,
        "reply": reply,
        "parse_ok": ok,
        "attempts": 1,
        "raw_replies": [reply],
        "model": "scripted",
        "cache_hit": False,
        "tokens_in": 10,
        "tokens_out": 3,
    }
    if k is not None:
        row["option_index"] = k
    return row


def test_amemgym_eval_output_rescores_to_the_run_numbers(tmp_path):
    results = tmp_path / "results"
    data, env = amemgym_run(results)
    assert export(results, "amemgym", tmp_path / "out") == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == [f"amg.sys.interactive.step{k}.eval-output.json" for k in range(3)]
    content = json.loads((tmp_path / "out" / written[2]).read_text())
    assert list(content) == [user.id for user in env]
    entry = content[env[0].id]
    assert len(entry["overall_results"]) == 3 and len(entry["overall_results"][0]) == 4
    result = entry["overall_results"][0][0]
    assert result["answer"] == gold_choice(env[0].questions[0], env[0].periods[0])
    assert entry["overall_metrics"]["accuracy"][0][0] == result["scores"]["accuracy"]
    assert len(entry["utilization_results"][0]) == len(env[0].questions[0].choices)
    failures = [r for row in entry["overall_results"] for r in row if r["json_error"]]
    assert failures and all(r["response"] is None for r in failures)
    for k in (1, 2):
        out = tmp_path / f"scored{k}"
        argv = ["score", "--benchmark", "amemgym", "--data", str(data)]
        argv += ["--eval-output", str(tmp_path / "out" / written[k]), "--out", str(out)]
        assert cli.main(argv) == 0
        rescored = pd.read_parquet(out / "scores.parquet")
        ours = read_table(results / "amg/sys/interactive" / f"step{k}" / "scores.parquet")
        mean = rescored[rescored["period"].isna()].set_index("metric")["value"]
        now = rescored[rescored["period"] == k].set_index("metric")["value"]
        compared = 0
        for row in ours.to_dict("records"):  # every metric, the diagnosis's included
            theirs = (now if row["aggregate"] == "micro" else mean)[row["metric"]]
            if math.isnan(row["value"]):
                assert math.isnan(theirs), row
            else:
                assert theirs == pytest.approx(row["value"]), row
            compared += 1
        metrics = set(ours["metric"])
        assert {"accuracy", "memory_score", "upper_bound", "parse_failures"} <= metrics
        assert {"write_failure_rate", "recall_parse_failures"} <= metrics
        assert compared == len(ours)
        assert ours.set_index(["metric", "aggregate"])["value"][("parse_failures", "micro")] > 0


def test_export_errors_name_what_is_wrong(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    assert export(results, "longmemeval", tmp_path / "out") == 2
    assert "no longmemeval runs under" in capsys.readouterr().err
    assert export(results, "longmemeval", tmp_path / "out", "--benchmark", "lme") == 2
    assert "has no benchmark 'lme'" in capsys.readouterr().err
    # a LoCoMo run exported against samples that are not its data
    _, questions = locomo_tables()
    write_table(questions, results / "locomo" / "prepared" / "questions.parquet", "questions")
    answers = answer_rows("locomo", "none", "qa", questions, ["x"] * len(questions))
    write_table(answers, results / "locomo/none/qa/step0/shard0/answers.parquet", "answers")
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"sample_id": "conv-9", "qa": [{"question": "?"}]}]))
    assert export(results, "locomo", tmp_path / "out", "--data", other) == 2
    assert f"question_id 'conv-1_q0' of the run is not in {other}" in capsys.readouterr().err
    other.write_text(json.dumps([{"sample_id": "conv-9"}]))
    assert export(results, "locomo", tmp_path / "out", "--data", other) == 2
    assert f"{other}: record 0: missing field 'qa'" in capsys.readouterr().err
    assert export(results, "memorybench", tmp_path / "out", "--benchmark", "locomo") == 2
    assert "benchmark 'locomo' was loaded by 'locomo', not 'memorybench'" in capsys.readouterr().err
    bad = tmp_path / "eval.json"
    bad.write_text(json.dumps({"u1": {"overall_results": [[{"raw_response": "x"}]]}}))
    with pytest.raises(ConfigError, match=r"user u1 overall_results\[0\]\[0\]: missing field 'js"):
        from mnemoflow.eval.export import read_eval_output

        read_eval_output(bad)
