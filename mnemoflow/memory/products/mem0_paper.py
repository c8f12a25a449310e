"""Mem0 as the papers ran it (mem0ai 1.0.11): ``mem0_paper``, and ``mem0_graph`` (Mem0-G, with
its embedded Kuzu graph). Extra ``products``: mem0ai==1.0.11, kuzu==0.11.3, rank-bm25==0.2.2.

mem0 1.0.11 is the pipeline of the Mem0 paper: each ``add`` extracts facts from the messages with
one LLM call, looks up the 5 most similar stored memories of every fact, and lets a second call
decide ADD / UPDATE / DELETE / NONE. Mem0-G also extracts entities and relations into a graph
(tool calls) and asks which stored relations the new text contradicts; its ``search`` makes one
LLM call (the query's entities) and returns relations beside the memories.

What this adapter does to the product, in-process, and nothing else:

- **every model call goes through the gateway**: mem0's LLM and embedder objects (and the
  graph's) are replaced by bridges, so the cache, ledger, endpoint limits, retries, parse
  re-asks and the offline / MiniLM embedders apply. mem0 is synchronous; it runs in a worker
  thread and the bridges hop back to the job's event loop.
- **call sites, not prompt text**: mem0 builds its two JSON prompts with
  ``get_fact_retrieval_messages`` / ``get_update_memory_messages`` and its graph prompts in
  three ``MemoryGraph`` methods; wrappers around exactly these record which call comes next
  and the structured inputs it was built from (the batch's messages, the memories shown, the
  facts, the entities, the stored relations). The bridge sends mem0's own messages and tools to
  a real endpoint, and tags the request (``mem0_extract_facts``, ``mem0_update_memory``,
  ``mem0_graph_entities``, ``mem0_graph_relations``, ``mem0_graph_deletions``) with those
  fields for the offline backend (``mnemoflow/llm/offline/mem0.py``). A call from any other site
  is an error, never a guess.
- **the clock is the conversation's**: mem0's extraction prompt says "Today's date is <the day
  the process imported mem0>", a cache miss every day and wrong relative dates for a
  conversation dated years ago. The bridge puts the batch's conversation date there (``unknown``
  when the data has no time), and the memories' ``created_at`` is the conversation time.
- **speakers and provenance**: each message is sent as ``"<speaker>: <content>"`` (mem0 itself
  keeps only the role), with ``metadata={"turn_ids", "time"}``, which mem0 stores with every
  memory it writes from the batch and returns on search: an item's ``source_ids`` are those
  turns (an UPDATE keeps the earlier statement's turns too). mem0 attributes a fact to the whole
  batch (``update_batch`` messages, a message pair by default, as in the paper), not to one
  message. Graph relations carry no turns: they are returned after the memories, unscored
  (score 0), and recall counts the memories.
- **roles**: mem0's user-memory prompt extracts facts *from the user's messages only*. LoCoMo
  has two human speakers (the second stored with role ``assistant``): ``speaker_roles:
  all_user`` sends every speaker's turns as user messages, which is what mem0's own LoCoMo
  evaluation does by giving each speaker a memory of their own.
- **one memory per episode**: every instance has a private folder (Qdrant local store, SQLite
  history, Kuzu database); ``save`` checkpoints the graph and writes the folder as one gzip'd
  tar with the adapter's id map, and ``load`` unpacks it into a fresh private folder, so a loaded
  snapshot answers exactly like the saved one. mem0's memory ids are random uuids: items are
  named ``m<n>`` in the order they were added, so results do not change between reruns.

mem0's search has no threshold here (every memory is ranked, for recall@k) and no reranker.
"""

from __future__ import annotations

import os
import re
import tarfile
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from mnemoflow.llm.types import UnparseableReply, reply_json
from mnemoflow.memory.base import MemoryItem, Message, WritePattern, register
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.products import require_all
from mnemoflow.memory.products.base import Bridge, ThreadProduct, patch_once
from mnemoflow.memory.tokens import count_tokens

