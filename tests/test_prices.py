"""Prices: the shipped table, the user's entries over it, the dollar math, and the ledger's
``usd`` for a call to a priced model through the test server (issue 20, item 2)."""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.config_schema import check_config, check_moved
from mnemoflow.errors import ConfigError
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.ledger import Ledger
from mnemoflow.llm.types import ChatRequest
from mnemoflow.prices import TABLE, context_window, lookup, price_table, shipped, usd
from mnemoflow.testing.openai_server import OpenAITestServer

SCHEMA = TABLE.parents[1] / "schemas" / "config.schema.yaml"


def test_the_shipped_table_loads_and_every_entry_says_where_and_when():
    table = shipped()
    assert {"gpt-4o", "gpt-4o-mini", "gpt-4.1-mini", "deepseek-chat"} <= set(table)
    for model, entry in table.items():
        assert entry["input"] >= 0 and entry["output"] >= 0, model
        assert entry["date"] and entry["source"], model
        assert entry.get("context_window", 1) > 0, model
    assert table["gpt-4o-mini"]["input"] == 0.15 and table["gpt-4o-mini"]["output"] == 0.60
    assert context_window("gpt-4.1-mini") == 1047576


def test_the_users_entry_wins_key_by_key_and_adds_models():
    table = price_table({"gpt-4o": {"input": 3.0}, "my-model": {"input": 1, "output": 2}})
    assert table["gpt-4o"] == {
        "input": 3.0,
        "cached_input": 1.25,
        "output": 10.0,
        "batch_input": 1.25,  # OpenAI's Batch API: half the synchronous price
        "batch_output": 5.0,
    }
    assert table["my-model"] == {"input": 1.0, "output": 2.0}
    assert price_table()["gpt-4o"]["input"] == 2.50  # the shipped table itself is unchanged


