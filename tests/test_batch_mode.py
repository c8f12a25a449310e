"""Batch-API mode: a job's cache misses of a role go through the test server's Batch API.

The judge of the judge-fault tests (a strict grader on the test server) judges the same answers
online and in Batch-API mode: the judgements are identical, the ledger counts the batch's calls at
batch prices, planned per-line errors and an expired batch are resubmitted (or asked online) and
counted, and a job killed while it waits polls the same batch when it runs again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from mnemoflow.data.tables import DIALOGUES
from mnemoflow.errors import ConfigError
from mnemoflow.eval.static_qa.judges import judge_answers
from mnemoflow.llm.batch_mode import BatchClient, BatchStore, batch_line, read_output, split_lines
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import (
    ChatRequest,
    EndpointSpec,
    check_batch_rules,
    online,
    refuse_batch,
)
from mnemoflow.planning.plan import Line, Plan
from mnemoflow.prices import batch_usd, price_table, usd
from mnemoflow.testing.openai_server import GARBLED_TEXT, OpenAITestServer
from mnemoflow.testing.verbose_judge import is_reask
from tests.eval_fixtures import longmemeval_tables
from tests.test_judge_faults import answers, strict_judge

REPO = Path(__file__).resolve().parents[1]
BOUND = {"base_url": "http://h/v1", "model": "m"}
#: A model with a 50 % batch discount (the config's prices: may name one).
PRICES = {"judge-test": {"input": 2.0, "output": 8.0, "batch_input": 1.0, "batch_output": 4.0}}


def judged(tmp_path: Path, server: OpenAITestServer, name: str, **judge) -> tuple:
    _, _, questions = longmemeval_tables()
    binding = {"base_url": server.base_url, "model": "judge-test", **judge}
    gateway = Gateway.from_config(
        {"judge": binding}, cache_path=tmp_path / f"{name}-cache", prices=PRICES
    )

    async def run():
        async with gateway:
            return await gateway.batched(
                lambda: judge_answers(gateway, "longmemeval", questions, answers(questions))
            )

    frame = asyncio.run(run())
    gateway.close()
    return frame, gateway.ledger


def same_table(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_batch_judgements_equal_online_at_batch_prices(tmp_path):
    with OpenAITestServer(reply=strict_judge) as server:
        online, online_ledger = judged(tmp_path, server, "online")
        assert server.batch_api.created == 0
        batched, ledger = judged(tmp_path, server, "batch", batch=True, batch_poll_s=0.01)
        assert server.batch_api.created == 1
    same_table(online, batched)
    total, online_total = ledger.totals(), online_ledger.totals()
    assert total.calls == total.batch_calls == online_total.calls == 12
    assert total.cache_hits == 0
    assert (total.batch_tokens_in, total.batch_tokens_out) == (
        online_total.tokens_in,
        online_total.tokens_out,
    )
    assert total.usd == pytest.approx(online_total.usd / 2)  # batch prices: half
    assert ledger.to_dict()["batch_ids"] == sorted(server.batch_api.batches)


@pytest.mark.parametrize("fallback", ["resubmit", "online"])
def test_line_errors_and_expiry_are_resubmitted_or_asked_online(tmp_path, fallback):
    with OpenAITestServer(reply=strict_judge) as server:
        online, _ = judged(tmp_path, server, "online")
    # the first line of every batch fails once; the first batch expires half done
    with OpenAITestServer(reply=strict_judge, batch_line_errors=1, batch_expire=1) as server:
        options = {"batch": True, "batch_poll_s": 0.01, "batch_fallback": fallback}
        batched, ledger = judged(tmp_path, server, f"b-{fallback}", **options)
        created, chat_calls = server.batch_api.created, server.stats().paths["chat"]
    same_table(online, batched)
    total = ledger.totals()
    assert total.batch_errors == 1 + 6  # one line error, six expired of twelve
    if fallback == "resubmit":
        assert (created, chat_calls, total.batch_resubmitted, total.batch_online) == (2, 0, 7, 0)
        assert total.batch_calls == 12
    else:
        assert (created, chat_calls, total.batch_resubmitted, total.batch_online) == (1, 7, 0, 7)
        assert (total.batch_calls, total.calls) == (5, 12)


def garbling_judge(body: dict) -> str:
    """Every first reply unparseable, every re-ask graded."""
    return strict_judge(body) if is_reask(body) else GARBLED_TEXT


def test_reasks_of_unparseable_batch_replies_go_into_the_next_batch(tmp_path):
    with OpenAITestServer(reply=garbling_judge) as server:
        online, online_ledger = judged(tmp_path, server, "online")
        batched, ledger = judged(tmp_path, server, "batch", batch=True, batch_poll_s=0.01)
        assert server.batch_api.created == 2  # the prompts, then their re-asks
    same_table(online, batched)
    assert ledger.totals().reasks == online_ledger.totals().reasks == 12
    assert ledger.totals().batch_calls == 24
    # batch_fallback: online asks the re-asks online
    with OpenAITestServer(reply=garbling_judge) as server:
        options = {"batch": True, "batch_poll_s": 0.01, "batch_fallback": "online"}
        batched, ledger = judged(tmp_path, server, "batch-online", **options)
        assert (server.batch_api.created, server.stats().paths["chat"]) == (1, 12)
    same_table(online, batched)
    assert (ledger.totals().batch_calls, ledger.totals().calls) == (12, 24)


def test_a_miss_outside_a_batched_job_is_refused_with_the_reason(tmp_path):
    with OpenAITestServer() as server:
        binding = {"base_url": server.base_url, "model": "m", "batch": True}
        gateway = Gateway.from_config({"judge": binding}, cache_path=tmp_path / "cache")
        request = ChatRequest(role="judge", task="t", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(ConfigError, match=r"models.judge.batch: .*turn by turn"):
            asyncio.run(gateway.chat(request))


def test_config_refuses_batch_where_replies_feed_requests():
    with pytest.raises(ConfigError, match=r"^config models.user.batch: .*depend on each other"):
        EndpointSpec.from_config("user", {"base_url": "http://h/v1", "model": "m", "batch": True})
    with pytest.raises(ConfigError, match=r"models.judge.batch_fallback: one of"):
        EndpointSpec.from_config(
            "judge", {"base_url": "http://h/v1", "model": "m", "batch_fallback": "retry"}
        )
    with pytest.raises(ConfigError, match=r"models.judge.run_batch: a command with \{input\}"):
        EndpointSpec.from_config("judge", {**BOUND, "run_batch": "x"})
    # the critic (MemoryBench's WritingBench scorer) takes the judge's binding, Batch-API mode
    # included: it scores in the feedback jobs that collect the judge's requests
    specs = Gateway.from_config(
        {"judge": {"base_url": "http://h/v1", "model": "m", "batch": True}}
    ).specs
    assert specs["critic"].model == "m" and specs["critic"].batch
    spec = EndpointSpec.from_config("critic", {**BOUND, "batch": True})
    assert spec.batch


def test_a_run_whose_other_rules_ask_a_batch_role_is_refused_at_parse_time():
    models = {"judge": {**BOUND, "batch": True}, "agent": BOUND}
    qa = {"ingest": ("memory_writer",), "answer": ("agent",), "judge": ("judge",)}
    check_batch_rules(models, qa)  # static QA: judge jobs only
    feedback = {"feedback_step": ("agent", "judge"), "feedback_train_performance": ("judge",)}
    check_batch_rules(models, {**qa, **feedback})  # the feedback family's scoring: batches
    with pytest.raises(ConfigError, match=r"models.judge.batch: .* panel_stage ask judge"):
        check_batch_rules(models, {**qa, "panel_stage": ("judge",)})
    # the agent converses in the feedback and interactive families
    agent = {"agent": {**BOUND, "batch": True}}
    check_batch_rules(agent, qa)
    with pytest.raises(ConfigError, match=r"rules answer, and this run's dialogues, feedback_step"):
        check_batch_rules(agent, {**qa, **feedback, "dialogues": ("agent", "user")})
    # the judge panel and the probe ask online: a panel judge may not ask for batches, and the
    # probe asks the configured judge without its Batch-API keys
    with pytest.raises(ConfigError, match=r"^config judge.panel \(p1\).batch: "):
        refuse_batch({**BOUND, "batch": True}, "judge.panel (p1)")
    assert online({**BOUND, "batch": True, "batch_poll_s": 1}) == BOUND


def test_files_split_at_the_request_and_byte_limits():
    lines = [batch_line(f"k{i}", {"messages": [{"content": "x" * 10}]}) for i in range(7)]
    assert [len(f) for f in split_lines(lines, max_requests=3)] == [3, 3, 1]
    size = len(lines[0])
    assert [len(f) for f in split_lines(lines, max_bytes=2 * size)] == [2, 2, 2, 1]
    assert json.loads(lines[0])["custom_id"] == "k0"


def test_output_lines_answered_and_failed():
    body = {"choices": [{"message": {"content": "yes"}}], "usage": {"prompt_tokens": 3}}
    data = (
        json.dumps({"custom_id": "a", "response": {"status_code": 200, "body": body}})
        + "\n"
        + json.dumps({"custom_id": "b", "response": None, "error": {"code": "batch_expired"}})
        + "\n"
    ).encode()
    assert read_output(data) == ({"a": body}, {"b": "batch_expired"})


def test_plan_price_of_a_batch_is_half_for_a_50_percent_discount():
    assert batch_usd("judge-test", 1000, 500, PRICES) == usd("judge-test", 1000, 0, 500, PRICES) / 2
    assert batch_usd("gpt-4o", 1000, 500, {"gpt-4o": {"input": 2.5, "output": 10.0}}) is None
    # claude-sonnet-4: $3 / $15 online, $1.50 / $7.50 through the Batch API (the shipped table)
    spec = EndpointSpec("judge", backend="openai", model="claude-sonnet-4", base_url="http://x/v1")
    plan = Plan({"judge": dataclasses.replace(spec, batch=True)}, price_table())
    plan.add(Line("b", "s", "qa", "judge", "judge_qa", calls=10, tokens_in=1e6, tokens_out=1e5))
    data = json.loads(plan.to_json())
    role, [run] = data["by_role"]["judge"], data["runs"]
    assert role["usd"] == pytest.approx(3.0 + 1.5) and run["usd"] == role["usd"]
    assert role["usd_batch"] == pytest.approx(role["usd"] / 2) == run["usd_batch"]
    assert "$2.2500 (batch: true)" in plan.render()


STAND_IN = """
import json, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
with open(args["-o"], "w") as out:
    for line in open(args["-i"]):
        request = json.loads(line)
        prompt = request["body"]["messages"][-1]["content"]
        body = {"model": request["body"]["model"], "choices": [{"message": {"content":
                "yes" if "moved" in prompt else "no"}}], "usage": {"prompt_tokens": 7,
                "completion_tokens": 1}}
        out.write(json.dumps({"id": "vllm-1", "custom_id": request["custom_id"],
                  "response": {"status_code": 200, "request_id": "r", "body": body},
                  "error": None}) + "\\n")
