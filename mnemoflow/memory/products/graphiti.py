"""Graphiti, the open engine of Zep (graphiti-core 0.31.2 on an embedded Kuzu database):
``graphiti``. Extra ``products``: graphiti-core[kuzu]==0.31.2, httpx==0.28.1 (kuzu 0.11.3 is
shared with Mem0-G).

Graphiti builds a temporal knowledge graph: each episode (here: one conversation message) is
read with the episodes before it; the model extracts entities, then facts between them (edges
with a validity interval), entities are resolved against the graph, each new fact is checked
for duplicates and for the stored facts it contradicts (those are invalidated, not deleted), and
entity summaries are updated. Search is graphiti's ``EDGE_HYBRID_SEARCH_RRF`` recipe (what
``Graphiti.search`` runs): BM25 over the facts and cosine similarity of their embeddings, fused
by reciprocal rank; no model call at query time.

What this adapter does to the product, in-process, and nothing else:

- **every model call goes through the gateway**: graphiti's ``LLMClient`` and
  ``EmbedderClient`` are subclassed as bridges (cache, ledger, endpoint limits, retries, parse
  re-asks, offline / MiniLM embedders). The LLM bridge does what graphiti's base client does to
  the messages (its attribute preamble, the response model's JSON schema appended to the prompt,
  its language instruction, its input cleaning) and sends graphiti's ``response_format``
  (``json_schema`` named for the response model, as ``OpenAIGenericClient`` does); the role's
  ``structured_output`` decides whether an endpoint gets it, and since the schema is also in the
  prompt, a fallback without it still asks for the right object. A reply is validated against
  the response model; one that never validates is counted (``parse_failures``) and graphiti
  gets the model's empty answer (no entities, no facts: nothing extracted by that call). The
  cross-encoder is never used by the RRF recipe: a stand-in that refuses keeps graphiti from
  building its OpenAI reranker.
- **call sites, not prompt text**: every graphiti model call goes through
  ``graphiti_types.generate_prompt_response(llm_client, prompt_name, prompt, context)``; a
  wrapper in each module that imports it records the prompt's name and its ``context`` dict,
  and the bridge tags the request ``graphiti.<prompt name>`` with that context (made JSON) and
  the message being ingested as fields, for the offline backend
  (``mnemoflow/llm/offline/graphiti.py``). A call from anywhere else is an error.
- **the clock is the conversation's**: ``reference_time`` is the message's conversation time,
  and graphiti's own ``utc_now`` (``created_at``, ``expired_at`` of invalidated facts) reads
  the same time while an episode is ingested, so nothing depends on the wall clock. A message
  without a (parseable ISO) time is dated 1970-01-01.
- **reproducible ids**: graphiti names nodes, edges and episodes with ``uuid4``; while a memory
  ingests, its ids come from its own counter instead (saved with it), and graphiti runs its
  model calls one at a time (``max_coroutines=1``), so a rerun builds the same graph with the
  same ids, sends the same prompts in the same order, and ties rank the same.
- **what the reader sees**: an item is a fact (graphiti's search returns facts, as Zep's memory
  context leads with them), dated by its ``valid_at``; a fact a later one contradicted stays in
  the graph with an ``invalid_at`` and is shown as "<fact> (no longer true from <date>)", the
  validity window graphiti's own context string gives. Scores are graphiti's RRF scores (higher
  is better; not cosines).
- **provenance**: one graphiti episode per message (``"<speaker>: <content>"``, graphiti's
  message format); every fact lists the episodes it came from (a duplicate fact met again adds
  its episode), and the adapter maps episodes to turn ids: an item's ``source_ids``.
- **Kuzu workarounds** (bugs of 0.31.2's deprecated Kuzu backend): (1) graphiti's LLM client
  module imports ``httpx`` without declaring it: the extra pins it; (2) ``KuzuDriver`` lacks the
  ``_database`` attribute ``add_episode(group_id=...)`` reads: set to the memory's group id;
  (3) ``build_indices_and_constraints`` creates no full-text index for Kuzu, so search fails:
  the adapter runs graphiti's own ``get_fulltext_indices(GraphProvider.KUZU)`` statements once,
  when a database is created (a loaded snapshot has them); (4) graphiti hands a search query to
  Kuzu's full-text search unescaped and Kuzu keeps punctuation in query words, so the last word
  of every question ("adopt?") matched nothing: the query's punctuation becomes spaces.
  Telemetry is off (``GRAPHITI_TELEMETRY_ENABLED=false``).
- **one memory per episode**: every instance has a private folder holding one Kuzu database
  and one graphiti group; ``save`` checkpoints it and writes the folder as one gzip'd tar
  (Kuzu preallocates pages: ~35 MB on disk for a few messages, a few hundred KB compressed)
  beside the adapter's maps; ``load`` unpacks it into a fresh folder.
"""