def test_usd_worked_example():
    table = {"m": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
    # 800k fresh prompt tokens x $2 + 200k cached x $0.5 + 500k completion x $8 = $5.70
    assert usd("m", 1_000_000, 200_000, 500_000, table) == pytest.approx(5.70)
    # no cached_input price: cached prompt tokens cost the input price
    assert usd("n", 1_000_000, 200_000, 0, {"n": {"input": 2.0, "output": 8.0}}) == 2.0
    assert usd("unknown-model", 10, 0, 10, table) is None  # no price, no guess
    # a dated snapshot is priced under its base name unless it has its own entry
    assert usd("gpt-4o-2024-08-06", 1_000_000, 0, 0) == 2.50
    assert usd("gpt-4o-2024-05-13", 1_000_000, 0, 0) == 5.00
    assert lookup("claude-sonnet-4-20250514", shipped())["input"] == 3.0
    assert lookup("claude-3-5-haiku-latest", shipped())["output"] == 4.0
    assert lookup("gpt-4o-mini-tts", shipped()) is None  # another model, not a snapshot


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"new-model": {"input": 1.0}}, "config prices.new-model.output: required"),
        ({"gpt-4o": {"input": -1}}, "config prices.gpt-4o.input: a number >= 0"),
        ({"gpt-4o": {"inptu": 1}}, "config prices.gpt-4o: unknown keys ['inptu']"),
        (
            {"gpt-4o": 3},
            "config prices.gpt-4o: a mapping of ['input', 'cached_input', 'output', 'batch_input'",
        ),
    ],
)
def test_bad_price_entries_fail_in_one_line_naming_the_key(entry, message):
    with pytest.raises(ConfigError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        price_table(entry)


def test_the_old_report_prices_key_names_the_new_one():
    config = {"report": {"prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}}}
    with pytest.raises(ConfigError) as caught:
        check_moved(config)
    message = str(caught.value)
    assert message.startswith("config report.prices: moved to the top-level key prices")
    assert "\n" not in message


def test_the_config_schema_takes_top_level_prices_and_checks_them():
    base = {"run": {"benchmarks": ["b"], "systems": ["s"]}, "models": {}, "benchmarks": {},
            "systems": {}}  # fmt: skip
    check_config({**base, "prices": {"gpt-4o": {"input": 3.0}}}, SCHEMA)
    with pytest.raises(ConfigError, match=r"^config prices.x.output: required"):
        check_config({**base, "prices": {"x": {"input": 3.0}}}, SCHEMA)


def test_ledger_usd_sums_and_turns_unknown_on_a_model_without_price():
    ledger = Ledger({"m": {"input": 1.0, "output": 2.0}})
    common = {"cache_hit": False, "latency_s": 0.0, "model": "m"}
    ledger.record("agent", "answer", tokens_in=1_000_000, tokens_out=0, priced_as="m", **common)
    ledger.record("agent", "answer", tokens_in=0, tokens_out=500_000, priced_as="m", **common)
    assert ledger.entries["agent/answer"].usd == 2.0
    hit = {**common, "cache_hit": True}
    ledger.record("judge", "judge", tokens_in=9, tokens_out=9, priced_as="other", **hit)
    assert ledger.entries["judge/judge"].usd == 0.0  # a response-cache hit costs nothing
    ledger.record("user", "reply", tokens_in=5, tokens_out=5, priced_as=None, **common)
    assert ledger.entries["user/reply"].usd == 0.0  # a local backend costs nothing
    assert ledger.totals().usd == 2.0
    ledger.record("judge", "judge", tokens_in=9, tokens_out=9, priced_as="other", **common)
    assert ledger.entries["judge/judge"].usd is None and ledger.totals().usd is None


def test_a_call_to_a_priced_model_records_usd_and_provider_cached_tokens(tmp_path):
    """The test server serves model ``gpt-4o-mini`` and reports cached prompt tokens for a
    repeated prefix; the ledger prices both calls at the shipped table's rates."""
    history = [{"role": "system", "content": "You remember everything. " * 40}]
    first = [*history, {"role": "user", "content": "first question"}]
    second = [*history, {"role": "user", "content": "second question"}]
    with OpenAITestServer(model="gpt-4o-mini", prompt_cache=True) as server:
        binding = {"base_url": server.base_url, "model": "gpt-4o-mini", "max_tokens": 16}
        gateway = Gateway.from_config({"agent": binding}, tmp_path / "cache")

        async def main():
            async with gateway:
                for messages in (first, second, first):  # the third is a response-cache hit
                    await gateway.chat(ChatRequest("agent", "answer", messages))

        asyncio.run(main())
    entry = gateway.ledger.entries["agent/answer"]
    assert entry.calls == 3 and entry.cache_hits == 1
    assert 0 < entry.cached_in < entry.tokens_in  # the second call's system prompt
    expected = usd("gpt-4o-mini", entry.tokens_in, entry.cached_in, entry.tokens_out)
    fresh = (entry.tokens_in - entry.cached_in) * 0.15 + entry.cached_in * 0.075
    assert (
        entry.usd
        == pytest.approx(expected)
        == pytest.approx((fresh + entry.tokens_out * 0.60) / 1e6)
    )
    written = json.loads(gateway.ledger.to_json())
    assert written["by_role_task"]["agent/answer"]["usd"] == pytest.approx(entry.usd)
    assert written["totals"]["usd"] == pytest.approx(entry.usd)


def test_user_prices_reach_the_ledger_and_embeddings_are_priced(tmp_path):
    with OpenAITestServer(model="my-embedder") as server:
        binding = {"base_url": server.base_url, "model": "my-embedder"}
        prices = {"my-embedder": {"input": 1e6, "output": 0}}
        gateway = Gateway.from_config({"embedder": binding}, tmp_path / "cache", prices=prices)

        async def main():
            async with gateway:
                await gateway.embed(["one text", "another text"])
                await gateway.embed(["one text"])  # cached: no tokens, no dollars

        asyncio.run(main())
    entry = gateway.ledger.entries["embedder/embed"]
    assert entry.calls == 3 and entry.cache_hits == 1
    assert entry.tokens_in > 0 and entry.usd == pytest.approx(entry.tokens_in)  # $1 a token


def test_the_offline_backends_model_is_free():
    from mnemoflow.llm.types import OFFLINE_MODEL
    from mnemoflow.prices import FREE_MODELS

    assert OFFLINE_MODEL in FREE_MODELS