"""


def test_run_batch_command_drains_the_batch_into_the_cache(tmp_path):
    """A stand-in for ``vllm run-batch`` writing its output format: no server is called."""
    script = tmp_path / "run_batch.py"
    script.write_text(STAND_IN)
    command = f"{sys.executable} {script} -i {{input}} -o {{output}} --model judge-test"
    with OpenAITestServer(reply=strict_judge) as server:
        frame, ledger = judged(tmp_path, server, "run", batch=True, run_batch=command)
        assert server.stats().total == 0 and server.batch_api.created == 0
        assert ledger.totals().batch_calls == 12
        assert frame.parse_ok.all() and set(frame.value) == {0.0, 1.0}
        records = BatchStore(tmp_path / "run-cache.batches").records()
        assert [r["status"] for r in records] == ["collected"]
        # the same judgements again: from the cache, no command run
        rerun = {"batch": True, "run_batch": "false {input} {output}"}
        again, ledger = judged(tmp_path, server, "run", **rerun)
    same_table(frame, again)
    assert ledger.totals().cache_hits == 12


KILLED_JOB = """
import asyncio, sys
from tests.test_batch_mode import judged_in_process
judged_in_process(sys.argv[1], sys.argv[2])
"""


def judged_in_process(base_url: str, folder: str) -> None:
    """The batch judge pass of a job a test kills (run with ``python -c``)."""
    _, _, questions = longmemeval_tables()
    binding = {"base_url": base_url, "model": "judge-test", "batch": True, "batch_poll_s": 0.05}
    gateway = Gateway.from_config({"judge": binding}, cache_path=Path(folder) / "cache")

    async def run():
        async with gateway:
            return await gateway.batched(
                lambda: judge_answers(gateway, "longmemeval", questions, answers(questions))
            )

    asyncio.run(run()).to_parquet(Path(folder) / "judgements.parquet")


def test_a_job_killed_while_waiting_polls_the_same_batch(tmp_path):
    with OpenAITestServer(reply=strict_judge) as server:
        online, _ = judged(tmp_path, server, "online")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with OpenAITestServer(reply=strict_judge, batch_delay=2.0) as server:
        argv = [sys.executable, "-c", KILLED_JOB, server.base_url, str(tmp_path)]
        job = subprocess.Popen(argv, env=env, cwd=REPO)
        store = BatchStore(tmp_path / "cache.batches")
        deadline = time.monotonic() + 60

        def waiting() -> bool:
            return any(r["status"] == "submitted" for r in store.records())

        while not waiting() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiting(), "the job wrote no batch record"
        os.kill(job.pid, signal.SIGKILL)
        job.wait()
        assert server.batch_api.created == 1
        rerun = subprocess.run(argv, env=env, cwd=REPO, timeout=120)
        assert rerun.returncode == 0
        assert server.batch_api.created == 1  # polled, never submitted again
    same_table(online, pd.read_parquet(tmp_path / "judgements.parquet"))
    assert [r["status"] for r in store.records()] == ["collected"]


class Killed(BaseException):
    """A job's death at one point of a submission (BaseException: nothing may catch it)."""