VERSION = "1.0.11"
#: Tags of mem0's model calls (the offline backend answers each).
EXTRACT, UPDATE = "mem0_extract_facts", "mem0_update_memory"
ENTITIES, RELATIONS, DELETIONS = (
    "mem0_graph_entities",
    "mem0_graph_relations",
    "mem0_graph_deletions",
)
#: The only user id of an episode's memory (each episode has a store of its own).
EPISODE = "episode"
SNAPSHOT = "mem0.tar.gz"
STATE = "mem0_state.json"
#: mem0 1.0.11's date line in its fact-extraction prompts.
DATE_LINE = re.compile(r"Today's date is \d{4}-\d{2}-\d{2}\.")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")

#: The next model call of the current thread: (task, fields), set by a call-site wrapper.
_pending = threading.local()


def _expect(task: str, fields: dict[str, Any]) -> None:
    _pending.call = (task, fields)


def _take() -> tuple[str, dict[str, Any]]:
    call = getattr(_pending, "call", None)
    _pending.call = None
    if call is None:
        raise RuntimeError(
            "mem0 made a model call from a call site the mnemoflow bridge does not know "
            f"(mem0ai {VERSION} expected); refusing to guess its task"
        )
    return call


def _install_call_sites(main: Any) -> None:
    """Wrap the two prompt builders of ``mem0.memory.main`` (once per process) so that the
    bridge knows which call follows and from which inputs."""
    build_facts = main.get_fact_retrieval_messages
    build_update = main.get_update_memory_messages

    def get_fact_retrieval_messages(message, is_agent_memory=False):
        _expect(EXTRACT, {"agent_memory": bool(is_agent_memory)})
        return build_facts(message, is_agent_memory)

    def get_update_memory_messages(retrieved_old_memory, new_facts, custom_prompt=None):
        shown = [{"id": str(m["id"]), "text": m["text"]} for m in retrieved_old_memory]
        _expect(UPDATE, {"memories": shown, "facts": [str(f) for f in new_facts]})
        return build_update(retrieved_old_memory, new_facts, custom_prompt)

    main.get_fact_retrieval_messages = get_fact_retrieval_messages
    main.get_update_memory_messages = get_update_memory_messages


def _json_object(key: str) -> Callable[[str], str]:
    """A parser: the reply is a JSON object with ``key`` holding a list (mem0 strips code
    fences and reads the first object itself; the gateway re-asks a reply it could not use)."""

    def parse(text: str) -> str:
        body = re.sub(r"^```[a-zA-Z0-9]*\n|\n```$", "", text.strip())
        start, end = body.find("{"), body.rfind("}")
        value = reply_json(body[start : end + 1] if start >= 0 else body, strict=False)
        if not isinstance(value, dict) or not isinstance(value.get(key), list):
            raise UnparseableReply(f'not a JSON object with a list under "{key}"')
        return text

    return parse


def _any_reply(text: str) -> str:
    """A tools request answered without a call (mem0: nothing to delete) may say anything."""
    return text


def _score(value: float) -> float:
    """A similarity to 1e-6, the precision of Qdrant's float32 vectors: Qdrant normalizes a
    vector again when a saved store is reopened, which moves a score in its 8th digit, and a
    loaded snapshot must rank and score exactly like the one saved."""
    return round(float(value), 6)


def conversation_date(time: str) -> str:
    """The day of a conversation time for mem0's prompt: ISO ``YYYY-MM-DD`` when the data's
    time is ISO, else the data's own string, else ``unknown`` (never the wall clock)."""
    time = time.strip()
    if ISO_DATE.match(time):
        return time[:10]
    return time or "unknown"


