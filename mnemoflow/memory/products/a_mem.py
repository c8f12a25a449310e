"""A-Mem (PyPI ``a-mem`` 0.2.6, import ``agentic_memory``): ``a_mem``. Extra ``products-amem``.

A-Mem (Xu et al., 2025) stores every message as a *note*: one LLM call analyses it (keywords,
one-sentence context, tags), then, once the memory has notes, a second call sees its 5 nearest
notes and decides its *evolution*: link the new note to some of them ("strengthen", with new
tags) and / or rewrite their context and tags ("update_neighbor"). Notes live in a persistent
ChromaDB collection, embedded as content + context + keywords + tags; ``search_agentic``
returns the nearest notes (and their links, when fewer than ``k`` notes matched).
``a-mem`` 0.2.6 is the DiaaAj/a-mem-mcp packaging of agiresearch/A-mem (the official repo is not
on PyPI).

Install weight: ``pip install a-mem==0.2.6`` adds 44 distributions (~500 MB: chromadb, litellm,
onnxruntime, kubernetes, opentelemetry, mcp...) beside the project, hence its own extra
(``make install-amem``; ``make test`` installs it), not ``products``. Importing it takes 12-16 s
(litellm, chromadb, transformers), paid only when a system is built.

What this adapter does to the product, in-process, and nothing else:

- **every model call goes through the gateway**: ``llm_controller.llm`` is a bridge to the
  ``memory_writer`` role, so sampling (temperature) is the role binding's, not A-Mem's default
  1.0; the Chroma collection's embedding function is a bridge to the ``embedder`` role (offline
  hashed or the bundled MiniLM), built in place of A-Mem's ``SentenceTransformerEmbeddingFunction``
  (which would load a model by hub name) — never a download. Vectors are L2-normalized before
  Chroma stores them, so its squared-L2 distance ``d`` is ``2 - 2 cos``: ``retrieve`` reports
  the similarity ``1 - d / 2`` (the cosine), not A-Mem's distance.
- **call sites, not prompt text**: A-Mem calls its model in ``analyze_content`` and
  ``process_memory``; the adapter wraps both on each instance, so the bridge tags the request
  ``a_mem_analyze`` or ``a_mem_evolve`` with the structured inputs (the note's speaker and
  words; its keywords, context, tags and its neighbours' ids, speakers, words, context, tags).
  A real endpoint gets A-Mem's own prompt and json_schema; the offline backend
  (``mnemoflow/llm/offline/a_mem.py``) reads the fields. A call from any other site is an error.
- **nothing swallowed**: A-Mem catches every exception of its model calls and searches (an
  analysis then silently becomes ``General``); the adapter re-raises what the gateway raised.
- **the clock is the conversation's**: a note's ``time`` is its message's time
  (``YYYYMMDDHHMM``, A-Mem's format; the data's own string when it is not ISO) and A-Mem's
  ``datetime.now()`` (``last_accessed``) is the latest conversation time ingested. Note ids are
  ``note_000001``... (uuid4 upstream), so the evolution prompt, which lists neighbours by id,
  is the same on a rerun and hits the cache.
- **notes and provenance**: one note per message, ``"<speaker>: <content>"`` (as A-Mem's LoCoMo
  evaluation writes them); the adapter keeps note id -> turn id, speaker and time. ``retrieve``
  ranks every note (``search_agentic`` with ``k`` = all notes, then cut to ``k``: ties go to the
  older note, so a reopened collection ranks exactly like the saved one); upstream's link
  expansion only fills a result when fewer than ``k`` notes exist, which this cut also gives.
  An item's text is the note's content and its context (``context: ...``).
- **one memory per episode**: every instance has a private ChromaDB folder; ``save`` writes it
  as one gzip'd tar with the adapter's maps, ``load`` unpacks it into a fresh folder.
- **telemetry off**: ``ANONYMIZED_TELEMETRY=False`` (Chroma), ``LITELLM_LOCAL_MODEL_COST_MAP=True``
  (litellm otherwise fetches its cost map from GitHub at import), ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mnemoflow.llm.types import UnparseableReply, reply_json
from mnemoflow.memory.base import MemoryItem, Message, WritePattern, register
from mnemoflow.memory.products import require_all
from mnemoflow.memory.products.base import Bridge, ThreadProduct, formatted_time, patch_once
from mnemoflow.memory.tokens import count_tokens

VERSION = "0.2.6"
INSTALL = "pip install -e '.[products-amem]' (or: make install-amem)"
ANALYZE, EVOLVE = "a_mem_analyze", "a_mem_evolve"
SNAPSHOT = "a_mem.tar.gz"
STATE = "a_mem_state.json"
#: A-Mem's time format.
TIME_FORMAT = "%Y%m%d%H%M"
#: Environment A-Mem's dependencies read at import: no telemetry, no network lookups.
QUIET_ENV = {
    "ANONYMIZED_TELEMETRY": "False",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
}


def amem_time(time: str) -> str:
    """A conversation time in A-Mem's ``YYYYMMDDHHMM`` when the data's time is ISO, else the
    data's own string (never the wall clock)."""
    return formatted_time(time, TIME_FORMAT)