from __future__ import annotations

import contextvars
import copy
import importlib
import json
import os
import re
import uuid as uuid_module
import warnings
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any, ClassVar

from mnemoflow.llm.types import UnparseableReply, reply_json
from mnemoflow.memory.base import MemoryItem, Message, WritePattern, register
from mnemoflow.memory.products import require_all
from mnemoflow.memory.products.base import Bridge, FolderProduct, conversation_time, patch_once

VERSION = "0.31.2"
#: A request's task is this prefix + graphiti's prompt name.
TASK_PREFIX = "graphiti."
#: The graphiti prompts this adapter's configuration calls (the offline twin answers each).
OFFLINE_PROMPTS = (
    "extract_nodes.extract_message",
    "extract_edges.edge",
    "extract_edges.extract_timestamps",
    "dedupe_edges.resolve_edge",
    "dedupe_nodes.nodes",
    "extract_nodes.extract_summaries_batch",
    "extract_nodes.extract_entity_summaries_from_episodes",
)
#: The graphiti group (and Kuzu "database" name) of a memory: each has a database of its own.
GROUP = "episode"
DATABASE = "graph.kuzu"
SNAPSHOT = "graphiti.tar.gz"
STATE = "graphiti_state.json"
#: A message whose time is missing or not ISO.
NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)

#: Modules that call the model through ``generate_prompt_response``.
PROMPT_CALLERS = (
    "graphiti_core.graphiti",
    "graphiti_core.utils.maintenance.edge_operations",
    "graphiti_core.utils.maintenance.node_operations",
    "graphiti_core.utils.maintenance.combined_extraction",
    "graphiti_core.utils.maintenance.community_operations",
)
#: Modules that read the wall clock (``utc_now``) or draw ids (``uuid4``) while ingesting.
CLOCK_READERS = (
    "graphiti_core.nodes",
    "graphiti_core.graphiti",
    "graphiti_core.utils.maintenance.edge_operations",
    "graphiti_core.utils.maintenance.node_operations",
    "graphiti_core.utils.maintenance.combined_extraction",
    "graphiti_core.utils.maintenance.dangling_endpoints",
    "graphiti_core.utils.maintenance.community_operations",
)
ID_DRAWERS = ("graphiti_core.nodes", "graphiti_core.edges", "graphiti_core.graphiti")
#: Where graphiti turns a search query into a Kuzu full-text query (module, function).
FULLTEXT_QUERIES = (
    ("graphiti_core.search.search_utils", "fulltext_query"),
    ("graphiti_core.driver.kuzu.operations.search_ops", "_build_kuzu_fulltext_query"),
)
#: Punctuation, which Kuzu's full-text search keeps in query words ("adopt?" matches nothing).
PUNCTUATION = re.compile(r"[^\w\s]+")

#: The prompt a model call serves: (prompt name, graphiti's context dict), set by the wrapper.
_call: contextvars.ContextVar[tuple[str, dict[str, Any]] | None] = contextvars.ContextVar(
    "graphiti_call", default=None
)
#: The episode being ingested, for the clock and ids (``None``: graphiti's own).
_ingesting: contextvars.ContextVar[_Ingest | None] = contextvars.ContextVar(
    "graphiti_ingest", default=None
)


class _Ingest:
    """One message being ingested by one memory: its time, record and id counter."""

    def __init__(self, owner: GraphitiMemory, message: Message, time: datetime):
        self.owner = owner
        self.time = time
        self.record = {
            "turn_id": message.turn_id,
            "speaker": message.speaker or message.role,
            "content": message.content,
            "time": message.time,
        }

    def next_id(self) -> uuid_module.UUID:
        self.owner.next_uuid += 1
        return uuid_module.UUID(int=self.owner.next_uuid)


def _install() -> None:
    """Wrap graphiti's prompt calls, clock and id source (once per process). Outside an
    ingest of this adapter, the clock and ids are graphiti's own."""
    types = importlib.import_module("graphiti_core.graphiti_types")
    original = types.generate_prompt_response

    async def generate_prompt_response(llm_client, prompt_name, legacy_prompt, context, **kw):
        token = _call.set((prompt_name, context))
        try:
            return await original(llm_client, prompt_name, legacy_prompt, context, **kw)
        finally:
            _call.reset(token)

    for name in PROMPT_CALLERS:
        importlib.import_module(name).generate_prompt_response = generate_prompt_response
    for name in CLOCK_READERS:
        module = importlib.import_module(name)
        module.utc_now = _pinned_clock(module.utc_now)
    for name in ID_DRAWERS:
        module = importlib.import_module(name)
        module.uuid4 = _pinned_ids(module.uuid4)
    for name, function in FULLTEXT_QUERIES:
        module = importlib.import_module(name)
        setattr(module, function, _plain_words(getattr(module, function)))