@pytest.mark.parametrize("dies", ["after the batch is created", "before the batch is created"])
def test_a_job_killed_while_submitting_never_submits_twice(tmp_path, monkeypatch, dies):
    """Killed between the provider creating the batch and the record being written, a rerun
    finds the batch by its submission name and polls it; killed before the provider made one, it
    submits it (once)."""
    from mnemoflow.llm import batch_mode

    with OpenAITestServer(reply=strict_judge) as server:
        online, _ = judged(tmp_path, server, "online")
    with OpenAITestServer(reply=strict_judge) as server:
        if dies == "after the batch is created":
            save = BatchStore.save

            def dying_save(store, record):
                if record["status"] == "submitted":
                    raise Killed
                save(store, record)

            monkeypatch.setattr(BatchStore, "save", dying_save)
        else:

            async def dying_create(client, *args):
                raise Killed

            monkeypatch.setattr(batch_mode.BatchClient, "create", dying_create)
        with pytest.raises(Killed):
            judged(tmp_path, server, "batch", batch=True, batch_poll_s=0.01)
        store = BatchStore(tmp_path / "batch-cache.batches")
        assert [r["status"] for r in store.records()] == [batch_mode.SUBMITTING]
        monkeypatch.undo()
        rerun, _ = judged(tmp_path, server, "batch", batch=True, batch_poll_s=0.01)
        assert server.batch_api.created == 1
    same_table(online, rerun)
    assert [r["status"] for r in store.records()] == ["collected"]