class _Bridge(Bridge):
    """What mem0 calls as its ``llm`` and ``embedding_model``: the gateway, on the job's loop."""

    def __init__(self, owner: Mem0Paper, dims: int):
        super().__init__(owner)
        self.config = _EmbedderConfig(dims)

    def generate_response(
        self, messages, response_format=None, tools=None, tool_choice="auto", **_
    ) -> Any:
        task, fields = _take()
        owner = self.owner
        messages = [dict(m) for m in messages]
        if task == EXTRACT:
            fields = {**fields, "messages": owner.batch_fields}
            found = DATE_LINE.findall(messages[0]["content"])
            if len(found) != 1:
                raise RuntimeError(
                    f"mem0 {VERSION}'s fact-extraction prompt has {len(found)} date lines, "
                    "expected 1: cannot pin it to the conversation's date"
                )
            date = f"Today's date is {owner.batch_date}."
            messages[0]["content"] = DATE_LINE.sub(date, messages[0]["content"])
        elif task in (ENTITIES, RELATIONS, DELETIONS):
            fields = {**fields, "messages": owner.batch_fields if fields.pop("adding") else []}
        request = owner.writer_request(
            task,
            messages,
            fields,
            response_format=response_format,
            tools=tools,
            tool_choice=tool_choice if tools else None,
        )
        if tools:
            parse = _any_reply
        else:
            parse = _json_object("facts" if task == EXTRACT else "memory")
        reply = owner.counted(owner.call(owner.llm.chat(request, parse=parse)))
        if tools:
            calls = [{"name": c["name"], "arguments": c["arguments"]} for c in reply.tool_calls]
            return {"content": reply.text, "tool_calls": calls}
        return reply.text

    def embed(self, text, memory_action=None) -> list[float]:
        vectors = self.owner.call(self.owner.llm.embed([str(text)]))
        return [float(x) for x in vectors[0]]


class _EmbedderConfig:
    def __init__(self, dims: int):
        self.embedding_dims = dims