def _pinned_clock(wall: Callable[[], datetime]) -> Callable[[], datetime]:
    def utc_now() -> datetime:
        ingest = _ingesting.get()
        return ingest.time if ingest is not None else wall()

    return utc_now


def _pinned_ids(draw: Callable[[], uuid_module.UUID]) -> Callable[[], uuid_module.UUID]:
    def uuid4() -> uuid_module.UUID:
        ingest = _ingesting.get()
        return ingest.next_id() if ingest is not None else draw()

    return uuid4


def _plain_words(build: Callable[..., str]) -> Callable[..., str]:
    """Workaround 4: graphiti passes a query to Kuzu's full-text search as it is (for Neo4j it
    escapes Lucene syntax), and Kuzu matches "adopt?" literally, so a question's last word never
    matched. The query's punctuation becomes spaces first."""

    def plain(query: str, *args: Any, **kwargs: Any) -> str:
        return build(PUNCTUATION.sub(" ", query), *args, **kwargs)

    return plain


def reference_time(time: str) -> datetime:
    """A message's conversation time for graphiti (UTC; the data's times carry no zone), or
    1970-01-01 when it has none or it is not ISO: never the wall clock."""
    parsed = conversation_time(time)
    if parsed is None:
        return NO_TIME
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _jsonable(value: Any) -> Any:
    """graphiti's prompt context as JSON (datetimes and models as strings), for the request's
    fields: the offline backend reads it and the cache key holds it."""
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _parser(model: Any) -> Callable[[str], dict[str, Any]]:
    """The reply is a JSON object valid for graphiti's response model (code fences allowed, as
    graphiti's OpenAI-compatible client strips them)."""

    def parse(text: str) -> dict[str, Any]:
        body = re.sub(r"^```[a-zA-Z0-9_-]*[ \t]*\r?\n?|\r?\n?```[ \t]*$", "", text.strip())
        value = reply_json(body.strip())
        if not isinstance(value, dict):
            raise UnparseableReply("not a JSON object")
        if model is not None:
            try:
                model.model_validate(value)
            except ValueError as exc:  # pydantic's ValidationError
                first = str(exc).splitlines()[1:2]
                raise UnparseableReply(
                    f"not a valid {model.__name__}: {' '.join(first).strip()}"
                ) from None
        return value

    return parse


def nothing_extracted(model: Any, prompt_name: str) -> dict[str, Any]:
    """What graphiti gets for a reply that never fit its response model: the model's object
    with every required list empty (no entities, no facts, no duplicates), so the episode is
    stored with nothing extracted from that call. A response model with another required field
    has no such empty answer: the ingest fails, naming the prompt."""
    if model is None:
        return {}
    empty = {
        name: []
        for name, info in model.model_fields.items()
        if info.is_required() and getattr(info.annotation, "__origin__", None) is list
    }
    try:
        model.model_validate(empty)
    except ValueError:
        raise RuntimeError(
            f"graphiti prompt {prompt_name}: no reply fit {model.__name__} after the gateway's "
            "re-asks, and it has no empty answer"
        ) from None
    return empty