def test_submit_and_leave_then_collect_then_run_on_the_cached_replies(
    tmp_path, monkeypatch, capsys
):
    """``mnemoflow batch submit``: the job submits and stops; ``collect`` fills the cache; the
    job run again makes no request and counts the replies as batch calls."""
    from mnemoflow.cli import main
    from mnemoflow.llm.batch_mode import SUBMIT_ONLY_ENV
    from mnemoflow.llm.types import EndpointError

    with OpenAITestServer(reply=strict_judge) as server:
        online, _ = judged(tmp_path, server, "online")
    with OpenAITestServer(reply=strict_judge, batch_delay=2.0) as server:
        binding = {"base_url": server.base_url, "model": "judge-test", "batch": True}
        config = {"models": {"judge": {**binding, "batch_poll_s": 0.05}}, "cache": "batch-cache"}
        (tmp_path / "config.yaml").write_text(json.dumps(config))  # the run's config
        monkeypatch.setenv(SUBMIT_ONLY_ENV, "1")
        with pytest.raises(EndpointError, match=r"12 requests wait in Batch-API batches batch_"):
            judged(tmp_path, server, "batch", **binding)
        monkeypatch.delenv(SUBMIT_ONLY_ENV)

        def batch(*argv: str) -> str:
            assert main(["batch", *argv, "--directory", str(tmp_path)]) == 0
            return capsys.readouterr().out

        [record] = BatchStore(tmp_path / "batch-cache.batches").records()
        assert batch("status") == f"{record['id']}\tjudge\t12 requests\tin_progress\n"
        assert batch("collect", "--wait").endswith("\tcompleted\n")
        assert batch("status") == "no outstanding Batch-API batches\n"
        server.reset()
        batched, ledger = judged(tmp_path, server, "batch", **binding)
        assert server.stats().total == 0 and server.batch_api.created == 1
    same_table(online, batched)
    assert ledger.totals().batch_calls == 12 and ledger.to_dict()["batch_ids"] == [record["id"]]
    assert [r["uncounted"] for r in BatchStore(tmp_path / "batch-cache.batches").records()] == [
        False
    ]