class _Clock:
    """What ``agentic_memory.memory_system.datetime`` is: ``now()`` is the latest conversation
    time ingested by the memory running in this thread (A-Mem stamps ``last_accessed``)."""

    @staticmethod
    def now() -> datetime:
        try:
            return datetime.strptime(AMem.running().now, TIME_FORMAT)
        except ValueError:
            return datetime(1970, 1, 1)


def _quiet(*args: Any, **kwargs: Any) -> None:
    """A-Mem prints its caught errors to stdout; the adapter re-raises them instead."""


def _embedding_function_class() -> type:
    from chromadb.api.types import EmbeddingFunction

    class GatewayEmbeddingFunction(EmbeddingFunction):
        """The Chroma embedding function A-Mem builds: the gateway's ``embedder`` role."""

        def __init__(self, model_name: str = "") -> None:
            self._owner = weakref.ref(AMem.running())  # built in the memory's own thread

        @staticmethod
        def name() -> Any:
            """None, silently: a "legacy" function to Chroma, which then stores no config to
            rebuild it from (the adapter always passes it) and warns of nothing."""
            return NotImplemented

        def __call__(self, input: list[str]) -> list[np.ndarray]:  # noqa: A002 (Chroma's name)
            owner = self._owner()
            if owner is None:
                raise RuntimeError("A-Mem embedded with a memory system that is gone")
            with owner.recording():  # A-Mem catches everything: re-raised
                vectors = np.asarray(owner.call(owner.llm.embed([str(t) for t in input])))
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = np.where(norms > 0, vectors / np.where(norms > 0, norms, 1), vectors)
            return [v.astype(np.float32) for v in vectors]

    return GatewayEmbeddingFunction


def _install(memory_system: Any, retrievers: Any) -> None:
    """Patch A-Mem's modules (once per process): the clock, quiet prints, the embedder."""
    memory_system.datetime = _Clock
    memory_system.print = _quiet
    retrievers.print = _quiet
    retrievers.SentenceTransformerEmbeddingFunction = _embedding_function_class()


def _json_object(keys: tuple[str, ...]) -> Callable[[str], str]:
    """A parser: A-Mem reads the reply with ``json.loads`` (no fences) and takes these keys."""

    def parse(text: str) -> str:
        value = reply_json(text)
        if not isinstance(value, dict) or any(k not in value for k in keys):
            raise UnparseableReply(f"not a JSON object with keys {', '.join(keys)}")
        return text

    return parse


PARSERS = {
    ANALYZE: _json_object(("keywords", "context", "tags")),
    EVOLVE: _json_object(("should_evolve", "actions")),
}


class _Bridge(Bridge):
    """What A-Mem calls as ``llm_controller.llm``: the gateway, on the job's loop."""

    def get_completion(self, prompt, response_format=None, temperature=1.0, max_tokens=None):
        owner = self.owner
        with owner.recording():  # A-Mem catches everything: re-raised later
            task, fields = owner.pending
            owner.pending = (None, {})
            if task is None:
                raise owner.call_site_unknown()
            # A-Mem's own messages; its temperature (1.0) is not sent: the role's binding rules
            messages = [
                {"role": "system", "content": "You must respond with a JSON object."},
                {"role": "user", "content": prompt},
            ]
            request = owner.writer_request(task, messages, fields, response_format=response_format)
            reply = owner.call(owner.llm.chat(request, parse=PARSERS[task]))
        return owner.counted(reply).text


