"""A backend that answers from a script, plugged into a real Gateway (re-asks, ledger, cache)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import ChatRequest, Completion, EndpointSpec


class ScriptedBackend:
    """``script(request, call_number) -> reply text``; records every request it answers."""

    def __init__(self, script: Callable[[ChatRequest, int], str]):
        self.script = script
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest, spec: EndpointSpec) -> Completion:
        self.requests.append(request)
        return Completion(text=self.script(request, len(self.requests) - 1), model="scripted")

    async def embed(self, texts, spec):  # pragma: no cover - judges do not embed
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def replies(*texts: str) -> Callable[[ChatRequest, int], str]:
    """Replies in turn (the last one repeats)."""
    return lambda request, n: texts[min(n, len(texts) - 1)]


def scripted_gateway(script, roles=("judge", "critic")) -> tuple[Gateway, ScriptedBackend]:
    gateway = Gateway.from_config({})
    backend = ScriptedBackend(script)
    for role in roles:
        gateway._backends[role] = backend
    return gateway, backend


def run(coroutine):
    return asyncio.run(coroutine)
