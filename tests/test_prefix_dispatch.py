"""Prefix-cache-aware dispatch (llm/prefix_dispatch.py) and the test server's bounded prefix cache
(testing/prefix_cache.py): the order is deterministic and grouped, prompts are sent unchanged,
requests in flight stay bounded, and a bounded LRU serves more of the prompt tokens with it."""

from __future__ import annotations

import asyncio
import random

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.lexical import count_tokens
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.prefix_dispatch import PrefixDispatcher, depth, prompt_chain
from mnemoflow.llm.types import ChatRequest, EndpointSpec
from mnemoflow.testing.openai_server import OpenAITestServer, _text_of, prompt_tokens
from mnemoflow.testing.prefix_cache import (
    IdealCache,
    PrefixCache,
    block_chain,
    content_stream,
    prompt_stream,
)


def _conversation(k: int, turns: int = 30) -> str:
    return " ".join(
        f"turn {i} of conversation {k}: we talked about subject {k * 31 + i} at some length"
        for i in range(turns)
    )


def _messages(k: int, q: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer the question from the conversation."},
        {"role": "user", "content": f"{_conversation(k)}\nQuestion {q}: what about item {q}?"},
    ]


# ---- the server's prefix cache ---------------------------------------------------------------


def test_the_token_stream_has_the_servers_prompt_token_count():
    for text in ("", "Hello, world!", "one two three four five six seven", "猫が好き"):
        assert len(content_stream(text)) == count_tokens(text)
    messages = _messages(1, 2)
    assert len(prompt_stream(messages, _text_of)) == prompt_tokens(messages)


def test_a_block_is_shared_only_with_the_whole_prefix_before_it():
    a = [f"t{i}" for i in range(50)]
    b = [*a[:40], *(f"u{i}" for i in range(10))]
    c = ["x", *a[1:]]
    ca, cb, cc = block_chain(a, 16), block_chain(b, 16), block_chain(c, 16)
    assert len(ca) == 3  # 49 tokens usable (the last is always computed): 3 whole blocks
    assert ca[:2] == cb[:2] and ca[2] != cb[2]  # they part at token 40, inside block 3
    assert not set(cc) & set(ca)  # one token differs at the start: nothing is shared after it
    assert len(block_chain([f"t{i}" for i in range(17)], 16)) == 1
    assert block_chain([f"t{i}" for i in range(16)], 16) == []  # all of it would be cached


def test_the_lru_evicts_least_recent_first_and_a_chains_tail_before_its_head():
    cache = PrefixCache(blocks=4)
    cache.fill(["a1", "a2", "a3"])
    assert cache.lookup(["a1", "a2", "a3", "a4"]) == 3
    cache.fill(["b1", "b2"])  # 5 blocks: the oldest, deepest block of a goes
    assert len(cache) == 4
    assert cache.lookup(["a1", "a2", "a3"]) == 2
    cache.fill(["a1", "a2"])  # a used again: b is now the least recent
    cache.fill(["c1", "c2"])
    assert cache.lookup(["b1", "b2"]) == 0
    assert cache.lookup(["a1", "a2"]) == 2 and cache.lookup(["c1", "c2"]) == 2
    longer = PrefixCache(blocks=2)
    longer.fill(["d1", "d2", "d3", "d4"])  # longer than the cache: its head stays
    assert longer.lookup(["d1", "d2", "d3", "d4"]) == 2
    with pytest.raises(ValueError, match="blocks"):
        PrefixCache(blocks=0)


def test_the_ideal_cache_serves_every_block_sent_before_in_any_order():
    chains = [["a", "b", "c"], ["a", "b", "d"], ["a", "e"], ["f"]]
    totals = set()
    for seed in range(5):
        ideal, order = IdealCache(), list(chains)
        random.Random(seed).shuffle(order)
        totals.add(sum(ideal.arrive(chain) for chain in order))
    assert totals == {3}  # 8 blocks sent, 5 distinct: 3 served whatever the order