def test_the_test_servers_batch_api_in_openai_shapes(tmp_path):
    """Upload, create, retrieve (in progress, then completed), output and error files."""
    from mnemoflow.llm.types import EndpointError

    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    lines = [batch_line(f"k{i}", body) for i in range(3)]
    spec = EndpointSpec("judge", backend="openai", model="m", base_url="http://x/v1")
    with OpenAITestServer(batch_delay=0.3, batch_line_errors=1) as server:
        client = BatchClient(spec, server.base_url)

        async def run():
            file_id = await client.upload(b"".join(lines), "in.jsonl")
            assert await client.content(file_id) == b"".join(lines)
            batch = await client.create(file_id, "24h", "mnemoflow-x.jsonl")
            assert (batch["object"], batch["status"], batch["input_file_id"]) == (
                "batch",
                "in_progress",
                file_id,
            )
            assert batch["request_counts"]["total"] == 3
            await asyncio.sleep(0.35)
            done = await client.retrieve(batch["id"])
            out = await client.content(done["output_file_id"])
            errors = await client.content(done["error_file_id"])
            with pytest.raises(EndpointError, match="HTTP 404"):
                await client.retrieve("batch_none")
            return done, out, errors

        done, out, errors = asyncio.run(run())
    assert done["status"] == "completed"
    assert done["request_counts"] == {"total": 3, "completed": 2, "failed": 1}
    answered, failed = read_output(out + errors)
    assert sorted(answered) == ["k1", "k2"] and failed == {"k0": "planned line error"}
    assert answered["k1"]["choices"][0]["message"]["content"] == "echo: hello"