@register
class Mem0Paper(ThreadProduct):
    """Mem0 (mem0ai 1.0.11, the paper's pipeline): LLM-extracted facts, ADD / UPDATE / DELETE."""

    name: ClassVar[str] = "mem0_paper"
    product, distribution, version = "mem0", "mem0ai", VERSION
    requires = (("mem0", distribution, VERSION),)
    offline, offline_tasks = "mnemoflow.llm.offline.mem0", (EXTRACT, UPDATE)
    snapshot, state_file, folder_prefix = SNAPSHOT, STATE, "mnemoflow-mem0-"
    state_keys = ("dims", "ids", "next_id", "writer_calls", "parse_failures", "tokens_written",
                  "events", "relations_added")  # fmt: skip
    thread_name = "mem0"
    graph: ClassVar[bool] = False
    defaults, params_schema = declare_params(
        update_batch=Param(2, "integer", minimum=1),
        top_k=Param(10, "integer", minimum=1),
        speaker_roles=Param("as_given", enum=["as_given", "all_user"]),
    )
    ingest_params: ClassVar[frozenset[str]] = frozenset({"update_batch", "speaker_roles"})
    ingest_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "embedder")
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    #: Per batch of ``update_batch`` messages: one extraction, an update only when it found facts
    #: (5 of 7 batches), one embedded text per fact (6 in 7 batches); prompts: mem0's own
    #: instructions and the batch. Measured on the offline twin's run (docs/plan.md, "Memory
    #: products").
    write_pattern: ClassVar[WritePattern] = WritePattern.per_task(
        {EXTRACT: (1.0, (836, 1)), UPDATE: (5 / 7, (1094, 0))}, unit="fact", facts_per_batch=6 / 7
    )

    def fresh_state(self) -> None:
        self.batch_fields: list[dict[str, Any]] = []
        self.batch_date = "unknown"
        #: mem0 id -> [our id "m<n>", source turn ids]
        self.ids: dict[str, list[Any]] = {}
        self.next_id = 0
        self.dims: int | None = None
        self.events = {"ADD": 0, "UPDATE": 0, "DELETE": 0}
        self.relations_added = 0  # Mem0-G's

    # ---- opening mem0 ----------------------------------------------------------------------

    def _modules(self) -> Any:
        os.environ.setdefault("MEM0_TELEMETRY", "False")  # read once, at mem0's import
        require_all(self)
        import mem0.memory.main as main

        patch_once("mem0", _install_call_sites, main)
        return main

    def _config(self, folder: Path) -> dict[str, Any]:
        unused = {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}
        config: dict[str, Any] = {
            # Placeholders: the bridges replace both objects before mem0 makes any call.
            "llm": {"provider": "openai", "config": {**unused, "model": "bridged"}},
            "embedder": {
                "provider": "openai",
                "config": {**unused, "model": "bridged", "embedding_dims": self.dims},
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "mem0",
                    "path": str(folder / "qdrant"),
                    "on_disk": True,
                    "embedding_model_dims": self.dims,
                },
            },
            "history_db_path": str(folder / "history.db"),
        }
        if self.graph:
            config["graph_store"] = {"provider": "kuzu", "config": {"db": str(folder / "graph")}}
        return config

    async def _open(self) -> Any:
        if self._memory is None and self.dims is None:  # the embedder's dimension, asked once
            self.dims = int((await self.llm.embed(["dimension"])).shape[1])  # (a cached call)
        return await super()._open()

    def _construct(self, folder: Path) -> Any:
        memory = self._modules().Memory.from_config(self._config(folder))
        bridge = _Bridge(self, self.dims)
        memory.llm = memory.embedding_model = bridge
        if memory.graph is not None:
            memory.graph.llm = memory.graph.embedding_model = bridge
            _wrap_graph(memory.graph)
        return memory

    def _finalize(self) -> weakref.finalize:
        # Close the store with this instance, or at exit while Python can still do it.
        return weakref.finalize(self, _shut, self._memory, self._executor)

    # ---- the plugin contract -----------------------------------------------------------------

    def _role(self, message: Message) -> str:
        if self.params["speaker_roles"] == "all_user":
            return "user"
        return message.role if message.role in ("user", "assistant", "system") else "user"

    async def _write(self, messages: list[Message]) -> None:
        size = self.params["update_batch"]
        memory = await self._open()
        for start in range(0, len(messages), size):
            await self._write_batch(memory, messages[start : start + size])

    async def _write_batch(self, memory: Any, batch: list[Message]) -> None:
        self.batch_fields = [
            {
                "n": n,
                "speaker": m.speaker or m.role,
                "role": self._role(m),
                "time": m.time,
                "content": m.content,
            }
            for n, m in enumerate(batch, start=1)
        ]
        time = max((m.time for m in batch), default="")
        self.batch_date = conversation_date(time)
        sent = [
            {"role": r["role"], "content": f"{r['speaker']}: {r['content']}"}
            for r in self.batch_fields
        ]
        turn_ids = [m.turn_id for m in batch]
        metadata: dict[str, Any] = {"turn_ids": turn_ids, "time": time}
        if time:
            metadata["created_at"] = time
        result = await self._in_thread(memory.add, sent, user_id=EPISODE, metadata=metadata)
        for event in result.get("results", []):
            kind, mem_id = event.get("event"), event.get("id")
            if kind not in self.events or not mem_id:
                continue
            self.events[kind] += 1
            if kind == "DELETE":
                self.ids.pop(mem_id, None)
                continue
            self.tokens_written += count_tokens(event.get("memory") or "")
            if kind == "ADD" or mem_id not in self.ids:
                self.ids[mem_id] = [f"m{self.next_id}", turn_ids]
                self.next_id += 1
            else:  # UPDATE: the newer statement's turns first, the earlier one's kept
                self.ids[mem_id][1] = list(dict.fromkeys(turn_ids + self.ids[mem_id][1]))
        if self.graph:
            self.relations_added += sum(
                len(r) for r in result.get("relations", {}).get("added_entities", [])
            )

    async def _search(self, query: str, k: int) -> list[MemoryItem]:
        if not self.ids and not self.graph:
            return []
        memory = await self._open()
        # Every memory is ranked, then cut to k here: Qdrant breaks ties (a hashed embedding
        # scores unrelated memories exactly 0) by its storage order, which a reopened store
        # does not keep; ties go to the older memory instead.
        limit = max(k, len(self.ids))
        found = await self._in_thread(
            memory.search, query, user_id=EPISODE, limit=limit, threshold=None, rerank=False
        )
        items = []
        for hit in found.get("results", []):
            known = self.ids.get(hit["id"])
            if known is None:  # not written by this adapter: never happens in an own folder
                continue
            meta = hit.get("metadata") or {}
            sources = list(dict.fromkeys(list(meta.get("turn_ids", [])) + known[1]))
            items.append(
                MemoryItem(
                    known[0], hit["memory"], _score(hit["score"]), sources, meta.get("time", "")
                )
            )
        items.sort(key=lambda item: (-item.score, int(item.id[1:])))
        items = items[:k]
        for n, rel in enumerate((found.get("relations") or [])[:k]):
            text = f"{rel['source']} -- {rel['relationship']} -- {rel['destination']}"
            items.append(MemoryItem(f"relation{n}", text, 0.0, [], ""))
        return items

    def _checkpoint(self) -> None:
        if self._memory is not None and self._memory.graph is not None:
            self._memory.graph.kuzu_execute("CHECKPOINT;")

    @staticmethod
    def _archived(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        """Qdrant's lock file belongs to the process that has the store open, not to a
        snapshot."""
        return None if Path(info.name).name == ".lock" else info

    def stats(self) -> dict[str, Any]:
        out = {
            "items": len(self.ids),
            **self.writes(),
            **{f"events_{k.lower()}": v for k, v in self.events.items()},
        }
        if self.graph:
            out["relations_added"] = self.relations_added
        return out

    def stored_ids(self) -> set[str]:
        return {turn for _, turns in self.ids.values() for turn in turns}


def _shut(memory: Any, executor: ThreadPoolExecutor | None) -> None:
    """Close a mem0 store: Qdrant's local client (its file lock), the history database, and
    the thread it ran in."""
    client = getattr(memory.vector_store, "client", None)
    if client is not None:
        client.close()
    memory.close()
    if executor is not None:
        executor.shutdown(wait=False)


@register
class Mem0Graph(Mem0Paper):
    """Mem0-G (mem0ai 1.0.11 with its Kuzu graph): Mem0's facts plus entity relations."""

    name: ClassVar[str] = "mem0_graph"
    graph: ClassVar[bool] = True
    requires = (
        *Mem0Paper.requires,
        ("kuzu", "kuzu", "0.11.3"),
        ("rank_bm25", "rank-bm25", "0.2.2"),
    )
    #: Its search asks the model for the query's entities.
    query_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "embedder")
    offline_tasks = (EXTRACT, UPDATE, ENTITIES, RELATIONS, DELETIONS)
    #: Mem0's writes, and per batch the graph's: its entities, their relations and the stored
    #: relations to delete, one call each; 38 texts embedded in 7 batches (facts and entities).
    #: A search asks for the query's entities and embeds them with the query (2 texts).
    write_pattern: ClassVar[WritePattern] = WritePattern.per_task(
        {
            EXTRACT: (1.0, (836, 1)),
            UPDATE: (5 / 7, (1094, 0)),
            ENTITIES: (1.0, (70, 1)),
            RELATIONS: (1.0, (214, 1)),
            DELETIONS: (1.0, (450, 1)),
        },
        unit="fact",
        facts_per_batch=38 / 7,
        query_tasks=(ENTITIES,),
        query_prompt_tokens=(71,),
        texts_per_query=2.0,
    )