def test_the_server_reports_cached_tokens_of_completed_prefixes_only():
    import openai

    with OpenAITestServer(prefix_cache_blocks=1000) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x")

        def ask(messages):
            reply = client.chat.completions.create(model="m", messages=messages)
            return reply.usage.prompt_tokens, reply.usage.prompt_tokens_details.cached_tokens

        first, cached = ask(_messages(1, 1))
        assert cached == 0
        second, cached = ask(_messages(1, 2))  # the conversation is cached, the question not
        assert 0 < cached < second and cached % 16 == 0
        assert ask(_messages(2, 1))[1] <= 16  # another conversation: the system prompt at most
        stats = server.stats()
        assert stats.prompt_tokens == first + second + ask_tokens(_messages(2, 1))
        assert stats.cached_tokens == stats.ideal_cached_tokens == stats.bound_cached_tokens
        assert stats.cached_tokens >= cached
        client.close()

    with OpenAITestServer(prefix_cache_blocks=4) as server:  # 64 tokens: the head of one prompt
        client = openai.OpenAI(base_url=server.base_url, api_key="x")
        client.chat.completions.create(model="m", messages=_messages(1, 1))
        reply = client.chat.completions.create(model="m", messages=_messages(1, 2))
        assert reply.usage.prompt_tokens_details.cached_tokens == 64
        stats = server.stats()
        # an unbounded cache serves more; no order serves more than the 4 leading blocks
        assert stats.ideal_cached_tokens > 64 == stats.bound_cached_tokens
        server.reset()  # a bench's next run starts cold
        reply = client.chat.completions.create(model="m", messages=_messages(1, 2))
        assert reply.usage.prompt_tokens_details.cached_tokens == 0
        client.close()


def ask_tokens(messages) -> int:
    return prompt_tokens(messages)


# ---- the dispatcher ---------------------------------------------------------------------------


def test_chains_are_prefix_closed_and_depth_finds_the_shared_prefix():
    a, b = prompt_chain(_messages(1, 1), 64), prompt_chain(_messages(1, 2), 64)
    c = prompt_chain(_messages(2, 1), 64)
    shared = depth(a, set(b).__contains__)
    assert 1 < shared < len(a) and a[:shared] == b[:shared] and a[shared] != b[shared]
    assert depth(a, set(c).__contains__) < shared
    assert depth(a, set().__contains__) == 0 and depth(a, set(a).__contains__) == len(a)


async def _dispatch(requests, limit=3):
    """Send ``requests`` (key, messages) through one dispatcher with a stand-in endpoint; the
    events (start / end, key) in order, the messages it was sent, the dispatcher."""
    dispatcher, events, sent = PrefixDispatcher(limit), [], {}
    inflight = [0, 0]

    async def call(key, messages):
        inflight[0] += 1
        inflight[1] = max(inflight)
        events.append(("start", key))
        sent[key] = messages
        for _ in range(3):
            await asyncio.sleep(0)
        events.append(("end", key))
        inflight[0] -= 1
        return key

    async def one(key, messages):
        return await dispatcher.send(messages, key, lambda: call(key, messages))

    replies = await asyncio.gather(*(one(k, m) for k, m in requests))
    assert replies == [k for k, _ in requests]
    assert inflight[1] <= limit
    return events, sent, dispatcher


def _requests(conversations=3, questions=4):
    return [(f"c{k}q{q}", _messages(k, q)) for k in range(conversations) for q in range(questions)]


def test_the_order_is_grouped_deterministic_and_prompts_unchanged():
    requests = _requests()
    orders = set()
    for seed in range(4):
        shuffled = list(requests)
        random.Random(seed).shuffle(shuffled)
        events, sent, dispatcher = asyncio.run(_dispatch(shuffled))
        orders.add(tuple(dispatcher.released))
        assert sent == dict(requests)  # every prompt sent once, as given
        assert dispatcher.max_inflight <= 3
    assert len(orders) == 1  # the same order whatever order the job asked in
    (order,) = orders
    groups = [key[:2] for key in order]
    assert groups == sorted(groups, key=groups.index)  # one conversation after another


def test_a_groups_first_request_completes_before_the_rest_are_released():
    events, _, _ = asyncio.run(_dispatch(_requests(conversations=2, questions=5), limit=4))
    for conversation in ("c0", "c1"):
        mine = [(kind, key) for kind, key in events if key.startswith(conversation)]
        leader = mine[0][1]
        assert mine[1] == ("end", leader)  # nothing else of the group started before
        assert all(kind == "start" for kind, _ in mine[2:4])  # then the rest, several at once


def test_in_flight_is_bounded_and_unrelated_prompts_are_not_held():
    unrelated = [(f"u{k}", [{"role": "user", "content": f"{k} " * 3}]) for k in range(10)]
    events, _, dispatcher = asyncio.run(_dispatch(unrelated, limit=4))
    assert dispatcher.max_inflight == 4  # no group to wait for: the bound is used
    assert [kind for kind, _ in events[:4]] == ["start"] * 4


def test_a_failed_or_cancelled_request_releases_the_ones_held_behind_it():
    async def scenario():
        dispatcher = PrefixDispatcher(2)

        async def fail():
            await asyncio.sleep(0)
            raise RuntimeError("endpoint down")

        async def ok():
            return "ok"

        first = asyncio.ensure_future(dispatcher.send(_messages(1, 1), "a", fail))
        rest = [dispatcher.send(_messages(1, q), f"b{q}", ok) for q in range(2, 5)]
        results = await asyncio.gather(first, *rest, return_exceptions=True)
        return results, dispatcher

    results, dispatcher = asyncio.run(scenario())
    assert isinstance(results[0], RuntimeError) and results[1:] == ["ok"] * 3
    assert not dispatcher._pending and not dispatcher._inflight


