"""Response cache and ledger: hits, misses, sharing across gateways and processes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import multiprocessing

import numpy as np
import pytest

from mnemoflow.llm.cache import ResponseCache, cache_key
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.ledger import Ledger
from mnemoflow.llm.openai_backend import OpenAIBackend
from mnemoflow.llm.types import ChatRequest, Completion, EndpointError
from mnemoflow.testing.openai_server import OpenAITestServer

QUESTION = [{"role": "user", "content": "Where do I keep my bicycle?"}]


def bind(server: OpenAITestServer, **params) -> dict:
    return {"agent": {"base_url": server.base_url, "model": "m", **params}}


def chat(gateway: Gateway, request: ChatRequest):
    async def main():
        try:
            return await gateway.chat(request)
        finally:
            await gateway.aclose()

    return asyncio.run(main())


def test_identical_request_hits_the_cache(tmp_path):
    with OpenAITestServer() as server:
        gateway = Gateway.from_config(bind(server), tmp_path / "cache.sqlite")
        first = chat(gateway, ChatRequest("agent", "answer", QUESTION))
        second = chat(gateway, ChatRequest("agent", "answer", QUESTION))
        assert server.stats().total == 1
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.text == first.text == "echo: Where do I keep my bicycle?"
    assert (second.tokens_in, second.tokens_out) == (first.tokens_in, first.tokens_out)


@pytest.mark.parametrize(
    "params",
    [{"temperature": 0.7}, {"max_tokens": 100}, {"top_p": 0.5}, {"seed": 3}],
    ids=["temperature", "max_tokens", "top_p", "seed"],
)
def test_any_sampling_parameter_change_is_a_miss(tmp_path, params):
    cache = tmp_path / "cache.sqlite"
    with OpenAITestServer() as server:
        base = Gateway.from_config(bind(server), cache)
        assert not chat(base, ChatRequest("agent", "answer", QUESTION)).cache_hit
        changed = Gateway.from_config(bind(server, **params), cache)
        assert not chat(changed, ChatRequest("agent", "answer", QUESTION)).cache_hit
        assert chat(changed, ChatRequest("agent", "answer", QUESTION)).cache_hit
        assert server.stats().total == 2


def test_per_request_seed_and_messages_change_the_key(tmp_path):
    with OpenAITestServer() as server:
        gateway = Gateway.from_config(bind(server, seed=1), tmp_path / "cache.sqlite")
        hits = [
            chat(gateway, ChatRequest("agent", "answer", QUESTION)).cache_hit,
            chat(gateway, ChatRequest("agent", "answer", QUESTION, seed=1)).cache_hit,  # same
            chat(gateway, ChatRequest("agent", "answer", QUESTION, seed=2)).cache_hit,
            chat(gateway, ChatRequest("agent", "answer", QUESTION + QUESTION)).cache_hit,
        ]
        assert server.stats().total == 3
    assert hits == [False, True, False, False]


def test_key_ignores_endpoint_address_and_key_variable(tmp_path):
    """The key is what determines a reply: moving a model to another host keeps the cache."""
    cache = tmp_path / "cache.sqlite"
    with OpenAITestServer() as first:
        chat(Gateway.from_config(bind(first), cache), ChatRequest("agent", "answer", QUESTION))
    with OpenAITestServer() as second:
        moved = Gateway.from_config(bind(second, api_key_env=None), cache)
        assert chat(moved, ChatRequest("agent", "answer", QUESTION)).cache_hit
        assert second.stats().total == 0


def test_a_second_gateway_on_the_same_file_hits(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with OpenAITestServer() as server:
        writer = Gateway.from_config(bind(server), cache)
        chat(writer, ChatRequest("agent", "answer", QUESTION))
        reader = Gateway.from_config(bind(server), cache)  # opened while the writer is open
        reply = chat(reader, ChatRequest("agent", "answer", QUESTION))
        writer.close()
        reader.close()
        assert server.stats().total == 1
    assert reply.cache_hit and reply.text == "echo: Where do I keep my bicycle?"
    # The old file name maps to a directory beside it; only the writer created a shard pair.
    assert not cache.exists()
    shards = sorted(p.suffix for p in (tmp_path / "cache" / "shards").iterdir())
    assert shards == [".data", ".index"]


def _write_many(path: str, worker: int, barrier) -> None:
    cache = ResponseCache(path)  # every worker creates the directory at once
    barrier.wait()
    for i in range(150):
        shared = i % 2 == 0  # even keys are written by every worker, odd ones by this one only
        key = cache_key({"i": i} if shared else {"i": i, "worker": worker})
        cache.put(key, Completion(text=f"reply {i}", model="m", tokens_in=i, tokens_out=1))
        if i % 10 == 0:
            vector = np.full(4, float(i), dtype=np.float32)
            cache.put_vectors({cache_key({"vector": i}): vector})
    cache.close()


def test_processes_writing_one_cache_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    context = multiprocessing.get_context("fork")
    workers = 4
    barrier = context.Barrier(workers)
    processes = [
        context.Process(target=_write_many, args=(path, w, barrier)) for w in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [p.exitcode for p in processes] == [0] * workers
    cache = ResponseCache(path)
    # 75 shared even keys + 4 workers x 75 own odd keys
    assert cache.count() == 75 + workers * 75
    for i in range(0, 150, 2):
        assert cache.get(cache_key({"i": i})).text == f"reply {i}"
    for worker in range(workers):
        for i in range(1, 150, 2):
            got = cache.get(cache_key({"i": i, "worker": worker}))
            assert (got.text, got.tokens_in) == (f"reply {i}", i)
    vectors = cache.get_vectors([cache_key({"vector": i}) for i in range(0, 150, 10)])
    assert len(vectors) == 15 and vectors[cache_key({"vector": 20})].tolist() == [20.0] * 4
    cache.close()


def test_ledger_counts_calls_hits_tokens_retries_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(OpenAIBackend, "backoff_base", 0.01)
    # Worked example: two distinct questions, the first asked twice (one hit), the endpoint
    # failing each distinct request once (one retry per miss), then one call that fails for good.
    # Tokens: "Where do I keep my bicycle?" 6 words -> int(7.8) + 1 = 8; prompt 3 + 4 + 8 = 15;
    # reply "echo: Where do I keep my bicycle?" 7 words -> int(9.1) + 1 = 10.
    # "q2" 1 word -> 2; prompt 3 + 4 + 2 = 9; reply "echo: q2" -> 2 words -> 3.
    other = [{"role": "user", "content": "q2"}]
    with OpenAITestServer(faults=["503"], retry_after=0.01) as server:
        gateway = Gateway.from_config(bind(server), tmp_path / "cache.sqlite")
        chat(gateway, ChatRequest("agent", "answer", QUESTION))
        chat(gateway, ChatRequest("agent", "answer", QUESTION))
        chat(gateway, ChatRequest("judge", "judge_qa", QUESTION, fields=_judge_fields()))
        chat(gateway, ChatRequest("agent", "answer", other))
    # nothing listens on the discard port: connection refused, retried once, then an error
    unreachable = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 1}
    broken = Gateway.from_config({"agent": unreachable})
    with pytest.raises(EndpointError, match=r"models\.agent .*gave up after 2 attempts"):
        chat(broken, ChatRequest("agent", "answer", QUESTION))

    assert server.stats().total == 4  # 2 misses x (1 fault + 1 answer)
    answer = gateway.ledger.entries["agent/answer"]
    assert (answer.calls, answer.cache_hits, answer.retries, answer.errors) == (3, 1, 2, 0)
    assert (answer.tokens_in, answer.tokens_out) == (15 + 9, 10 + 3)  # the hit costs nothing
    assert (answer.parse_failures, answer.reasks) == (0, 0)  # counted by the gateway itself:
    # tests/test_gateway_parse.py makes replies fail to parse and checks these counts
    judge = gateway.ledger.entries["judge/judge_qa"]  # offline role: no endpoint, no retries
    assert (judge.calls, judge.cache_hits, judge.retries) == (1, 0, 0)
    assert broken.ledger.entries["agent/answer"].errors == 1

    data = json.loads(gateway.ledger.to_json({"stage": "answer"}))
    assert data["stage"] == "answer"
    assert data["models"] == {"agent": "m", "judge": "offline-heuristic"}
    assert data["totals"]["calls"] == 4 and data["totals"]["cache_hits"] == 1
    assert data["by_role_task"]["agent/answer"]["retries"] == 2


def _judge_fields() -> dict:
    return {"question": "Where?", "reference": "garage", "response": "in the garage"}


def test_ledger_totals_sum_entries():
    ledger = Ledger()
    ledger.record("agent", "a", model="m", cache_hit=False, tokens_in=5, tokens_out=2, latency_s=1)
    ledger.record("agent", "a", model="m", cache_hit=True, tokens_in=5, tokens_out=2, latency_s=0)
    ledger.record("judge", "j", model="m", cache_hit=False, tokens_in=7, tokens_out=1, latency_s=2)
    ledger.record_error("judge", "j")
    totals = ledger.totals()
    assert (totals.calls, totals.cache_hits, totals.tokens_in, totals.tokens_out) == (3, 1, 12, 3)
    assert (totals.latency_s, totals.errors) == (3, 1)


def test_every_input_that_changes_a_reply_changes_the_key():
    """What the endpoint (or the offline model) reads is in the key; where the key lives is not."""
    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    network = Gateway.from_config({"agent": endpoint})
    offline = Gateway.from_config({})
    base = ChatRequest("agent", "answer", QUESTION, fields={"question": "Where?"})
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}

    def key(gateway, attempt=0, **change):
        return gateway.request_key(dataclasses.replace(base, **change), attempt)

    for gateway in (network, offline):
        changed = [
            key(gateway, attempt=1),
            key(gateway, response_format=schema),
            key(gateway, seed=7),
            key(gateway, messages=[{"role": "user", "content": "Where is my car?"}]),
        ]
        assert len({key(gateway), *changed}) == 5
    # the offline model reads the task and the fields, not only the rendered messages
    assert key(offline, task="judge_qa") != key(offline)
    assert key(offline, fields={"question": "When?"}) != key(offline)
    # a real model reads the messages only: the same prompt for another task is the same reply
    assert key(network, task="judge_qa", fields={"question": "When?"}) == key(network)
    moved = Gateway.from_config(
        {"agent": {**endpoint, "base_url": "http://10.0.0.2/v1", "api_key_env": "OTHER_KEY"}}
    )
    assert moved.request_key(base) == network.request_key(base)


class CountingEmbedder:
    """Stands in for the local model: a fixed vector per text, and a count of texts embedded."""

    def __init__(self):
        self.texts = 0

    async def embed(self, texts, spec):
        self.texts += len(texts)
        return np.ones((len(texts), 3), dtype=np.float32)

    async def aclose(self):
        return None


def _local_embedder_computes(folder, cache, texts: list[str]) -> int:
    """How many of ``texts`` a fresh gateway on the local model in ``folder`` computes."""
    gateway = Gateway.from_config(
        {"embedder": {"backend": "sentence_transformers", "model": str(folder)}}, cache
    )
    gateway._backends["embedder"] = backend = CountingEmbedder()
    asyncio.run(gateway.embed(texts))
    gateway.close()
    return backend.texts


def test_a_local_embedders_weights_are_part_of_its_key(tmp_path):
    """``model`` names a folder; new weights saved into it (a fine-tuned model, a reinstalled
    package) must not be served the old model's cached vectors."""
    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    (folder / "model.safetensors").write_bytes(b"weights v1")
    texts = ["where is my bicycle", "in the garage"]
    assert _local_embedder_computes(folder, tmp_path / "cache", texts) == 2
    assert _local_embedder_computes(folder, tmp_path / "cache", texts) == 0  # same weights
    (folder / "model.safetensors").write_bytes(b"weights v2")
    assert _local_embedder_computes(folder, tmp_path / "cache", texts) == 2


def test_a_local_embedders_batching_scheme_is_part_of_its_key(tmp_path, monkeypatch):
    """Vectors computed under another batching scheme differ in their last bits: never reused."""
    from mnemoflow.llm import canonical_batches

    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    assert _local_embedder_computes(folder, tmp_path / "cache", ["where is my bicycle"]) == 1
    assert _local_embedder_computes(folder, tmp_path / "cache", ["where is my bicycle"]) == 0
    monkeypatch.setattr(canonical_batches, "SCHEME", "another-scheme")
    assert _local_embedder_computes(folder, tmp_path / "cache", ["where is my bicycle"]) == 1