def test_summary_cost_prices_batch_tokens_at_batch_prices():
    from mnemoflow.report.summaries import LedgerFile, _cost

    ledger = LedgerFile("x", {"roles": {"judge": {"backend": "openai", "model": "judge-test"}}})
    counters = {"tokens_in": 3_000_000, "tokens_out": 1_000_000, "cached_in": 0}
    batch = {"batch_tokens_in": 2_000_000, "batch_tokens_out": 1_000_000}
    # online: 1 M in x $2; batch: 2 M in x $1 + 1 M out x $4
    assert _cost(ledger, "judge", {**counters, **batch}, PRICES) == pytest.approx(2 + 2 + 4)
    assert _cost(ledger, "judge", counters, PRICES) == pytest.approx(6 + 8)


FAKE_SBATCH = """#!/bin/sh
# sbatch's stand-in: records its arguments, says the job id SLURM would
echo "$@" >> "$(dirname "$0")/sbatch.calls"
echo 4242
"""


def test_a_managed_run_batch_endpoint_drains_as_a_slurm_job_submitted_once(tmp_path, monkeypatch):
    """Inside a SLURM job the command is submitted with the endpoint's resources, its job id
    recorded before the job waits; a job killed while it waits waits for the same SLURM job
    when it runs again, and reads its output (no second sbatch). A SLURM job that left no
    output fails the job in one line naming its log, and the next run submits it again."""
    from mnemoflow.jobs.run_batch import slurm_drain
    from mnemoflow.llm.endpoints import bind_endpoints
    from mnemoflow.llm.types import EndpointError
    from mnemoflow.ops import batch_jobs

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text(FAKE_SBATCH)
    (fake / "squeue").write_text("#!/bin/sh\n")  # the job has left the queue
    for name in ("sbatch", "squeue"):
        (fake / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)  # results/logs/endpoints/ under it
    command = (
        f"{sys.executable} -m mnemoflow.testing.run_batch -i {{input}} -o {{output}} "
        "--model judge-test --reply yes"
    )
    endpoints = {"gpu": {"run_batch": command, "gpus": 1, "mem_mb": 8000, "time_limit_min": 30}}
    models = bind_endpoints({"judge": {"endpoint": "gpu", "model": "judge-test", "batch": True}},
                            endpoints)  # fmt: skip
    environ = {**os.environ, "SLURM_JOB_ID": "7", "SLURM_JOB_PARTITION": "gpus"}
    _, _, questions = longmemeval_tables()

    def job():
        gateway = Gateway.from_config(
            models, cache_path=tmp_path / "cache", prices=PRICES,
            drain_command=slurm_drain(endpoints, environ),
        )  # fmt: skip

        async def run():
            async with gateway:
                return await gateway.batched(
                    lambda: judge_answers(gateway, "longmemeval", questions, answers(questions))
                )

        return asyncio.run(run()), gateway.ledger

    def killed(jobid: str) -> None:
        raise RuntimeError(f"killed while waiting for {jobid}")

    with pytest.raises(EndpointError, match=r"run_batch SLURM job 4242 ended without an output "
                       r"file; its log: results/logs/endpoints/gpu.run_batch.log$"):  # fmt: skip
        job()  # the fake sbatch ran nothing
    [record] = BatchStore(tmp_path / "cache.batches").records()
    assert "slurm_job" not in record and record["status"] == "submitted"
    wait = batch_jobs.wait
    monkeypatch.setattr(batch_jobs, "wait", killed)
    with pytest.raises(RuntimeError, match="killed while waiting for 4242"):
        job()
    [record] = BatchStore(tmp_path / "cache.batches").records()
    assert record["slurm_job"] == "4242" and record["status"] == "submitted"
    first, call = (fake / "sbatch.calls").read_text().splitlines()
    assert first == call  # the same batch submitted again
    for option in ("--gres=gpu:1", "--mem=8000", "--time=30", "--cpus-per-task=1",
                   "--partition=gpus", "--job-name=mnemoflow-run-batch-gpu"):  # fmt: skip
        assert option in call.split(), option
    # SLURM runs the job meanwhile; the job runs again and finds it done
    subprocess.run(call.split(" --wrap ", 1)[1], shell=True, check=True)
    monkeypatch.setattr(batch_jobs, "wait", wait)
    frame, ledger = job()
    assert len((fake / "sbatch.calls").read_text().splitlines()) == 2  # not submitted again
    assert ledger.totals().batch_calls == 12 and set(frame.raw_reply) == {"yes"}
    assert frame.parse_ok.all()
    assert [r["status"] for r in BatchStore(tmp_path / "cache.batches").records()] == ["collected"]