def test_the_config_key_is_a_boolean():
    assert EndpointSpec.from_config("agent", {}).prefix_dispatch is False
    spec = EndpointSpec.from_config(
        "agent", {"base_url": "http://127.0.0.1:1/v1", "model": "m", "prefix_dispatch": True}
    )
    assert spec.prefix_dispatch is True
    with pytest.raises(ConfigError, match=r"models\.agent\.prefix_dispatch: true or false"):
        EndpointSpec.from_config("agent", {"prefix_dispatch": "yes"})


def test_through_the_gateway_the_cached_share_rises_and_the_ledger_matches_the_server(tmp_path):
    """The same requests asked at once, episodes interleaved (as concurrent episodes produce
    them), against a cache with room for about one conversation."""
    requests = [ChatRequest("agent", "answer", _messages(k, q)) for q in range(6) for k in range(4)]

    async def job(url: str, dispatch: bool, cache: str) -> tuple[Gateway, list[str]]:
        models = {
            "agent": {"base_url": url, "model": "m", "concurrency": 4, "prefix_dispatch": dispatch}
        }
        gateway = Gateway.from_config(models, cache_path=cache)
        async with gateway:
            replies = await asyncio.gather(*(gateway.chat(r) for r in requests))
        return gateway, [reply.text for reply in replies]

    shares, texts = {}, {}
    for dispatch in (False, True):
        with OpenAITestServer(prefix_cache_blocks=48, latency=0.005) as server:
            gateway, texts[dispatch] = asyncio.run(
                job(server.base_url, dispatch, str(tmp_path / f"cache{dispatch}"))
            )
            stats = server.stats()
        totals = gateway.ledger.totals()
        assert totals.cached_in == stats.cached_tokens  # the ledger reads what the server said
        assert totals.tokens_in == stats.prompt_tokens
        assert stats.max_inflight <= 4
        shares[dispatch] = stats.cached_tokens / stats.ideal_cached_tokens
    assert texts[True] == texts[False]
    assert shares[True] >= 0.8 > shares[False] + 0.2


def test_the_plan_expects_the_prefix_shared_prompt_tokens_of_a_server(tmp_path):
    """``plan --json``: ``cached_in`` on runs[] and by_role, the prompt tokens an unbounded
    prefix cache would serve: a long-context reader's conversation, asked by every question."""
    import yaml

    from mnemoflow.planning.run import plan_run
    from tests.workflow import REPO, TINY

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    tiny = yaml.safe_load(TINY.read_text())
    config["models"]["embedder"] = {"backend": "offline"}
    config["models"]["agent"] = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    config["run"] = {**tiny["run"], "systems": ["full_context"]}
    config["benchmarks"]["synthetic"] = tiny["benchmarks"]["synthetic"]
    planned = plan_run(config, tmp_path).to_dict()
    agent, judge = planned["by_role"]["agent"], planned["by_role"]["judge"]
    assert 0.3 * agent["tokens_in"] < agent["cached_in"] < agent["tokens_in"]
    assert judge["cached_in"] == 0  # the offline judge has no prompt cache
    runs = [r for r in planned["runs"] if r["role"] == "agent"]
    assert runs and sum(r["cached_in"] for r in runs) == pytest.approx(agent["cached_in"], abs=2)


def test_the_report_sums_provider_cached_tokens_per_run_and_role():
    from mnemoflow.report.summaries import LedgerFile, provider_cache
    from mnemoflow.report.summary import provider_cache_markdown

    def ledger(path, agent, judge):
        entries = {
            "agent/answer": {"tokens_in": agent[0], "cached_in": agent[1]},
            "judge/judge_qa": {"tokens_in": judge[0], "cached_in": judge[1]},
        }
        return LedgerFile(path, {"by_role_task": entries}, path)

    ledgers = [
        ledger("results/syn/full_context/qa/step0/shard0/answers.ledger.json", (100, 80), (0, 0)),
        ledger(
            "results/syn/full_context/qa/step1/shard0/answers.ledger.json", (300, 200), (50, 10)
        ),
        ledger("results/syn/none/qa/step0/shard0/answers.ledger.json", (40, 0), (0, 0)),
    ]
    table = provider_cache(ledgers)
    rows = {
        (r.system, r.role): (r.tokens_in, r.cached_in, r.cached_share) for r in table.itertuples()
    }
    assert rows == {
        ("full_context", "agent"): (400, 280, 0.7),
        ("full_context", "judge"): (50, 10, 0.2),
        ("none", "agent"): (40, 0, 0.0),
    }
    assert "| syn | full_context | qa | agent | 400 | 280 | 70.0% |" in "\n".join(
        provider_cache_markdown(table)
    )
    from mnemoflow.report.html import _provider_cache_html

    page = _provider_cache_html(table)
    assert "<h3>Provider prompt cache</h3>" in page and page.count("<tr>") == 4
    offline = [ledger("results/syn/none/qa/step0/shard0/a.ledger.json", (0, 0), (0, 0))]
    assert provider_cache(offline).empty and provider_cache_markdown(provider_cache(offline)) == []
    assert _provider_cache_html(provider_cache(offline)) == ""


