"""LangMem (LangChain; PyPI ``langmem`` 0.0.30) on LangGraph's ``InMemoryStore``: ``langmem``.

LangMem's memory store manager (``create_memory_store_manager``) keeps free-text memories in a
LangGraph store. Each call searches the store for the memories most similar to the newest
messages (``query_limit`` of them; with one query, the last message, at the default limit 5),
shows them to the model with the conversation, and lets the model insert new memories (tool
``Memory``) and patch existing ones (trustcall's ``PatchDoc``, JSON patches), all as tool calls in
one reply; deletions (``RemoveDoc``) only with ``enable_deletes``. Search is the store's own
vector search (cosine similarity).

What this adapter does to the product, in-process, and nothing else:

- **every model call goes through the gateway**: LangMem's chat model is a LangChain
  ``BaseChatModel`` bridge to the ``memory_writer`` role (tools and tool choice sent as given,
  tool calls returned), and the store's ``embed`` is a callable of the ``embedder`` role. LangMem
  runs asynchronously (``ainvoke``) on the job's own event loop: no threads.
- **call sites, not prompt text**: the one model call of a manager step is made inside
  ``MemoryManager.ainvoke``; a wrapper around exactly that tags it ``langmem_manage_memories``
  with the structured inputs LangMem built its prompt from (the batch's messages, the existing
  memories it shows by their ids, the tools offered), so the offline backend
  (``mnemoflow/llm/offline/langmem.py``) never reads LangMem's prompt. Further calls in one step
  are trustcall's repairs of tool calls that failed validation (``langmem_repair_tool_call``,
  the same fields; the offline writer's calls always validate, so offline has no handler); a
  call outside a step is an error, never a guess. trustcall's repair step swallows any error
  of the model call; the adapter re-raises it after the step.
- **clock and ids**: LangMem puts a fresh uuid4 into every prompt (``<session_…>``) and names new
  memories by uuid4, and the store (and LangMem's ``default`` memory) stamps items with the wall
  clock. Here uuid4 is a counter per memory (its prompts, and so the cache keys, repeat on a
  rerun) and the clock is the conversation time of the batch being written (epoch 1970 when the
  data has no time).
- **speakers, times and provenance**: each turn is a LangChain message (``user`` as human,
  ``assistant`` as AI) with the speaker as its ``name`` and the content prefixed with its
  conversation time (``[2023-05-08T13:56] …``; LangMem itself has no notion of time). Every item
  the store writes gets ``turn_ids`` (the batch's turns; an updated memory keeps its earlier turns
  too) and ``time`` in its value beside LangMem's ``kind`` / ``content``; the index embeds the
  memory text only (``content.content``; upstream's default embeds the whole JSON value, which
  would make the ids part of the vector).
- **one memory per episode**: every instance has its own store under one namespace;
  ``save`` writes its items and vectors as one gzip'd JSON file and ``load`` rebuilds the store
  from it, so a loaded snapshot answers exactly like the saved one.
"""

from __future__ import annotations

import contextvars
import datetime as _datetime
import functools
import gzip
import json
import uuid as _uuid
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from mnemoflow.memory.base import MemoryItem, Message, WritePattern, register
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.products import require_all
from mnemoflow.memory.products.base import Product, conversation_time, patch_once
from mnemoflow.memory.tokens import count_tokens

VERSION = "0.0.30"
MANAGE = "langmem_manage_memories"
#: trustcall's re-ask after a tool call that failed validation (a real endpoint's; the offline
#: writer's calls always validate, so the offline backend has no handler for it).
REPAIR = "langmem_repair_tool_call"
NAMESPACE = ("memories", "episode")
SNAPSHOT = "langmem_store.json.gz"
#: The store's clock when the data has no time (never the wall clock).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: The memory whose LangMem runs in this task (ids, clock, the pending model call).
_current: contextvars.ContextVar[LangMem | None] = contextvars.ContextVar(
    "mnemoflow_langmem", default=None
)


class _Ids:
    """What ``langmem.knowledge.extraction`` and ``trustcall._base`` see as ``uuid``: uuid4 is
    the running memory's counter; everything else is the standard module."""

    @staticmethod
    def uuid4() -> _uuid.UUID:
        owner = _current.get()
        if owner is None:
            return _uuid.uuid4()  # LangMem used outside the adapter: as upstream
        owner.counter += 1
        return _uuid.UUID(int=owner.counter)

    def __getattr__(self, name: str) -> Any:
        return getattr(_uuid, name)