def _wrap_graph(graph: Any) -> None:
    """Wrap the three ``MemoryGraph`` methods that call the model, on this instance only, so
    the bridge knows the task and its structured inputs."""
    nodes, relate, deletions = (
        graph._retrieve_nodes_from_data,
        graph._establish_nodes_relations_from_data,
        graph._get_delete_entities_from_search_output,
    )

    def _retrieve_nodes_from_data(data, filters):
        # mem0's graph add passes the batch's text; its search passes the query.
        adding = getattr(_pending, "graph_adding", False)
        _expect(ENTITIES, {"text": data, "self": filters["user_id"], "adding": adding})
        return nodes(data, filters)

    def _establish_nodes_relations_from_data(data, filters, entity_type_map):
        fields = {"text": data, "self": filters["user_id"], "entities": list(entity_type_map)}
        _expect(RELATIONS, {**fields, "adding": True})
        return relate(data, filters, entity_type_map)

    def _get_delete_entities_from_search_output(search_output, data, filters):
        existing = [
            {k: r[k] for k in ("source", "relationship", "destination")} for r in search_output
        ]
        fields = {"text": data, "self": filters["user_id"], "existing": existing}
        _expect(DELETIONS, {**fields, "adding": True})
        return deletions(search_output, data, filters)

    add = graph.add

    def add_to_graph(data, filters):
        _pending.graph_adding = True
        try:
            return add(data, filters)
        finally:
            _pending.graph_adding = False

    graph._retrieve_nodes_from_data = _retrieve_nodes_from_data
    graph._establish_nodes_relations_from_data = _establish_nodes_relations_from_data
    graph._get_delete_entities_from_search_output = _get_delete_entities_from_search_output
    graph.add = add_to_graph
