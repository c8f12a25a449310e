"""MemoryOS (BAI-LAB; PyPI ``memoryos-pro`` 0.1.0, import ``memoryos``): ``memoryos``.

MemoryOS keeps three tiers of user / assistant *pairs*: a short-term FIFO (10 pairs), a
mid-term store of topic sessions (pages linked into conversation chains, each page with a
running "meta" summary, sessions with an LLM summary and keywords, a "heat" from visits, pages
and recency), and a long-term store (a user profile, user knowledge and assistant knowledge,
extracted from a session's pages once its heat passes 5). Its retrieval returns the mid-term
pages most similar to the query (in the sessions most similar to it) and the most similar
knowledge entries.

Install: its PyPI metadata does not resolve on Python 3.11 (it pins ``faiss-gpu`` and
``numpy==1.24.*``), so ``make install-products`` runs ``pip install --no-deps
memoryos-pro==0.1.0``; what its code imports (faiss-cpu, sentence-transformers, numpy, openai)
is already pinned by the project (``pip check`` reports its unmet pins; they are not needed).

What this adapter does to the product, in-process, and nothing else:

- **every model call goes through the gateway**: MemoryOS's ``OpenAIClient`` objects are
  replaced by a bridge, and its embedder (``SentenceTransformer("all-MiniLM-L6-v2")``, loaded by
  hub name into ``memoryos.utils._model_cache``) is pre-seeded with one that calls the
  gateway's ``embedder`` role (offline hashed or the bundled MiniLM), never a download; its
  process-wide embedding cache is turned off (the gateway caches, per embedder).
- **call sites, not prompt text**: MemoryOS makes its model calls in six functions of
  ``memoryos.utils``; the names its modules imported are wrapped, so each call hands the bridge
  a client tagged with its task (``memoryos_continuity``, ``memoryos_meta_info``,
  ``memoryos_multi_summary``, ``memoryos_keywords``, ``memoryos_profile``,
  ``memoryos_knowledge``) and the structured inputs it was built from. A real endpoint gets
  MemoryOS's own prompts; the offline backend (``mnemoflow/llm/offline/memoryos.py``) reads the
  fields. A call from any other place is an error, never a guess.
- **the clock is the conversation's**: ``get_timestamp`` (wall clock, in MemoryOS: pair times,
  session recency and heat, knowledge times) returns the time of the pair being added, and at
  query time the latest time ingested. Ids (uuid in MemoryOS) are counters per memory.
- **pairs and provenance**: our turns become MemoryOS pairs (a ``user`` turn with the
  ``assistant`` turn that follows it; a turn without a partner gets ``(no reply)`` /
  ``(no message)`` on the other side, since MemoryOS drops a pair with an empty side when it
  moves it to mid-term); each side is ``"<speaker>: <content>"``. ``add_memory`` ignores its
  ``meta_data`` in 0.1.0, so the adapter keeps it with the pair and the page made from it
  (``{"pair", "turn_ids", "speakers", "time"}``, stored in MemoryOS's own JSON files): pages
  name their turns; a knowledge line names the turns of the pages it was extracted from.
- **MemoryOS's thread pools run inline** (the gateway does the concurrency): its order of
  calls is then fixed, its catch-alls cannot hide a gateway error (the bridge re-raises it),
  and its ``print`` calls are silenced.

``retrieve`` returns what MemoryOS puts in front of its reader, as one list ranked by its own
similarity (query vector . stored vector): the retrieved pages (at most ``k``, de-duplicated:
MemoryOS files a batch's pages under each of its topics), user and assistant knowledge (at most
``k`` each, MemoryOS's threshold 0.01; a line extracted again is one item naming the turns of
every extraction) and the short-term pairs (scored the same way), cut to
``k``; then the user profile, unscored (score 0), when there is one. Retrieval changes
MemoryOS's state as upstream does (session visits and heat).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mnemoflow.llm.types import UnparseableReply, reply_json
from mnemoflow.memory.base import MemoryItem, Message, WritePattern, register
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.products import require_all
from mnemoflow.memory.products.base import Bridge, ThreadProduct, formatted_time, patch_once
from mnemoflow.memory.tokens import count_tokens

VERSION = "0.1.0"
INSTALL = "pip install --no-deps memoryos-pro==0.1.0 (or: make install-products)"
CONTINUITY, META, SUMMARY = "memoryos_continuity", "memoryos_meta_info", "memoryos_multi_summary"
KEYWORDS, PROFILE, KNOWLEDGE = "memoryos_keywords", "memoryos_profile", "memoryos_knowledge"
#: The hub name MemoryOS 0.1.0 loads its embedder by.
EMBEDDER = "all-MiniLM-L6-v2"
USER = "episode"
DEFAULT_ASSISTANT = "default_assistant_profile"  # MemoryOS's assistant id
KNOWLEDGE_KEYS = ("knowledge_base", "assistant_knowledge")  # in its long-term JSON files
NO_REPLY, NO_MESSAGE = "(no reply)", "(no message)"
SNAPSHOT = "memoryos.tar.gz"
STATE = "memoryos_state.json"
#: MemoryOS's own time format (its heat's recency decay parses it).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def memoryos_time(time: str) -> str:
    """A conversation time in MemoryOS's format when the data's time is ISO, else the data's
    own string (MemoryOS's recency decay then counts it as old: 0.1), never the wall clock."""
    return formatted_time(time, TIME_FORMAT)


class _Inline:
    """A ``ThreadPoolExecutor`` stand-in that runs each task at once in the caller's thread."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001  (delivered by future.result(), as upstream)
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, **_: Any) -> None:
        pass

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


class _Embedder:
    """What ``memoryos.utils._model_cache["all-MiniLM-L6-v2"]`` holds: the gateway's embedder
    of the memory running in this thread."""

    def encode(self, texts: list[str], convert_to_numpy: bool = True, **_: Any) -> np.ndarray:
        owner = MemoryOS.running()
        with owner.recording():  # MemoryOS catches everything: re-raised later
            vectors = owner.call(owner.llm.embed([str(t) for t in texts]))
        return np.asarray(vectors, dtype=np.float32)


class _NoCache(dict):
    """MemoryOS's process-wide embedding cache, off: it is keyed by text only, so memories
    bound to different embedders would share vectors (the gateway caches per embedder)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _quiet(*args: Any, **kwargs: Any) -> None:
    """MemoryOS prints every step to stdout; a job's stdout is not its log."""


def _clock() -> str:
    return MemoryOS.running().now


def _generate_id(prefix: str = "id") -> str:
    owner = MemoryOS.running()
    owner.counter += 1
    return f"{prefix}_{owner.counter:06d}"


def _install(modules: dict[str, Any]) -> None:
    """Patch MemoryOS's modules (once per process): clock, ids, inline pools, quiet prints, the
    embedder, and the call sites of its model calls."""
    utils = modules["utils"]
    for module in modules.values():
        module.print = _quiet
        for name, value in (
            ("get_timestamp", _clock),
            ("generate_id", _generate_id),
            ("ThreadPoolExecutor", _Inline),
        ):
            if hasattr(module, name):
                setattr(module, name, value)
    utils._model_cache[EMBEDDER] = _Embedder()
    utils._embedding_cache = _NoCache()
    updater, mid_term, main = modules["updater"], modules["mid_term"], modules["memoryos"]
    _wrap_updater(updater)
    keywords = mid_term.llm_extract_keywords

    def llm_extract_keywords(text, client, model="gpt-4o-mini"):
        fields = {"texts": client.owner.texts_of(text)}
        return keywords(text, client=client.tagged(KEYWORDS, fields), model=model)

    mid_term.llm_extract_keywords = llm_extract_keywords
    updater.llm_extract_keywords = llm_extract_keywords
    profile, knowledge = main.gpt_user_profile_analysis, main.gpt_knowledge_extraction

    def gpt_user_profile_analysis(
        dialogs, client, model="gpt-4o-mini", existing_user_profile="None"
    ):
        fields = {"pages": client.owner.page_fields(dialogs), "profile": existing_user_profile}
        return profile(dialogs, client.tagged(PROFILE, fields), model, existing_user_profile)

    def gpt_knowledge_extraction(dialogs, client, model="gpt-4o-mini"):
        owner = client.owner
        result = knowledge(
            dialogs, client.tagged(KNOWLEDGE, {"pages": owner.page_fields(dialogs)}), model
        )
        owner.knowledge_from(result, dialogs)
        return result

    main.gpt_user_profile_analysis = gpt_user_profile_analysis
    main.gpt_knowledge_extraction = gpt_knowledge_extraction


def _wrap_updater(updater: Any) -> None:
    continuity, meta, summary = (
        updater.check_conversation_continuity,
        updater.generate_page_meta_info,
        updater.gpt_generate_multi_summary,
    )

    def check_conversation_continuity(previous_page, current_page, client, model="gpt-4o-mini"):
        owner = client.owner
        owner.page_made(current_page)  # the first call about a new page: give it its turns
        fields = {
            "previous": owner.page_field(previous_page) if previous_page else None,
            "current": owner.page_field(current_page),
        }
        return continuity(previous_page, current_page, client.tagged(CONTINUITY, fields), model)

    def generate_page_meta_info(last_page_meta, current_page, client, model="gpt-4o-mini"):
        fields = {"last_meta": last_page_meta, "current": client.owner.page_field(current_page)}
        return meta(last_page_meta, current_page, client.tagged(META, fields), model)

    def gpt_generate_multi_summary(text, client, model="gpt-4o-mini"):
        owner = client.owner
        pages = owner.summarized = owner.batch
        owner.batch = []
        rendered = "\n".join(
            f"User: {p.get('user_input', '')}\nAssistant: {p.get('agent_response', '')}"
            for p in pages
        )
        if rendered != text:
            raise RuntimeError(
                f"MemoryOS {VERSION} summarized a batch the adapter did not see it build"
            )
        fields = {"pages": [owner.page_field(p) for p in pages]}
        return summary(text, client.tagged(SUMMARY, fields), model)

    updater.check_conversation_continuity = check_conversation_continuity
    updater.generate_page_meta_info = generate_page_meta_info
    updater.gpt_generate_multi_summary = gpt_generate_multi_summary


def _json_list(text: str) -> str:
    """MemoryOS reads the multi-summary reply with ``json.loads`` (no fences): a list."""
    if not isinstance(reply_json(text), list):
        raise UnparseableReply("not a JSON array of topics")
    return text


class _Bridge(Bridge):
    """What MemoryOS calls as its ``OpenAIClient``: ``tagged`` by a call-site wrapper, then
    ``chat_completion`` goes to the gateway on the job's loop."""

    def __init__(self, owner: MemoryOS, task: str | None = None, fields: dict | None = None):
        super().__init__(owner)
        self.task, self.fields = task, fields or {}

    def tagged(self, task: str, fields: dict[str, Any]) -> _Bridge:
        return _Bridge(self.owner, task, fields)

    def chat_completion(self, model, messages, temperature=0.7, max_tokens=2000) -> str:
        owner = self.owner
        with owner.recording():  # MemoryOS catches everything: re-raised later
            if self.task is None:
                raise owner.call_site_unknown()
            request = owner.writer_request(self.task, [dict(m) for m in messages], self.fields)
            parse = _json_list if self.task == SUMMARY else (lambda text: text)
            reply = owner.call(owner.llm.chat(request, parse=parse))
        return owner.clean(owner.counted(reply).text.strip())

    def shutdown(self) -> None:
        pass


@register
class MemoryOS(ThreadProduct):
    """MemoryOS (memoryos-pro 0.1.0): short-term pairs, mid-term topic pages, long-term
    profile and knowledge."""

    name: ClassVar[str] = "memoryos"
    product, distribution, version, install = "MemoryOS", "memoryos-pro", VERSION, INSTALL
    requires = (("memoryos", distribution, VERSION),)
    offline = "mnemoflow.llm.offline.memoryos"
    offline_tasks = (CONTINUITY, META, SUMMARY, KEYWORDS, PROFILE, KNOWLEDGE)
    snapshot, state_file, folder_prefix = SNAPSHOT, STATE, "mnemoflow-memoryos-"
    state_keys = ("now", "counter", "pairs", "knowledge", "last_page", "writer_calls",
                  "parse_failures", "tokens_written")  # fmt: skip
    thread_name = "memoryos"
    defaults, params_schema = declare_params(
        top_k=Param(10, "integer", minimum=1),
        short_term_capacity=Param(10, "integer", minimum=1),
        mid_term_heat_threshold=Param(5.0, "number", minimum=0),
        mid_term_similarity_threshold=Param(0.6, "number"),
        top_k_sessions=Param(5, "integer", minimum=1),
    )
    ingest_params: ClassVar[frozenset[str]] = frozenset(
        {"short_term_capacity", "mid_term_heat_threshold", "mid_term_similarity_threshold"}
    )
    ingest_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "embedder")
    #: Its search asks the model for the query's keywords.
    query_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "embedder")
    #: Per message, as measured on the offline twin's run with ``short_term_capacity: 2`` (14
    #: messages; docs/plan.md, "Memory products"): a full short-term memory moves its oldest
    #: pair to a mid-term page (continuity, meta info and summary, 6 each) and asks its
    #: keywords (11); 16 texts embedded. Prompts: MemoryOS's own over the moved pages. A search
    #: asks the query's keywords and embeds 3 texts. A larger short-term memory moves fewer.
    write_pattern: ClassVar[WritePattern] = WritePattern.per_task(
        {
            CONTINUITY: (6 / 14, (109, 0)),
            META: (6 / 14, (148, 0)),
            SUMMARY: (6 / 14, (125, 0)),
            KEYWORDS: (11 / 14, (93, 0)),
        },
        batch_param=None,
        unit="fact",
        facts_per_batch=16 / 14,
        query_tasks=(KEYWORDS,),
        query_prompt_tokens=(61,),
        texts_per_query=3.0,
    )

    def fresh_state(self) -> None:
        self.now = ""  # MemoryOS's clock: the conversation's time
        self.counter = 0  # MemoryOS's ids
        self.pairs = 0
        self.pending_meta: dict[str, Any] | None = None
        self.evicted: list[dict[str, Any]] = []  # pairs MemoryOS took from short-term, in order
        self.batch: list[dict[str, Any]] = []  # the pages of the batch being moved to mid-term
        self.summarized: list[dict[str, Any]] = []  # the batch last summarized
        #: knowledge line -> [our id, source turn ids]
        self.knowledge: dict[str, list[Any]] = {}
        self.last_page: dict[str, Any] | None = None

    # ---- opening MemoryOS -------------------------------------------------------------------

    def _modules(self) -> dict[str, Any]:
        require_all(self)
        names = ("utils", "short_term", "mid_term", "long_term", "updater", "retriever", "memoryos")
        modules = {name: importlib.import_module(f"memoryos.{name}") for name in names}
        patch_once(self.name, _install, modules)
        self._utils = modules["utils"]
        self.clean = modules["utils"].clean_reasoning_model_output
        return modules

    def _construct(self, folder: Path) -> Any:
        main = self._modules()["memoryos"]
        p = self.params
        memory = main.Memoryos(
            user_id=USER,
            openai_api_key="unused",  # the bridge replaces its client before any call
            openai_base_url="http://127.0.0.1:9/v1",
            data_storage_path=str(folder),
            short_term_capacity=p["short_term_capacity"],
            retrieval_queue_capacity=p["top_k"],
            mid_term_heat_threshold=p["mid_term_heat_threshold"],
            mid_term_similarity_threshold=p["mid_term_similarity_threshold"],
            llm_model="bridged",
        )
        bridge = _Bridge(self)
        memory.client = memory.mid_term_memory.client = memory.updater.client = bridge
        memory.updater.last_evicted_page_for_continuity = self.last_page
        short = memory.short_term_memory
        add_qa_pair, pop_oldest = short.add_qa_pair, short.pop_oldest

        def add_with_meta(qa_pair):  # MemoryOS 0.1.0 drops add_memory's meta_data
            return add_qa_pair({**qa_pair, "meta_data": self.pending_meta})

        def pop_and_note():
            qa = pop_oldest()
            if qa is not None:
                self.evicted.append(qa)
            return qa

        short.add_qa_pair, short.pop_oldest = add_with_meta, pop_and_note
        return memory

    # ---- what the call-site wrappers ask (in MemoryOS's thread) -----------------------------

    def page_made(self, page: dict[str, Any]) -> None:
        """MemoryOS made a mid-term page of the oldest evicted pair: the page keeps its meta."""
        if not self.evicted:
            raise RuntimeError(f"MemoryOS {VERSION} made a page of no pair the adapter saw")
        qa = self.evicted.pop(0)
        if (qa.get("user_input"), qa.get("agent_response")) != (
            page.get("user_input"),
            page.get("agent_response"),
        ):
            raise RuntimeError(f"MemoryOS {VERSION} made pages out of the order of its pairs")
        page["meta_data"] = qa.get("meta_data")
        self.batch.append(page)
        self.last_page = page

    def page_field(self, page: dict[str, Any]) -> dict[str, Any]:
        """A pair as the offline backend reads it: each side's speaker and own words."""
        meta = page.get("meta_data") or {}
        speakers = meta.get("speakers") or ["", ""]
        sides = []
        for speaker, text in zip(
            speakers, (page["user_input"], page["agent_response"]), strict=True
        ):
            said = text[len(speaker) + 2 :] if speaker and text.startswith(f"{speaker}: ") else ""
            sides.append({"speaker": speaker, "content": said if speaker else ""})
        return {"user": sides[0], "assistant": sides[1], "time": meta.get("time", "")}

    def page_fields(self, pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.page_field(p) for p in pages]

    def texts_of(self, text: str) -> list[str]:
        """The own words behind a text MemoryOS extracts keywords from: a page's two sides
        (``"User: ... Assistant: ..."``, as MemoryOS renders a page), else the text itself (a
        topic summary, a query)."""
        for page in self.batch + self.summarized:
            if text == f"User: {page['user_input']} Assistant: {page['agent_response']}":
                field = self.page_field(page)
                return [field["user"]["content"], field["assistant"]["content"]]
        return [text]

    def knowledge_from(self, result: dict[str, str], pages: list[dict[str, Any]]) -> None:
        """Name the turns of the pages each knowledge line was extracted from, as MemoryOS
        splits the reply into lines."""
        turns = [t for p in pages for t in (p.get("meta_data") or {}).get("turn_ids", [])]
        for kind, key in (("user", "private"), ("assistant", "assistant_knowledge")):
            for line in (result.get(key) or "").split("\n"):
                line = line.strip()
                if not line or line.lower() in ("none", "- none", "- none."):
                    continue
                known = self.knowledge.setdefault(
                    line, [f"{kind}_knowledge_{len(self.knowledge)}", []]
                )
                known[1] = list(dict.fromkeys(known[1] + turns))
                self.tokens_written += count_tokens(line)

    # ---- the plugin contract ----------------------------------------------------------------

    def _pairs(self, messages: list[Message]) -> list[tuple[Message | None, Message | None]]:
        """A user turn with the assistant turn that follows it; any other turn alone."""
        out: list[tuple[Message | None, Message | None]] = []
        pending: Message | None = None
        for message in messages:
            if message.role == "assistant":
                out.append((pending, message))
                pending = None
                continue
            if pending is not None:
                out.append((pending, None))
            pending = message
        if pending is not None:
            out.append((pending, None))
        return out

    async def _write(self, messages: list[Message]) -> None:
        memory = await self._open()
        for user, assistant in self._pairs(messages):
            await self._in_thread(self._add_pair, memory, user, assistant)

    def _add_pair(self, memory: Any, user: Message | None, assistant: Message | None) -> None:
        sides = [m for m in (user, assistant) if m is not None]
        time = max(m.time for m in sides)
        self.now = memoryos_time(time) if time else self.now
        self.pairs += 1
        speakers = [m.speaker or m.role if m else "" for m in (user, assistant)]
        self.pending_meta = {
            "pair": f"pair_{self.pairs:06d}",
            "turn_ids": [m.turn_id for m in sides],
            "speakers": speakers,
            "time": time,
        }
        said = [
            f"{s}: {m.content}" if m else ""
            for s, m in zip(speakers, (user, assistant), strict=True)
        ]
        self.tokens_written += sum(count_tokens(m.content) for m in sides)
        try:
            memory.add_memory(
                said[0] or NO_MESSAGE,
                said[1] or NO_REPLY,
                timestamp=memoryos_time(time) if time else self.now or None,
                meta_data=self.pending_meta,
            )
        finally:
            self.pending_meta = None

    async def _search(self, query: str, k: int) -> list[MemoryItem]:
        if not self.pairs:
            return []
        memory = await self._open()
        return await self._in_thread(self._retrieve, memory, query, k)

    def _retrieve(self, memory: Any, query: str, k: int) -> list[MemoryItem]:
        utils = self._utils
        memory.retriever.retrieval_queue_capacity = k
        found = memory.retriever.retrieve_context(
            user_query=query,
            user_id=USER,
            top_k_sessions=self.params["top_k_sessions"],
            top_k_knowledge=k,
        )
        vector = utils.normalize_vector(utils.get_embedding(query))

        def similarity(stored: list[float]) -> float:
            return round(float(np.dot(np.asarray(stored, dtype=np.float32), vector)), 6)

        scored: list[tuple[float, int, MemoryItem]] = []
        seen: set[str] = set()
        for page in found["retrieved_pages"]:
            if page["page_id"] in seen:
                continue
            seen.add(page["page_id"])
            scored.append((similarity(page["page_embedding"]), len(scored), _page_item(page)))
        for kind in ("user", "assistant"):
            for entry in found[f"retrieved_{kind}_knowledge"]:
                known = self.knowledge.get(entry["knowledge"], [f"{kind}_knowledge", []])
                if known[0] in seen:  # MemoryOS stores a line extracted twice twice
                    continue
                seen.add(known[0])
                item = MemoryItem(known[0], entry["knowledge"], 0.0, list(known[1]), "")
                scored.append((similarity(entry["knowledge_embedding"]), len(scored), item))
        for qa in memory.short_term_memory.get_all():
            text = f"User: {qa['user_input']} Assistant: {qa['agent_response']}"
            score = round(
                float(np.dot(utils.normalize_vector(utils.get_embedding(text)), vector)), 6
            )
            scored.append((score, len(scored), _page_item(qa)))
        scored.sort(key=lambda entry: (-entry[0], entry[1]))
        items = []
        for score, _, item in scored[:k]:
            item.score = score
            items.append(item)
        profile = memory.user_long_term_memory.get_raw_user_profile(USER)
        if profile and profile.lower() != "none":
            items.append(MemoryItem("user_profile", profile, 0.0, [], ""))
        return items

    def _pages(self) -> list[dict[str, Any]]:
        folder = Path(self._folder.name) if self._folder else None
        if folder is None:
            return []
        out = []
        for name in ("short_term.json", "mid_term.json"):
            path = folder / "users" / USER / name
            if not path.exists():
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, list):
                out += data
            else:
                out += [p for s in data.get("sessions", {}).values() for p in s["details"]]
        return out

    def _knowledge_held(self) -> int:
        """Knowledge entries MemoryOS holds now (each kind keeps its latest 100)."""
        if self._folder is None:
            return 0
        folder = Path(self._folder.name)
        held = 0
        for path in (
            folder / "users" / USER / "long_term_user.json",
            folder / "assistants" / DEFAULT_ASSISTANT / "long_term_assistant.json",
        ):
            if path.exists():
                data = json.loads(path.read_text(encoding="utf-8"))
                held += sum(len(data.get(key, [])) for key in KNOWLEDGE_KEYS)
        return held

    def stats(self) -> dict[str, Any]:
        pairs = {(p.get("meta_data") or {}).get("pair") for p in self._pages()}
        knowledge = self._knowledge_held()
        return {
            "items": len(pairs) + knowledge,
            "pairs": self.pairs,
            "knowledge": knowledge,
            **self.writes(),
        }

    def stored_ids(self) -> set[str]:
        return {t for p in self._pages() for t in (p.get("meta_data") or {}).get("turn_ids", [])}


def _page_item(page: dict[str, Any]) -> MemoryItem:
    """A page or short-term pair as an item: MemoryOS's rendering, its turns and time."""
    meta = page.get("meta_data") or {}
    text = f"{page['user_input']}\n{page['agent_response']}"
    if page.get("meta_info"):
        text += f"\n(conversation: {page['meta_info']})"
    item_id = page.get("page_id") or meta.get("pair", "")
    return MemoryItem(item_id, text, 0.0, list(meta.get("turn_ids", [])), meta.get("time", ""))