@register
class AMem(ThreadProduct):
    """A-Mem (a-mem 0.2.6): LLM-annotated notes that link to and rewrite their neighbours."""

    name: ClassVar[str] = "a_mem"
    product, distribution, version, install = "A-Mem", "a-mem", VERSION, INSTALL
    requires = (("agentic_memory", distribution, VERSION),)
    offline, offline_tasks = "mnemoflow.llm.offline.a_mem", (ANALYZE, EVOLVE)
    snapshot, state_file, folder_prefix = SNAPSHOT, STATE, "mnemoflow-a_mem-"
    state_keys = ("now", "notes", "writer_calls", "parse_failures", "tokens_written", "evolutions")
    thread_name = "a_mem"
    #: One note per message: its analysis (keywords, context, tags), then its evolution against
    #: the neighbouring notes once there are any (13 of 14 messages); 27 texts embedded for 14
    #: messages (the note, and the neighbours' search). Prompts: A-Mem's own. Measured on the
    #: offline twin's run (docs/plan.md, "Memory products").
    write_pattern: ClassVar[WritePattern] = WritePattern.per_task(
        {ANALYZE: (1.0, (163, 1)), EVOLVE: (13 / 14, (615, 1))},
        batch_param=None,
        unit="fact",
        facts_per_batch=27 / 14,
    )

    def fresh_state(self) -> None:
        self.now = ""  # A-Mem's clock: the latest conversation time, YYYYMMDDHHMM
        #: note id -> {"turn_ids", "speaker", "said", "time"}
        self.notes: dict[str, dict[str, Any]] = {}
        self.pending: tuple[str | None, dict[str, Any]] = (None, {})
        self.evolutions = 0

    # ---- opening A-Mem ----------------------------------------------------------------------

    def _modules(self) -> Any:
        os.environ.update(QUIET_ENV)  # read at import by chromadb, litellm, huggingface_hub
        require_all(self)
        import agentic_memory.memory_system as memory_system
        import agentic_memory.retrievers as retrievers

        patch_once(self.name, _install, memory_system, retrievers)
        return memory_system

    def _construct(self, folder: Path) -> Any:
        memory_system = self._modules()
        memory = memory_system.AgenticMemorySystem(
            model_name="gateway-embedder",  # the bridge replaces A-Mem's model loading
            llm_backend="openai",
            llm_model="bridged",
            api_key="unused",  # the bridge replaces its client before any call
            storage_path=str(folder / "chroma"),
        )
        memory.llm_controller.llm = _Bridge(self)
        analyze, process = memory.analyze_content, memory.process_memory

        def analyze_content(content: str) -> dict:
            note = self.writing
            self.pending = (ANALYZE, {"speaker": note["speaker"], "content": note["said"]})
            return analyze(content)

        def process_memory(note: Any) -> Any:
            self.pending = (EVOLVE, {"note": self._note_fields(note), "neighbours": []})
            return process(note)

        find = memory.find_related_memories

        def find_related_memories(query: str, k: int = 5) -> Any:
            text, ids = find(query, k)
            task, fields = self.pending
            if task == EVOLVE:  # the neighbours the evolution prompt lists, in its order
                found = memory.retriever.get_by_ids(list(ids))
                fields["neighbours"] = [self._neighbour(i, found.get(i) or {}) for i in ids]
            return text, ids

        memory.analyze_content = analyze_content
        memory.process_memory = process_memory
        memory.find_related_memories = find_related_memories
        return memory

    def _note_fields(self, note: Any) -> dict[str, Any]:
        known = self.writing
        return {
            "speaker": known["speaker"],
            "content": known["said"],
            "keywords": list(note.keywords),
            "context": note.context,
            "tags": list(note.tags),
        }

    def _neighbour(self, note_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
        known = self.notes.get(note_id, {})
        return {
            "id": note_id,
            "speaker": known.get("speaker", ""),
            "content": known.get("said", ""),
            "keywords": list(metadata.get("keywords") or []),
            "context": str(metadata.get("context", "")),
            "tags": list(metadata.get("tags") or []),
        }

    def _finalize(self) -> weakref.finalize:
        return weakref.finalize(self, _shut, self._memory, self._executor)

    # ---- the plugin contract ----------------------------------------------------------------

    async def _write(self, messages: list[Message]) -> None:
        memory = await self._open()
        for message in messages:
            await self._in_thread(self._add_note, memory, message)

    def _add_note(self, memory: Any, message: Message) -> None:
        note_id = f"note_{len(self.notes) + 1:06d}"
        speaker = message.speaker or message.role
        time = amem_time(message.time) if message.time else self.now
        self.now = time or self.now
        self.writing = {
            "turn_ids": [message.turn_id],
            "speaker": speaker,
            "said": message.content,
            "time": message.time,
        }
        kwargs: dict[str, Any] = {"id": note_id}
        if time:
            kwargs.update(time=time, last_accessed=time)
        try:
            memory.add_note(f"{speaker}: {message.content}", **kwargs)
        finally:
            self.pending = (None, {})
        self.notes[note_id] = self.writing
        self.tokens_written += count_tokens(message.content)
        self.evolutions = memory.evo_cnt

    async def _search(self, query: str, k: int) -> list[MemoryItem]:
        if not self.notes:
            return []
        memory = await self._open()
        found = await self._in_thread(memory.search_agentic, query, len(self.notes))
        order = {note_id: n for n, note_id in enumerate(self.notes)}
        items = []
        for hit in found:
            known = self.notes.get(hit["id"])
            if known is None or hit.get("is_neighbor"):
                continue
            score = round(1.0 - float(hit["score"]) / 2.0, 6)
            text = f"{known['speaker']}: {known['said']}"
            if hit.get("context") and hit["context"] != "General":
                text += f"\ncontext: {hit['context']}"
            items.append(MemoryItem(hit["id"], text, score, list(known["turn_ids"]), known["time"]))
        items.sort(key=lambda item: (-item.score, order[item.id]))
        return items[:k]

    def stats(self) -> dict[str, Any]:
        return {"items": len(self.notes), "evolutions": self.evolutions, **self.writes()}

    def stored_ids(self) -> set[str]:
        return {t for note in self.notes.values() for t in note["turn_ids"]}


def _shut(memory: Any, executor: ThreadPoolExecutor | None) -> None:
    """Release a closed memory's Chroma client and its thread."""
    system = getattr(getattr(memory.retriever, "client", None), "_system", None)
    if system is not None:
        try:
            system.stop()
        except Exception:  # noqa: BLE001  (a client already stopped at exit)
            pass
    if executor is not None:
        executor.shutdown(wait=False)