def test_the_feedback_and_interactive_plans_expect_the_prefix_shared_prompt_tokens(tmp_path):
    """``plan --json``'s ``cached_in`` for the feedback family (a dialogue's history re-sent
    every round, the simulated user's instructions) and the interactive family (a native agent's
    growing history, re-sent before every turn and checkpoint question) on a server."""
    import yaml

    from mnemoflow.planning.run import plan_run
    from tests.amemgym_fixtures import TINY_BENCHMARK, write_one_user
    from tests.workflow import REPO, on_policy_feedback

    environment = write_one_user(tmp_path)
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    server = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    config["models"].update(agent=server, user=server, embedder={"backend": "offline"})
    config["run"] = {"benchmarks": ["synthetic_feedback", "amemgym_tiny"], "systems": ["none"]}
    config["benchmarks"]["synthetic_feedback"] = {
        **config["benchmarks"]["synthetic_feedback"],
        "systems": ["bm25_message"],
        **on_policy_feedback(batch_size=4),
    }
    config["benchmarks"]["amemgym_tiny"] = {
        **TINY_BENCHMARK,
        "source": {"path": str(environment)},
        "systems": ["native"],
    }
    planned = plan_run(config, tmp_path).to_dict()

    def runs(benchmark: str, role: str, task: str) -> list[dict]:
        return [
            r
            for r in planned["runs"]
            if (r["benchmark"], r["role"], r["task"]) == (benchmark, role, task)
        ]

    talk = runs("synthetic_feedback", "agent", "answer")
    live = [r for r in talk if "min" in r]  # the on-policy step's dialogues
    assert live and all(0 < r["cached_in"] < r["tokens_in"] for r in live)
    [user] = runs("synthetic_feedback", "user", "user_feedback_json")
    assert 0 < user["cached_in"] < user["tokens_in"]  # the instructions every item shares
    acts = runs("amemgym_tiny", "agent", "interactive_act")
    assert acts and sum(r["cached_in"] for r in acts) > 0.3 * sum(r["tokens_in"] for r in acts)
    for task in ("amemgym_choice", "amemgym_recall"):  # asked after the history, in its job
        [asked] = [r for r in runs("amemgym_tiny", "agent", task) if r["system"] == "native"]
        assert 0.5 * asked["tokens_in"] < asked["cached_in"] < asked["tokens_in"]
    # the upper bound's prompts open with their option's state: nothing shared to serve
    [upper] = [r for r in runs("amemgym_tiny", "agent", "amemgym_choice") if r["system"] == "-"]
    assert upper["tokens_in"] > 0 and upper["cached_in"] == 0
    roles = planned["by_role"]
    agent = [r["cached_in"] for r in planned["runs"] if r["role"] == "agent"]
    assert roles["agent"]["cached_in"] == pytest.approx(sum(agent), abs=len(agent))


def test_the_scoring_plan_expects_the_judges_shared_instructions():
    """MemoryBench scoring played offline: a judge prompt's instructions, sent by every scored
    answer, are prefix-cached after the first; a judge off a server caches nothing."""
    from mnemoflow.eval.static_qa.judges import locomo_request
    from mnemoflow.planning.scoring import per_item

    class Metric:
        @staticmethod
        async def evaluate_item(question: dict, response: str, gateway) -> None:
            await gateway.chat(locomo_request(question, response))

    questions = [
        {"question_id": f"q{i}", "question": f"Where did I go on day {i}?", "answer": "Paris",
         "dataset": "d"}
        for i in range(3)
    ]  # fmt: skip
    backends = {"judge": "openai"}
    [(calls, tokens, cached)] = per_item(Metric, questions, 20, backends)["d"].values()
    assert calls == 1 and 0.3 * tokens < cached < tokens
    [(_, offline_tokens, none)] = per_item(Metric, questions, 20, {"judge": "offline"})[
        "d"
    ].values()
    assert offline_tokens > 0 and none == 0