@cache
def _bridges() -> tuple[type, type, type]:
    """graphiti's client classes, subclassed once the product is imported."""
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.embedder.client import EmbedderClient
    from graphiti_core.llm_client.client import LLMClient, get_extraction_language_instruction
    from graphiti_core.llm_client.config import LLMConfig

    class WriterBridge(LLMClient):
        """graphiti's LLM client: the gateway's ``memory_writer``."""

        def __init__(self, owner: GraphitiMemory):
            super().__init__(LLMConfig(api_key="unused", model="bridged"), cache=False)
            self._owner = weakref.ref(owner)  # graphiti must not keep the system alive

        async def generate_response(
            self,
            messages,
            response_model=None,
            max_tokens=None,
            model_size=None,
            group_id=None,
            prompt_name=None,
            *,
            attribute_extraction=False,
            model=None,
        ):
            owner = self._owner()
            call = _call.get()
            if owner is None or call is None or call[0] != prompt_name:
                raise RuntimeError(
                    f"graphiti made a model call ({prompt_name!r}) the mnemoflow bridge did not "
                    f"see built (graphiti-core {VERSION} expected); refusing to guess its task"
                )
            # What graphiti's base LLMClient.generate_response does to the messages.
            self._apply_attribute_extraction_preamble(messages, attribute_extraction)
            if response_model is not None:
                schema = json.dumps(response_model.model_json_schema())
                messages[
                    -1
                ].content += f"\n\nRespond with a JSON object in the following format:\n\n{schema}"
            messages[0].content += get_extraction_language_instruction(group_id)
            sent = [{"role": m.role, "content": self._clean_input(m.content)} for m in messages]
            ingest = _ingesting.get()
            fields = {
                "context": _jsonable(call[1]),
                "message": ingest.record if ingest is not None else None,
            }
            response_format = None
            if response_model is not None:
                response_format = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": response_model.__name__,
                        "schema": response_model.model_json_schema(),
                    },
                }
            request = owner.writer_request(
                TASK_PREFIX + prompt_name, sent, fields, response_format=response_format
            )
            reply = owner.counted(await owner.llm.chat(request, parse=_parser(response_model)))
            if not reply.parse_ok:
                return nothing_extracted(response_model, prompt_name)
            return reply.parsed

        async def _generate_response(self, *args, **kwargs):  # never reached: see above
            raise NotImplementedError

    class EmbedderBridge(EmbedderClient, Bridge):
        """graphiti's embedder: the gateway's ``embedder`` (graphiti passes one text, or a
        list and wants the first vector, as its OpenAI embedder returns)."""

        async def create(self, input_data):
            texts = [input_data] if isinstance(input_data, str) else list(input_data)
            return (await self.create_batch(texts[:1]))[0]

        async def create_batch(self, input_data_list):
            owner = self.owner
            if not all(isinstance(t, str) for t in input_data_list):
                raise TypeError("the mnemoflow embedder bridge embeds texts, not token ids")
            vectors = await owner.llm.embed(list(input_data_list))
            return [[float(x) for x in vector] for vector in vectors]

    class NoReranker(CrossEncoderClient):
        """The RRF recipe never reranks with a cross-encoder; graphiti's default one would be
        an OpenAI client outside the gateway."""

        async def rank(self, query, passages):
            raise RuntimeError(
                "graphiti asked for a cross-encoder, which the mnemoflow adapter does not "
                "bridge (it searches with EDGE_HYBRID_SEARCH_RRF)"
            )

    return WriterBridge, EmbedderBridge, NoReranker


