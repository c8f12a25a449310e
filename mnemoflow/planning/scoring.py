"""MemoryBench's scoring calls before a run: each dataset's metric played with the offline model.

How many judge / critic calls a family makes per answer, and on which role and task, is the
family's own code (``eval.memorybench.memorybench_families``; under ``scoring: judge`` the judge
protocol): the plan asks it by running ``evaluate_item`` on a few items of each dataset with the
offline backend in every role, a stand-in response of the agent's expected reply length, and counts
the requests it sends (their prompts as the bound endpoint counts them). The mean per item stands
for every answer of the dataset (expected: a real judge's unparseable replies are re-asked).
Of each request's prompt tokens, those a server's prefix cache is expected to serve are the share
the other sampled items' prompts already sent (the instructions every item's prompt opens with):
an answer scored after others.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.prefix_dispatch import prompt_chain
from mnemoflow.llm.types import ROLES, ChatRequest
from mnemoflow.planning.tokens import cached_tokens, filler, sent_tokens

#: Items per dataset whose scoring is played; the others take their mean.
SAMPLE = 3


class _Recorder:
    """A gateway that records every chat request (with the item it scores) before the offline
    model answers it."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.item = 0
        self.requests: list[tuple[int, ChatRequest]] = []

    async def chat(self, request: ChatRequest, **options: Any) -> Any:
        self.requests.append((self.item, request))
        return await self.gateway.chat(request, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gateway, name)


def per_item(
    metrics: Any, questions: list[dict[str, Any]], reply_tokens: float, backends: Mapping[str, str]
) -> dict[str, dict[tuple[str, str], list[float]]]:
    """dataset -> (role, task) -> [calls, prompt tokens, of them prefix-cached] per scored
    answer, played on up to :data:`SAMPLE` of its ``questions``; ``backends``: each role's bound
    backend."""
    by_dataset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for question in questions:
        by_dataset[str(question.get("dataset", ""))].append(question)
    gateway = Gateway.from_config({role: {"backend": "offline"} for role in ROLES})
    out: dict[str, dict[tuple[str, str], list[float]]] = {}
    try:
        for dataset, items in sorted(by_dataset.items()):
            sample = items[:SAMPLE]
            recorder = _Recorder(gateway)
            asyncio.run(_play(metrics, sample, filler(reply_tokens, "offline"), recorder))
            counts: dict[tuple[str, str], list[float]] = {}
            sent = _sent_before(recorder.requests)
            for item, request in recorder.requests:
                backend = backends[request.role]
                entry = counts.setdefault((request.role, request.task), [0.0, 0.0, 0.0])
                tokens = sent_tokens(request.messages, backend)
                entry[0] += 1 / len(sample)
                entry[1] += tokens / len(sample)
                cached = cached_tokens(request.messages, tokens, backend, sent[item])
                entry[2] += cached / len(sample)
            out[dataset] = counts
    finally:
        gateway.close()
    return out


def _sent_before(requests: list[tuple[int, ChatRequest]]) -> dict[int, set[str]]:
    """item -> the prompt blocks the other items' requests sent (its own add to it in order)."""
    chains: dict[int, set[str]] = defaultdict(set)
    for item, request in requests:
        chains[item].update(prompt_chain(request.messages))
    return {
        item: {block for other, chain in chains.items() if other != item for block in chain}
        for item in chains
    }


async def _play(metrics: Any, sample: list[dict[str, Any]], response: str, gateway: Any) -> None:
    for index, question in enumerate(sample):
        gateway.item = index
        await metrics.evaluate_item(question, response, gateway)