class _StrictMetric:
    """A MemoryBench-style metric module whose judge failure raises (as WritingBench's critic
    does): a pending reply in a collecting pass must not stop the pass."""

    __name__ = "tests.strict_metric"

    @staticmethod
    async def evaluate_item(question: dict, response: str, gateway) -> Any:
        request = ChatRequest(
            role="judge",
            task="score",
            messages=[{"role": "user", "content": f"Grade {response!r}: {question['question']}"}],
        )
        reply = await gateway.chat(request)
        if not reply.parse_ok:
            raise ValueError(f"{question['question_id']}: the judge gave no score")
        return SimpleNamespace(metric="m", value=len(reply.text) % 3, raw_reply=reply.text,
                               parse_ok=True)  # fmt: skip


def test_feedback_scoring_in_batches_after_a_talk_asked_online(tmp_path):
    """A feedback step's shape: a judge call inside a dialogue asked online (``online``), then
    the answers scored in one batch; the ledger keeps the online call beside the batch's."""
    from mnemoflow.protocols.feedback import score_step

    questions = pd.DataFrame(
        [
            {"question_id": f"q{i}", "question": f"question {i}", "dataset": "d",
             "question_type": "t", "split": "test"}
            for i in range(3)
        ]
    )  # fmt: skip
    answered = pd.DataFrame({"question_id": ["q0", "q1", "q2"], "response": ["a", "bb", "ccc"]})
    talk = ChatRequest(role="judge", task="talk", messages=[{"role": "user", "content": "turn"}])
    with OpenAITestServer() as server:
        binding = {"base_url": server.base_url, "model": "judge-test", "batch_poll_s": 0.01}
        results = {}
        for name, batch in (("online", False), ("batch", True)):
            gateway = Gateway.from_config(
                {"judge": {**binding, "batch": batch}}, cache_path=tmp_path / name, prices=PRICES
            )

            async def run(gateway=gateway):
                async with gateway:
                    with gateway.online("a dialogue's next turn depends on the verdict"):
                        await gateway.chat(talk)
                    return await gateway.batched(
                        lambda: score_step(
                            answered, questions, pd.DataFrame(columns=DIALOGUES.names), {"step": 0},
                            gateway, _StrictMetric, "judge-test/strict",
                        )
                    )  # fmt: skip

            results[name] = (asyncio.run(run()), gateway.ledger.totals())
            gateway.close()
        assert server.batch_api.created == 1
        assert server.stats().paths["chat"] == 1 + 3 + 1  # online: talk + 3; batch: talk only
    (online, online_total), (batched, total) = results["online"], results["batch"]
    for name in ("judgements", "question_scores", "scores"):
        same_table(getattr(online, name), getattr(batched, name))
    assert (total.calls, total.batch_calls, total.cache_hits) == (4, 3, 0)
    assert online_total.calls == 4 and online_total.batch_calls == 0
    # outside both a batched pass and an online part, a batch role's miss is refused
    gateway = Gateway.from_config({"judge": {**binding, "batch": True}}, cache_path=tmp_path / "x")
    with pytest.raises(ConfigError, match=r"feedback family's scoring"):
        asyncio.run(gateway.chat(talk))