@register
class GraphitiMemory(FolderProduct):
    """Graphiti (graphiti-core 0.31.2, Zep's engine, embedded Kuzu): a temporal fact graph."""

    name: ClassVar[str] = "graphiti"
    product, distribution, version = "graphiti", "graphiti-core", VERSION
    requires = (
        ("httpx", "httpx", "0.28.1"),
        ("kuzu", "kuzu", "0.11.3"),
        ("graphiti_core", distribution, VERSION),
    )
    offline = "mnemoflow.llm.offline.graphiti"
    offline_tasks = tuple(TASK_PREFIX + prompt for prompt in OFFLINE_PROMPTS)
    snapshot, state_file, folder_prefix = SNAPSHOT, STATE, "mnemoflow-graphiti-"
    state_keys = ("episodes", "facts", "next_uuid", "entities", "writer_calls", "parse_failures")
    # query_roles: the RRF search embeds the query; it calls no model otherwise.
    #: One episode per message: its entities and its edges, one call each; timestamps, edge
    #: resolution and entity summaries when it found something to date, resolve or summarize
    #: (5, 4 and 8 of 14 messages); 48 texts embedded for 14 messages (entities, edges). Prompts:
    #: graphiti's own, with the previous episodes. Measured on the offline twin's run
    #: (docs/plan.md, "Memory products").
    write_pattern: ClassVar[WritePattern] = WritePattern.per_task(
        {
            TASK_PREFIX + "extract_nodes.extract_message": (1.0, (1777, 1)),
            TASK_PREFIX + "extract_edges.edge": (1.0, (1738, 1)),
            TASK_PREFIX + "extract_edges.extract_timestamps": (5 / 14, (527, 1)),
            TASK_PREFIX + "dedupe_edges.resolve_edge": (4 / 14, (774, 1)),
            TASK_PREFIX + "extract_nodes.extract_summaries_batch": (8 / 14, (700, 1)),
        },
        batch_param=None,
        unit="fact",
        facts_per_batch=48 / 14,
    )

    def fresh_state(self) -> None:
        #: episode uuid -> turn id; fact (edge) uuid -> episode uuids it came from
        self.episodes: dict[str, str] = {}
        self.facts: dict[str, list[str]] = {}
        self.next_uuid = 0
        self.entities: set[str] = set()

    # ---- opening graphiti ----------------------------------------------------------------

    def _modules(self) -> Any:
        os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
        require_all(self)
        import graphiti_core as core

        patch_once(self.name, _install)
        return core

    async def _open(self) -> Any:
        if self._memory is not None:
            return self._memory
        from graphiti_core import Graphiti
        from graphiti_core.driver.driver import GraphProvider
        from graphiti_core.driver.kuzu_driver import KuzuDriver
        from graphiti_core.graph_queries import get_fulltext_indices

        created = self._folder is None
        folder = self._workdir()
        with warnings.catch_warnings():  # "The Kuzu backend is deprecated": known, documented
            warnings.simplefilter("ignore", DeprecationWarning)
            driver = KuzuDriver(db=str(folder / DATABASE))
        driver._database = GROUP  # workaround 2: read by add_episode(group_id=...)
        if created:  # workaround 3: graphiti creates no full-text index for Kuzu
            for statement in get_fulltext_indices(GraphProvider.KUZU):
                await driver.execute_query(statement)
        writer, embedder, reranker = _bridges()
        self._memory = Graphiti(
            graph_driver=driver,
            llm_client=writer(self),
            embedder=embedder(self),
            cross_encoder=reranker(),
            max_coroutines=1,
        )
        self._finalizer = weakref.finalize(self, _shut, driver)
        return self._memory

    # ---- the plugin contract ---------------------------------------------------------------

    async def _write(self, messages: list[Message]) -> None:
        from graphiti_core.nodes import EpisodeType

        graphiti = await self._open()
        for message in messages:
            ingest = _Ingest(self, message, reference_time(message.time))
            token = _ingesting.set(ingest)
            try:
                result = await graphiti.add_episode(
                    name=message.turn_id,
                    episode_body=f"{ingest.record['speaker']}: {message.content}",
                    source_description=f"conversation, session {message.session_id}",
                    reference_time=ingest.time,
                    source=EpisodeType.message,
                    group_id=GROUP,
                )
            finally:
                _ingesting.reset(token)
            self.episodes[result.episode.uuid] = message.turn_id
            self.entities.update(node.uuid for node in result.nodes)
            for edge in result.edges:
                self.facts[edge.uuid] = list(edge.episodes)

    async def _search(self, query: str, k: int) -> list[MemoryItem]:
        from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF

        if not self.facts:
            return []
        graphiti = await self._open()
        config = copy.deepcopy(EDGE_HYBRID_SEARCH_RRF)  # graphiti's search() mutates it
        config.limit = k
        found = await graphiti.search_(query, config=config, group_ids=[GROUP])
        items = []
        for edge, score in zip(found.edges, found.edge_reranker_scores, strict=True):
            sources = [self.episodes[e] for e in edge.episodes if e in self.episodes]
            when = edge.valid_at or edge.reference_time
            text = edge.fact
            if edge.invalid_at is not None:
                text += f" (no longer true from {edge.invalid_at.date().isoformat()})"
            items.append(
                MemoryItem(
                    _item_id(edge.uuid),
                    text,
                    round(float(score), 6),
                    list(dict.fromkeys(sources)),
                    when.isoformat(timespec="minutes") if when else "",
                )
            )
        return items

    def state(self) -> dict[str, Any]:
        return {**super().state(), "entities": sorted(self.entities)}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.entities = set(state["entities"])

    def _checkpoint(self) -> None:
        if self._memory is not None:
            _checkpoint(self._memory.driver)

    def stats(self) -> dict[str, Any]:
        return {
            "items": len(self.facts),
            "entities": len(self.entities),
            "episodes": len(self.episodes),
            "writer_calls": self.writer_calls,
            "parse_failures": self.parse_failures,
        }

    def stored_ids(self) -> set[str]:
        """Turns some fact came from (a message that yielded no fact is not stored)."""
        return {self.episodes[e] for eps in self.facts.values() for e in eps if e in self.episodes}


def _item_id(edge_uuid: str) -> str:
    """``f<n>`` for a fact named by the adapter's counter, else graphiti's uuid."""
    number = uuid_module.UUID(edge_uuid).int
    return f"f{number}" if number < 2**63 else edge_uuid


def _checkpoint(driver: Any) -> None:
    """Write Kuzu's log into its database file, so the file alone is the graph."""
    import kuzu

    connection = kuzu.Connection(driver.db)
    try:
        connection.execute("CHECKPOINT;")
    finally:
        connection.close()


def _shut(driver: Any) -> None:
    """Close a Kuzu database (its connection first)."""
    driver.client.close()
    driver.db.close()