class _Clock(datetime):
    """What ``langgraph.store.memory`` sees as ``datetime``: ``now`` is the conversation's."""

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        owner = _current.get()
        if owner is None:
            return datetime.now(tz)
        return owner.clock


class _DatetimeModule:
    """What ``langmem.knowledge.extraction`` sees as ``datetime`` (it stamps a default memory
    with ``datetime.datetime.now``): the standard module with the conversation's clock."""

    datetime = _Clock

    def __getattr__(self, name: str) -> Any:
        return getattr(_datetime, name)


def conversation_clock(time: str) -> datetime | None:
    """A conversation time as the store's aware datetime (UTC when the data gives no zone)."""
    moment = conversation_time(time)
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _install(extraction: Any, trustcall_base: Any, store_module: Any) -> None:
    extraction.uuid = _Ids()
    extraction.datetime = _DatetimeModule()
    trustcall_base.uuid = _Ids()
    store_module.datetime = _Clock


def _tool_choice(choice: Any) -> Any:
    """LangChain's tool choice as OpenAI's: ``any`` is ``required``; a name is that function."""
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if choice in ("any", True):
        return "required"
    if isinstance(choice, str):
        return {"type": "function", "function": {"name": choice}}
    return choice


@functools.cache
def _bridge_class() -> type:
    """The ``BaseChatModel`` bridge (built on first use: langchain-core is an optional extra)."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, convert_to_openai_messages
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.utils.function_calling import convert_to_openai_tool

    class GatewayChatModel(BaseChatModel):
        """LangMem's chat model: each call goes to the gateway's ``memory_writer`` role."""

        owner: Any  # a weakref to the LangMem memory (its store must not keep it alive)

        @property
        def _llm_type(self) -> str:
            return "mnemoflow-gateway"

        def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
            formatted = [convert_to_openai_tool(tool) for tool in tools]
            return self.bind(tools=formatted, tool_choice=_tool_choice(tool_choice), **kwargs)

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
            raise RuntimeError("the langmem adapter runs LangMem asynchronously (ainvoke) only")

        async def _agenerate(
            self,
            messages: Any,
            stop: Any = None,
            run_manager: Any = None,
            tools: list[dict[str, Any]] | None = None,
            tool_choice: Any = None,
            **kwargs: Any,
        ) -> Any:
            owner = self.owner()
            if owner is None:
                raise RuntimeError("LangMem called a bridge whose memory system is gone")
            with owner.recording():  # trustcall's repair step catches all
                task, fields = owner.take_call()
                offered = [t.get("function", {}).get("name") for t in tools or ()]
                request = owner.writer_request(
                    task,
                    convert_to_openai_messages(messages),
                    {**fields, "tools": offered},
                    tools=tools,
                    tool_choice=tool_choice,
                )
                reply = owner.counted(await owner.llm.chat(request))
            calls = [
                {"name": c["name"], "args": c["arguments"], "id": c["id"], "type": "tool_call"}
                for c in reply.tool_calls
            ]
            message = AIMessage(content=reply.text, tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=message)])

    return GatewayChatModel


@functools.cache
def _store_class(memory_module: Any) -> type:
    """LangGraph's ``InMemoryStore``, writing each item's turns and time into its value."""

    class ProvenanceStore(memory_module.InMemoryStore):
        def __init__(self, owner: LangMem, **kwargs: Any):
            super().__init__(**kwargs)
            self._owner = weakref.ref(owner)

        async def aput(self, namespace: Any, key: str, value: dict, *args: Any, **kw: Any):
            owner = self._owner()
            earlier = self._data[tuple(namespace)].get(key) if owner else None
            if owner is not None and owner.batch is not None:
                turns = list((earlier.value if earlier else {}).get("turn_ids", []))
                turns += [m.turn_id for m in owner.batch if m.turn_id not in turns]
                value = {**value, "turn_ids": turns, "time": owner.batch_time}
            return await super().aput(namespace, key, value, *args, **kw)

    return ProvenanceStore


@register
class LangMem(Product):
    """LangMem (langmem 0.0.30): a memory store manager on LangGraph's InMemoryStore."""

    name: ClassVar[str] = "langmem"
    product, distribution, version = "LangMem", "langmem", VERSION
    requires = (("langmem", distribution, VERSION),)
    #: REPAIR is a real endpoint's only: the offline writer's tool calls always validate.
    offline, offline_tasks = "mnemoflow.llm.offline.langmem", (MANAGE,)
    defaults, params_schema = declare_params(
        top_k=Param(10, "integer", minimum=1),
        update_batch=Param(2, "integer", minimum=1),
        query_limit=Param(5, "integer", minimum=1),
        enable_deletes=Param(False, "boolean"),
    )
    ingest_params: ClassVar[frozenset[str]] = frozenset(
        {"update_batch", "query_limit", "enable_deletes"}
    )
    ingest_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "embedder")
    #: Its search is the store's vector search: no model call.
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    #: One manage call per batch of ``update_batch`` messages (langmem's prompt, the batch and
    #: the memories it found); 12 texts embedded in 7 batches (the batch's search, the memories
    #: written). Measured on the offline twin's run (docs/plan.md, "Memory products").
    write_pattern: ClassVar[WritePattern] = WritePattern.per_task(
        {MANAGE: (1.0, (433, 1))}, unit="fact", facts_per_batch=12 / 7
    )

    def fresh_state(self) -> None:
        self._store: Any = None
        self._manager: Any = None
        self.counter = 0
        self.clock = EPOCH
        self.batch: list[Message] | None = None
        self.batch_time = ""
        self.pending: tuple[str, dict[str, Any]] | None = None
        self.step_calls = 0  # model calls in the current manager step

    def _modules(self) -> dict[str, Any]:
        require_all(self)
        import langgraph.store.memory as store_module
        import trustcall._base as trustcall_base
        from langmem.knowledge import extraction

        patch_once(self.name, _install, extraction, trustcall_base, store_module)
        return {"extraction": extraction, "store": store_module}

    # ---- opening LangMem --------------------------------------------------------------------

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors = await self.llm.embed([str(t) for t in texts])
        return [[float(x) for x in row] for row in vectors]

    def _new_store(self) -> Any:
        modules = self._modules()
        # InMemoryStore does not read ``dims``; the embedder's dimension is the gateway's.
        index = {"dims": 0, "embed": self._embed, "fields": ["content.content"]}
        return _store_class(modules["store"])(self, index=index)

    def _open(self) -> Any:
        if self._store is None:
            self._store = self._new_store()
        if self._manager is None:
            extraction = self._modules()["extraction"]
            model = _bridge_class()(owner=weakref.ref(self))
            manager = extraction.create_memory_store_manager(
                model,
                namespace=NAMESPACE,
                store=self._store,
                query_limit=self.params["query_limit"],
                enable_deletes=self.params["enable_deletes"],
            )
            inner = manager.memory_manager
            manage = inner.ainvoke

            async def ainvoke(input: dict, config: Any = None, **kwargs: Any) -> Any:
                self.pending, self.step_calls = (MANAGE, self._manage_fields(input)), 0
                try:
                    result = await manage(input, config, **kwargs)
                finally:
                    self.pending = None
                    failure, self.failure = self.failure, None
                if failure is not None:
                    raise failure
                return result

            inner.ainvoke = ainvoke
            self._manager = manager
        return self._manager

    # ---- what the bridge asks ---------------------------------------------------------------

    def take_call(self) -> tuple[str, dict[str, Any]]:
        """The task of LangMem's next model call: the manager step's call, then trustcall's
        repairs of it (tool calls that failed validation), each with the step's fields."""
        if self.pending is None:
            raise self.call_site_unknown()
        task, fields = self.pending
        self.step_calls += 1
        if self.step_calls == 1:
            return task, fields
        return REPAIR, {**fields, "attempt": self.step_calls - 1}

    def _manage_fields(self, input: dict[str, Any]) -> dict[str, Any]:
        """The manager step's structured inputs: the batch's turns and the memories shown."""
        messages = [
            {"n": n, "speaker": m.speaker or m.role, "role": m.role, "time": m.time,
             "content": m.content}
            for n, m in enumerate(self.batch or [], start=1)
        ]  # fmt: skip
        memories = [
            {"id": sid, "text": content.get("content", "") if isinstance(content, dict) else ""}
            for sid, _kind, content in input.get("existing") or []
        ]
        return {"messages": messages, "memories": memories}

    # ---- the plugin contract ----------------------------------------------------------------

    @staticmethod
    def _message(message: Message) -> Any:
        from langchain_core.messages import AIMessage, HumanMessage

        kind = AIMessage if message.role == "assistant" else HumanMessage
        content = f"[{message.time}] {message.content}" if message.time else message.content
        return kind(content=content, name=message.speaker or message.role)

    def _batches(self, messages: list[Message]) -> list[list[Message]]:
        size = self.params["update_batch"]
        out: list[list[Message]] = []
        for message in messages:
            if out and len(out[-1]) < size and out[-1][-1].session_id == message.session_id:
                out[-1].append(message)
            else:
                out.append([message])
        return out

    async def _write(self, messages: list[Message]) -> None:
        token = _current.set(self)
        try:
            manager = self._open()
            for batch in self._batches(messages):
                self.batch = batch
                self.batch_time = max(m.time for m in batch)
                self.clock = conversation_clock(self.batch_time) or self.clock
                self.tokens_written += sum(count_tokens(m.content) for m in batch)
                try:
                    await manager.ainvoke({"messages": [self._message(m) for m in batch]})
                finally:
                    self.batch = None
        finally:
            _current.reset(token)

    async def _search(self, query: str, k: int) -> list[MemoryItem]:
        if self._store is None or not self._store._data.get(NAMESPACE):
            return []
        found = await self._store.asearch(NAMESPACE, query=query, limit=k)
        return [_item(entry) for entry in found]

    def save(self, directory: Path) -> None:
        store = self._store
        items = store._data.get(NAMESPACE, {}) if store is not None else {}
        vectors = store._vectors.get(NAMESPACE, {}) if store is not None else {}
        state = {
            "version": VERSION,
            "counter": self.counter,
            "clock": self.clock.isoformat(),
            "writer_calls": self.writer_calls,
            "parse_failures": self.parse_failures,
            "tokens_written": self.tokens_written,
            "items": [
                {
                    "key": key,
                    "value": item.value,
                    "created_at": item.created_at.isoformat(),
                    "updated_at": item.updated_at.isoformat(),
                    "vectors": vectors.get(key, {}),
                }
                for key, item in items.items()
            ],
        }
        with gzip.open(Path(directory) / SNAPSHOT, "wt", encoding="utf-8") as out:
            json.dump(state, out, sort_keys=True)

    def load(self, directory: Path) -> None:
        path = Path(directory) / SNAPSHOT
        with gzip.open(path, "rt", encoding="utf-8") as source:
            state = json.load(source)
        self.check_version(state, path)
        from langgraph.store.base import Item

        self.counter, self.clock = state["counter"], datetime.fromisoformat(state["clock"])
        self.writer_calls, self.tokens_written = state["writer_calls"], state["tokens_written"]
        self.parse_failures = state["parse_failures"]
        self._manager = None
        self._store = self._new_store()
        for entry in state["items"]:
            self._store._data[NAMESPACE][entry["key"]] = Item(
                value=entry["value"],
                key=entry["key"],
                namespace=NAMESPACE,
                created_at=datetime.fromisoformat(entry["created_at"]),
                updated_at=datetime.fromisoformat(entry["updated_at"]),
            )
            if entry["vectors"]:
                self._store._vectors[NAMESPACE][entry["key"]] = entry["vectors"]

    def _items(self) -> list[Any]:
        return list(self._store._data.get(NAMESPACE, {}).values()) if self._store else []

    def stats(self) -> dict[str, Any]:
        return {"items": len(self._items()), **self.writes()}

    def stored_ids(self) -> set[str]:
        return {t for item in self._items() for t in item.value.get("turn_ids", [])}


def _item(found: Any) -> MemoryItem:
    """A store search result as an item: the memory text, its similarity, turns and time."""
    value = found.value
    content = value.get("content")
    text = content.get("content", "") if isinstance(content, dict) else str(content)
    score = round(float(found.score), 6) if found.score is not None else 0.0
    return MemoryItem(
        found.key, text, score, list(value.get("turn_ids", [])), value.get("time", "")
    )
