"""What each memory system uses at ingest and at query time, so reruns touch only what changed.

``ingest_params`` / ``ingest_roles`` / ``query_roles`` decide which job's params carry a value;
a declaration that is too small would let a change go unnoticed, so the declarations are checked
by running every system with only the roles it declares bound, and by rebuilding a system from
its two stage parts.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import (
    MemoryItem,
    MemorySystem,
    available,
    build,
    full_spec,
    resolve,
    stage_roles,
    stage_spec,
)
from tests.memory_support import messages, synthetic

OFFLINE = {"backend": "offline"}


def test_rag_splits_its_parameters_at_top_k():
    spec = {"type": "rag", "update_batch": 3, "local_window": 2, "top_k": 7}
    assert stage_spec(spec, "ingest") == {"type": "rag", "update_batch": 3, "local_window": 2}
    assert stage_spec(spec, "query") == {"type": "rag", "top_k": 7}
    assert full_spec(stage_spec(spec, "ingest"), stage_spec(spec, "query")) == spec


def test_bm25_builds_its_index_at_query_time_so_every_parameter_is_query_time():
    spec = {"type": "bm25_message", "top_k": 3, "k1": 1.2}
    assert stage_spec(spec, "ingest") == {"type": "bm25_message"}
    assert stage_spec(spec, "query") == spec
    assert stage_roles(spec, "ingest") == () and stage_roles(spec, "query") == ()


def test_writer_systems_write_at_ingest_and_only_embed_at_query():
    spec = {"type": "agentic_external"}
    assert stage_roles(spec, "ingest") == ("memory_writer", "embedder")
    assert stage_roles(spec, "query") == ("embedder",)
    assert stage_roles({"type": "agentic_incontext"}, "query") == ()


class Undeclared(MemorySystem):
    """A system that says nothing about its stages: everything counts as ingest-time."""

    name: ClassVar[str] = "undeclared_for_test"
    defaults: ClassVar[dict[str, Any]] = {"top_k": 1, "width": 2}

    async def add(self, messages, meta=None):
        return None

    async def retrieve(self, query, k=None) -> list[MemoryItem]:
        return []

    def save(self, directory):
        return None

    def load(self, directory):
        return None


def test_a_system_that_declares_nothing_re_ingests_on_any_change():
    spec = {"class": f"{__name__}:Undeclared", "top_k": 3}
    assert stage_spec(spec, "ingest") == spec
    assert stage_spec(spec, "query") == {"class": f"{__name__}:Undeclared"}
    assert stage_roles(spec, "query") == ("memory_writer", "embedder")


@pytest.mark.parametrize("name", available())
def test_declared_ingest_params_are_parameters(name):
    cls = resolve(name)
    if cls.ingest_params is not None:
        assert set(cls.ingest_params) <= set(cls.defaults), name


def _gateway(roles: tuple[str, ...]) -> Gateway:
    return Gateway.from_config({role: OFFLINE for role in roles}, only_given=True)


@pytest.mark.parametrize("name", available())
def test_each_system_runs_with_only_its_declared_roles_bound(name, tmp_path):
    """A role a system calls but does not declare would fail here (the gateway refuses it)."""
    prepared = synthetic(users=1, periods=1, sessions_per_period=3, turns_per_session=4, seed=1)
    question = prepared.questions.question.iloc[0]
    spec = {"type": name}

    async def go() -> list[MemoryItem]:
        writer = build(stage_spec(spec, "ingest"), llm=_gateway(stage_roles(spec, "ingest")))
        await writer.add(messages(prepared.sessions))
        writer.save(tmp_path)
        spec_back = full_spec(stage_spec(spec, "ingest"), stage_spec(spec, "query"))
        reader = build(spec_back, llm=_gateway(stage_roles(spec, "query")))
        reader.load(tmp_path)
        return await reader.retrieve(question)

    items = asyncio.run(go())
    if name not in ("none", "imported"):  # the two that store nothing
        assert items, f"{name} retrieved nothing from 12 stored turns"


def test_an_undeclared_role_is_an_error_not_the_default_binding():
    gateway = _gateway(("agent",))
    with pytest.raises(ConfigError, match="'embedder' is not bound in this job"):
        asyncio.run(gateway.embed(["text"]))


def test_a_job_given_only_the_judge_calls_the_critic_with_the_judges_binding():
    """Only-given gateways keep ROLE_DEFAULTS: an unbound critic takes the judge's binding."""
    judge = {"base_url": "http://judge/v1", "model": "judge-model"}
    gateway = Gateway.from_config({"judge": judge}, only_given=True)
    assert "critic" not in gateway.unbound
    assert gateway.specs["critic"].model == "judge-model"
    gateway._check_bound("critic")  # no error
    with pytest.raises(ConfigError, match="'user' is not bound in this job"):
        gateway._check_bound("user")
