"""Tiered short / mid / long-term memory [MemoryOS-style].

- Short-term: a queue of the ``short_capacity`` most recent dialogue pages (a page is two
  consecutive messages of a session, usually a user turn and its reply). Always in context.
- Mid-term: pages pushed out of the queue, grouped into segments by session, each page embedded.
  A segment's heat is ``alpha * visits + beta * pages + gamma * recency`` as in MemoryOS, where
  visits counts how often retrieval used the segment and recency is ``exp(-age / recency_tau)``.
  Departure: age is counted in pages written since the segment last changed (a logical clock),
  not wall-clock seconds, because benchmark timestamps come in many formats and replays must not
  depend on when they run. Segments beyond ``mid_capacity`` are evicted coldest first.
- Long-term: when a segment's heat reaches ``heat_threshold`` its new pages go to the
  ``memory_writer``, which updates a key -> value user profile / knowledge store (same contract as
  ``agentic_incontext``); the segment's visits and pending pages then reset, as in MemoryOS.

Retrieval draws from all tiers: the ``profile_k`` profile entries and ``top_k`` mid-term pages most
similar to the query, then the short-term queue. Retrieval bumps the visits of the segments it used.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

from mnemoflow.memory import writer
from mnemoflow.memory.base import MemoryItem, MemorySystem, Message, register
from mnemoflow.memory.buffer import render
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.tokens import count_tokens
from mnemoflow.memory.vector_store import StoredItem, VectorStore, embed


def _page_item(page: list[Message], score: float = 0.0, prefix: str = "") -> MemoryItem:
    return MemoryItem(
        id=prefix + page[0].turn_id,
        text="\n".join(render(m) for m in page),
        score=score,
        source_ids=[m.turn_id for m in page],
        time=page[-1].time,
    )


def _to_dict(message: Message) -> dict[str, Any]:
    return message.__dict__.copy()


@register
class Tiered(MemorySystem):
    """Short-term page queue, heat-scored mid-term segments, long-term profile."""

    name: ClassVar[str] = "tiered"
    #: Everything but the retrieval sizes shapes what is stored, promoted or evicted.
    ingest_params: ClassVar[frozenset[str]] = frozenset(
        ("short_capacity", "mid_capacity", "heat_threshold")
        + ("alpha", "beta", "gamma", "recency_tau")
    )
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)
    defaults, params_schema = declare_params(
        short_capacity=Param(10, "integer", minimum=0),
        mid_capacity=Param(200, "integer", minimum=1),
        top_k=Param(5, "integer", minimum=0),
        profile_k=Param(10, "integer", minimum=0),
        heat_threshold=Param(4.0, "number"),
        alpha=Param(1.0, "number", minimum=0),
        beta=Param(1.0, "number", minimum=0),
        gamma=Param(1.0, "number", minimum=0),
        recency_tau=Param(50.0, "number", exclusiveMinimum=0),
    )

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        super().__init__(params, llm, seed)
        self.writer = writer.WriterClient(llm)
        self.pending: list[Message] = []  # an unfinished page
        self.short: list[list[Message]] = []
        self.mid = VectorStore()  # one row per page: id = first turn id, extra.segment
        self.pages: dict[str, list[Message]] = {}  # page id -> messages (mid-term)
        # segment id -> {"pages": [ids], "visits", "touched" (clock), "unpromoted": [ids]}
        self.segments: dict[str, dict[str, Any]] = {}
        self.profile = VectorStore()  # id = "profile:" + key
        self.clock = 0
        self.tokens_written = 0
        self.promotions = 0

    # --- writing ------------------------------------------------------------------------------

    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        overflow: list[list[Message]] = []
        for m in messages:
            if not m.content.strip():
                continue
            if self.pending and self.pending[0].session_id != m.session_id:
                self._close_page(overflow)
            self.pending.append(m)
            if len(self.pending) == 2:
                self._close_page(overflow)
        if overflow:
            await self._to_mid(overflow)

    def _close_page(self, overflow: list[list[Message]]) -> None:
        self.short.append(self.pending)
        self.pending = []
        while len(self.short) > self.params["short_capacity"]:
            overflow.append(self.short.pop(0))

    async def _to_mid(self, pages: list[list[Message]]) -> None:
        vectors = await embed(self.llm, ["\n".join(render(m) for m in page) for page in pages])
        for page, vector in zip(pages, vectors, strict=True):
            pid, sid = page[0].turn_id, page[0].session_id
            self.clock += 1
            self.pages[pid] = page
            self.mid.add([StoredItem(id=pid, text="", extra={"segment": sid})], vector[None, :])
            segment = self.segments.setdefault(
                sid, {"pages": [], "visits": 0, "touched": self.clock, "unpromoted": []}
            )
            segment["pages"].append(pid)
            segment["unpromoted"].append(pid)
            segment["touched"] = self.clock
        for sid in sorted(self.segments, key=lambda s: self.segments[s]["touched"]):
            segment = self.segments[sid]
            if segment["unpromoted"] and self.heat(sid) >= self.params["heat_threshold"]:
                await self._promote(sid)
        self._evict()

    def heat(self, segment_id: str) -> float:
        segment = self.segments[segment_id]
        recency = math.exp(-(self.clock - segment["touched"]) / self.params["recency_tau"])
        return (
            self.params["alpha"] * segment["visits"]
            + self.params["beta"] * len(segment["unpromoted"])
            + self.params["gamma"] * recency
        )

    async def _promote(self, segment_id: str) -> None:
        segment = self.segments[segment_id]
        batch = [m for pid in segment["unpromoted"] for m in self.pages[pid]]
        shown = [
            {"key": i.extra["key"], "value": i.extra["value"], "time": i.time}
            for i in self.profile.items
        ]
        reply = await self.writer.ask(
            writer.kv_update_request(shown, batch), lambda d: writer.parse_kv(d, len(batch))
        )
        segment["visits"] = 0
        segment["unpromoted"] = []
        self.promotions += 1
        if reply is None:
            return
        sets, deletes = reply
        for key in deletes:
            if f"profile:{key}" in self.profile:
                self.profile.remove(f"profile:{key}")
        texts = [f"{key}: {value}" for key, value, _ in sets]
        vectors = await embed(self.llm, texts)
        for (key, value, numbers), text, vector in zip(sets, texts, vectors, strict=True):
            origin = [batch[n - 1] for n in numbers] or batch
            item = StoredItem(
                id=f"profile:{key}",
                text=text,
                source_ids=[m.turn_id for m in origin],
                time=max(m.time for m in origin),
                extra={"key": key, "value": value},
            )
            if item.id in self.profile:  # the newer value wins; move to the end
                self.profile.remove(item.id)
            self.profile.add([item], vector[None, :])
            self.tokens_written += count_tokens(text)

    def _evict(self) -> None:
        while len(self.segments) > self.params["mid_capacity"]:
            coldest = min(self.segments, key=lambda s: (self.heat(s), self.segments[s]["touched"]))
            for pid in self.segments.pop(coldest)["pages"]:
                self.mid.remove(pid)
                del self.pages[pid]

    # --- reading ------------------------------------------------------------------------------

    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        k = self.params["top_k"] if k is None else k
        out: list[MemoryItem] = []
        if len(self.mid) or len(self.profile):
            qvec = await embed(self.llm, [query])
            for item, score in self.profile.search(qvec, self.params["profile_k"]):
                out.append(MemoryItem(item.id, item.text, score, list(item.source_ids), item.time))
            used: list[str] = []
            for row, score in self.mid.search(qvec, k):
                out.append(_page_item(self.pages[row.id], score, prefix="mid:"))
                if row.extra["segment"] not in used:
                    used.append(row.extra["segment"])
            for sid in used:
                self.segments[sid]["visits"] += 1
        for page in self.short + ([self.pending] if self.pending else []):
            out.append(_page_item(page, prefix="short:"))
        return out

    # --- snapshots ----------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        self.mid.save(directory, "mid")
        self.profile.save(directory, "profile")
        state = {
            "pending": [_to_dict(m) for m in self.pending],
            "short": [[_to_dict(m) for m in page] for page in self.short],
            "pages": {pid: [_to_dict(m) for m in page] for pid, page in self.pages.items()},
            "segments": self.segments,
            "clock": self.clock,
            "tokens_written": self.tokens_written,
            "promotions": self.promotions,
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
        }
        (directory / "state.json").write_text(json.dumps(state, ensure_ascii=False))

    def load(self, directory: Path) -> None:
        self.mid.load(directory, "mid")
        self.profile.load(directory, "profile")
        state = json.loads((directory / "state.json").read_text())
        self.pending = [Message(**m) for m in state["pending"]]
        self.short = [[Message(**m) for m in page] for page in state["short"]]
        self.pages = {pid: [Message(**m) for m in page] for pid, page in state["pages"].items()}
        self.segments = state["segments"]
        self.clock = state["clock"]
        self.tokens_written = state["tokens_written"]
        self.promotions = state["promotions"]
        self.writer.calls = state["writer_calls"]
        self.writer.parse_failures = state["parse_failures"]

    def stored_ids(self) -> set[str] | None:
        held = {m.turn_id for m in self.pending}
        held |= {m.turn_id for page in self.short for m in page}
        held |= {m.turn_id for page in self.pages.values() for m in page}
        return held | self.mid.source_ids() | self.profile.source_ids()

    def stats(self) -> dict[str, Any]:
        return {
            "items": len(self.profile) + len(self.mid) + len(self.short),
            "short_pages": len(self.short),
            "mid_pages": len(self.mid),
            "mid_segments": len(self.segments),
            "profile_entries": len(self.profile),
            "promotions": self.promotions,
            "tokens_written": self.tokens_written,
            "writer_calls": self.writer.calls,
            "parse_failures": self.writer.parse_failures,
        }
