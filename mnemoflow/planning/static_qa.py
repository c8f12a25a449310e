"""The static QA chain's calls (rules ingest / answer / judge), walked as the protocol walks it.

For one (benchmark, system, step, shard):

- **answer** (exact count): one ``agent`` request per question of the shard whose checkpoint is
  the step (LongMemEval ``con_separate``: one reading note per chunk more), rendered by the reader's
  own builders (:func:`mnemoflow.agents.readers.planned_requests`) over what the memory returns.
  A memory that calls no model (``none``, ``full_context``, ``bm25_*``) is built and queried here,
  as the jobs do, so its prompts are the ones that will be sent: their cache keys are looked up.
  A memory that embeds or writes with a model cannot be built without calling it; its prompts are
  rendered over a BM25 stand-in with the same ``top_k`` (an estimate, counted as cache misses).
- **judge** (exact count): one ``judge`` request per judged answer and repeat seed, rendered by
  :func:`mnemoflow.eval.static_qa.judges.judge_request_for` over the cached answer when the cache
  holds it (then its key is looked up too), else over the gold answer as a stand-in response.
- **judge_panel** (``judge.panel``, exact count): one request per answer and panel judge, as
  ``judge`` with the judge's kind and its own gateway, counted under the role ``judge[NAME]``;
  **judge_probe** (:func:`plan_probe`): one per probe and judge, the configured one included.
- **ingest** (expected): what a memory system writes or embeds depends on its writer's replies:
  the system says how it writes (:mod:`mnemoflow.planning.writes`): ``memory_writer`` calls per
  written batch, each the size of the batch's extract-facts prompt; ``embedder`` one text per
  message, session or fact it stores; and one query embedding per question.

Large shards are sampled: at most ``sample`` questions (evenly spread over the shard's episodes,
in order) are rendered, with their episodes' memories, and the counts scaled.

Work that does not depend on the system is done once (:class:`Replays`): each episode's rows of
the session tables are found by an index, not by filtering the whole tables, and the retrievals
and rendered prompts of a memory that several systems build alike (``bm25_session`` and the BM25
stand-in of ``dense_session``) are kept until the last of those systems has read them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mnemoflow.agents.longmemeval_reader import episode_turns
from mnemoflow.agents.readers import planned_requests, reader_config
from mnemoflow.data.registry import Prepared, load_benchmark
from mnemoflow.data.tables import read_table
from mnemoflow.eval.imported import IMPORTED
from mnemoflow.eval.static_qa.judges import judge_request_for, kind_for, repeat_seeds
from mnemoflow.eval.static_qa.panel import CONFIGURED, PanelJudge, probe_set
from mnemoflow.llm.context import fits, prompt_tokens
from mnemoflow.llm.gateway import Gateway, strip_reasoning
from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.base import (
    MemoryItem,
    Message,
    build,
    resolve,
    stage_roles,
    without_labels,
)
from mnemoflow.memory.buffer import render
from mnemoflow.planning.plan import Line
from mnemoflow.planning.tokens import cached_tokens, filler, reply_tokens, sent_tokens
from mnemoflow.planning.writes import (
    fact_tokens,
    pattern_of,
    planned_writes,
    query_lines,
    window_items,
    write_lines,
)
from mnemoflow.prices import FREE_BACKENDS
from mnemoflow.protocols.static_qa import PROTOCOL, episode_batch, shard_episodes

#: Questions rendered per (benchmark, system, step, shard) at most; the rest is scaled.
SAMPLE_QUESTIONS = 100

#: A group of units that build the same memory over the same questions:
#: (benchmark, the built spec, step, shard).
Group = tuple[str, str, int, int]


class Replays:
    """The walk's work that does not depend on the system, done once.

    Each episode's rows of the session tables come from an index built once per benchmark (the
    protocol's functions filter the whole tables per call: quadratic in the benchmark). The
    retrievals and rendered prompts (with their token counts) of a group of units that build the
    same memory are kept from the group's first unit to its last (:meth:`expect` counts them,
    :meth:`done` drops the group), so a second system reading the same memory renders nothing
    again; a group of one unit keeps nothing.
    """

    def __init__(self) -> None:
        #: benchmark -> (episode -> its rows of episode_sessions, session -> its rows of sessions)
        self._index: dict[str, tuple[dict[Any, np.ndarray], dict[Any, np.ndarray]]] = {}
        self._readers: Counter[Group] = Counter()
        self._kept: dict[Group, dict[Any, Any]] = {}

    def expect(self, group: Group) -> None:
        """One more unit of the walk will read ``group``."""
        self._readers[group] += 1

    def done(self, group: Group) -> None:
        """A unit of ``group`` has read it; the last one drops what was kept."""
        self._readers[group] -= 1
        if self._readers[group] <= 0:
            self._readers.pop(group, None)
            self._kept.pop(group, None)

    def get(self, group: Group, key: Any) -> Any:
        """What an earlier unit of ``group`` kept under ``key`` (``None``: nothing)."""
        return self._kept.get(group, {}).get(key)

    def put(self, group: Group, key: Any, value: Any) -> None:
        """Keep ``value`` under ``key`` while another unit of ``group`` is to read it."""
        if self._readers[group] > 1:
            self._kept.setdefault(group, {})[key] = value

    def tables(self, benchmark: str, data: Prepared, episode: str) -> tuple[pd.DataFrame, Any]:
        """(sessions, episode_sessions) cut to ``episode``'s rows, in table order: what
        ``episode_batch`` and ``episode_turns`` select from them is what they select from the
        whole tables (the whole tables for an episode the map does not list)."""
        if data.episode_sessions is None:
            return data.sessions, data.episode_sessions
        if benchmark not in self._index:
            by_episode = data.episode_sessions.groupby("episode_id", sort=False).indices
            by_session = data.sessions.groupby("session_id", sort=False).indices
            self._index[benchmark] = (by_episode, by_session)
        by_episode, by_session = self._index[benchmark]
        if episode not in by_episode:
            return data.sessions, data.episode_sessions
        mine = data.episode_sessions.iloc[by_episode[episode]]
        rows = [by_session[s] for s in set(mine.session_id) if s in by_session]
        positions = np.sort(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)
        return data.sessions.iloc[positions], mine


@dataclass
class _Rendered:
    """A question's planned requests over one retrieval, and their token counts by backend."""

    requests: list[ChatRequest]
    counts: list[dict[tuple[str, str], int]]


def _signature(items: list[MemoryItem]) -> tuple:
    """What of the retrieved items a rendered prompt depends on."""
    return tuple((i.id, i.text, i.score, tuple(i.source_ids), i.time) for i in items)


@dataclass
class Context:
    """What every unit of the plan reads: the config, the data, the cache and observed means."""

    config: Mapping[str, Any]
    benchmarks: Mapping[str, Any]
    workdir: Path
    gateway: Gateway
    #: (role, task) and (role, None) -> mean completion tokens observed in earlier ledgers
    out_means: Mapping[tuple[str, str | None], float] = field(default_factory=dict)
    sample: int = SAMPLE_QUESTIONS
    #: only dollars matter (``budget_usd``): roles on local backends are counted, not looked up
    #: in the cache (their cache keys need the offline model's code fingerprint, slow to load)
    priced_only: bool = False
    #: keys of the requests planned so far: a second one is a cache hit
    planned: set[str] = field(default_factory=set)
    #: ``judge.panel``'s judges, each with a gateway binding its model as the judge role
    panel: list[tuple[PanelJudge, Gateway]] = field(default_factory=list)
    _data: dict[str, Prepared] = field(default_factory=dict)
    #: benchmark -> its AMemGym users (None: not known before the run)
    users: dict[str, Any] = field(default_factory=dict)
    #: benchmark -> its generation chain played offline (planning.environment.Played)
    played: dict[str, Any] = field(default_factory=dict)
    #: work shared between the units of the walk (the same object in every repeat's context)
    replays: Replays = field(default_factory=Replays)

    def prepared(self, benchmark: str) -> Prepared:
        """The benchmark's unified tables: the prepare rule's files when present, else the loader
        run in this process (it reads the source and calls no model)."""
        if benchmark not in self._data:
            folder = self.workdir / "results" / benchmark / "prepared"
            names = ("sessions", "questions", "episode_sessions")
            if all((folder / f"{n}.parquet").is_file() for n in names):
                tables = [read_table(folder / f"{n}.parquet", n) for n in names]
                self._data[benchmark] = Prepared(*tables)
            else:
                self._data[benchmark] = load_benchmark(self.benchmarks[benchmark])
        return self._data[benchmark]

    def key(self, request: ChatRequest, gateway: Gateway | None = None) -> str | None:
        """The request's cache key, unless only dollars matter and its role costs none
        (``gateway``: a panel judge's, else the run's)."""
        gateway = gateway or self.gateway
        if self.priced_only and gateway.specs[request.role].backend in FREE_BACKENDS:
            return None
        return gateway.sent_key(request)

    def tokens_out(
        self, role: str, task: str, gateway: Gateway | None = None, family: str | None = None
    ) -> float:
        """Expected completion tokens of one call (:func:`mnemoflow.planning.tokens.reply_tokens`:
        earlier ledgers' mean, else the call site's expected reply length; a panel judge, on its
        own ``gateway``: the call site's)."""
        backend = (gateway or self.gateway).specs[role].backend
        observed = None if gateway is not None else self.out_means
        return reply_tokens(role, task, backend, observed, family)


def panel_role(name: str) -> str:
    """The plan's role of a panel judge (its own binding, priced by its own model)."""
    return f"judge[{name}]"


def _stand_in(spec: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the spec to build for rendering, whether it is the system itself)."""
    if not stage_roles(spec, "ingest") and not stage_roles(spec, "query"):
        return spec, True
    params = without_labels(spec)
    cls = resolve(params.get("type") or params.get("class"))
    top_k = params.get("top_k", cls.defaults.get("top_k", 5))
    kind = "bm25_session" if cls.granularity == "session" else "bm25_message"
    return {"type": kind, "top_k": int(top_k)}, False


def group_of(ctx: Context, benchmark: str, system: str, step: int, shard: int) -> Group:
    """The group of units building the same memory as (``benchmark``, ``system``) does."""
    spec, _ = _stand_in(without_labels(ctx.config["systems"][system]))
    return (benchmark, json.dumps(spec, sort_keys=True, default=str), int(step), int(shard))


def _padded(items: list[MemoryItem], stored: list[Message], spec: dict) -> list[MemoryItem]:
    """A stand-in's hits padded to its ``top_k`` with the newest stored messages it missed (a
    dense store ranks every item, where BM25 returns only those sharing a word)."""
    if spec["type"] != "bm25_message":
        return items
    seen = {i for item in items for i in item.source_ids}
    extra = [m for m in reversed(stored) if m.turn_id not in seen]
    fill = extra[: max(0, int(spec["top_k"]) - len(items))]
    return items + [
        MemoryItem(id=m.turn_id, text=render(m), score=0.0, source_ids=[m.turn_id], time=m.time)
        for m in fill
    ]


def _sampled(questions: pd.DataFrame, limit: int) -> pd.DataFrame:
    """At most ``limit`` of ``questions``, evenly spread (by episode, then question id)."""
    ordered = questions.sort_values(["episode_id", "question_id"], kind="stable")
    if len(ordered) <= limit:
        return ordered
    step = len(ordered) / limit
    return ordered.iloc[[int(i * step) for i in range(limit)]]


class Unit:
    """One (benchmark, system, step, shard) of the chain, planned stage by stage."""

    def __init__(self, ctx: Context, benchmark: str, system: str, step: int, shard: int):
        self.ctx, self.benchmark, self.system, self.step = ctx, benchmark, system, step
        self.spec = ctx.benchmarks[benchmark]
        self.system_spec = without_labels(ctx.config["systems"][system])
        data = ctx.prepared(benchmark)
        self.data = data
        n_shards = int(self.spec.get("shards", 1))
        self.episodes = shard_episodes(data.episode_sessions.episode_id, shard, n_shards)
        questions = data.questions
        self.questions = questions[
            (questions.checkpoint == step) & questions.episode_id.isin(set(self.episodes))
        ]
        self.shard = shard
        #: (episode, step) -> the messages its memory receives, read by ingest and answer alike
        self._batches: dict[tuple[str, int], list[Message]] = {}
        #: blocks of the prompts planned so far, for the expected prefix-cache share
        self._prefix_blocks: set[str] = set()

    def line(self, role: str, task: str, **values: Any) -> Line:
        return Line(self.benchmark, self.system, PROTOCOL, role, task, **values)

    def batch(self, episode: str, step: int) -> list[Message]:
        """The messages ``episode``'s memory receives at ``step`` (found once per unit)."""
        if (episode, step) not in self._batches:
            tables = self.ctx.replays.tables(self.benchmark, self.data, episode)
            self._batches[(episode, step)] = episode_batch(*tables, episode, step)
        return self._batches[(episode, step)]

    # ---- answer and judge -------------------------------------------------------------------

    async def answer_and_judge(self, answer: bool, judge: bool, panel: bool = False) -> list[Line]:
        ctx = self.ctx
        answer = answer and self.system_spec.get("type") != IMPORTED  # read from a file
        build_spec, itself = _stand_in(self.system_spec)
        name, options = reader_config(self.spec.get("reader", "generic"))
        use_options = bool(self.spec.get("use_options", False))
        kind = kind_for(self.spec)
        judge_cfg = ctx.config.get("judge", {}) or {}
        seeds = repeat_seeds(int(judge_cfg.get("repeats", 1)), int(judge_cfg.get("seed", 0)))
        sampled = _sampled(self.questions, ctx.sample)
        chosen = [e for e in self.episodes if e in set(sampled.episode_id)]
        scale = len(self.questions) / len(sampled) if len(sampled) else 0.0
        lines: dict[tuple[str, str], Line] = {}
        replays = ctx.replays
        group = group_of(ctx, self.benchmark, self.system, self.step, self.shard)
        for episode in chosen:
            questions = sampled[sampled.episode_id == episode].to_dict("records")
            asked = ("retrieved", episode, tuple(str(q["question_id"]) for q in questions))
            found = replays.get(group, asked)
            added: list[Message] = []
            if found is None or not itself:  # a stand-in pads with what it stored
                memory = None
                if found is None:
                    memory = build(build_spec, llm=None, seed=int(ctx.config.get("seed", 0)))
                for k in range(self.step + 1):
                    batch = self.batch(episode, k)
                    if memory is not None:
                        await memory.add(batch, {"step": k})
                    added += [m for m in batch if m.content.strip()]
                if memory is not None:
                    found = [await memory.retrieve(q["question"]) for q in questions]
                    replays.put(group, asked, found)
            # a buffered system's retrieval returns its local window after the store's hits
            window = [] if itself else window_items(self.system_spec, added)
            turns = None
            for question, hits in zip(questions, found, strict=True):
                items = hits
                if not itself:  # a dense store always returns its top_k: pad the lexical hits
                    items = _padded(items, added[: len(added) - len(window)], build_spec) + window
                shown = ("rendered", str(question["question_id"]), _signature(items))
                rendered = replays.get(group, shown)
                if rendered is None:
                    if turns is None and name != "generic":
                        tables = replays.tables(self.benchmark, self.data, episode)
                        turns = episode_turns(*tables, episode)
                    requests = planned_requests(name, options, question, items, turns, use_options)
                    rendered = _Rendered(requests, [{} for _ in requests])
                    replays.put(group, shown, rendered)
                response = None
                for request, counts in zip(rendered.requests, rendered.counts, strict=True):
                    key = ctx.key(request) if itself else None
                    known, text = self._count(lines, request, scale, key, add=answer, counts=counts)
                    if request.task == "answer":
                        response = text if known else None
                if judge:
                    stand_in = response is None
                    request = judge_request_for(kind, question, response or str(question["answer"]))
                    for seed in seeds if request is not None else ():
                        request.seed = seed
                        # over the gold: a question asked again with the same gold answer is
                        # expected to get the same answer, so the same judge prompt (a hit)
                        key = ctx.key(request)
                        self._count(lines, request, scale, key, cached=not stand_in)
                for judge_of, gateway in ctx.panel if panel else ():
                    request = judge_request_for(
                        judge_of.kind, question, response or str(question["answer"])
                    )
                    if request is not None:
                        key = ctx.key(request, gateway)
                        role = panel_role(judge_of.name)
                        self._count(lines, request, scale, key, cached=response is not None,
                                    gateway=gateway, role=role)  # fmt: skip
        if answer and "embedder" in stage_roles(self.system_spec, "query"):
            texts = [str(q) for q in self.questions.question]
            backends = [ctx.gateway.specs[r].backend for r in ("embedder", "memory_writer")]
            pattern = pattern_of(self.system_spec)[0]
            for each in query_lines(pattern, texts, self.line, ctx.tokens_out, *backends):
                lines[(each.role, each.task)] = each
        replays.done(group)
        out = list(lines.values())
        for line in out:
            if not itself and line.role == "agent":
                line.notes.append(f"prompts over a {build_spec['type']} stand-in retrieval")
            if line.role.startswith("judge") and line.rendered < line.calls:
                line.notes.append(
                    "judge prompts over the gold answer where no answer is cached (a question "
                    "asked again with the same gold is expected to be judged from the cache)"
                )
            if len(sampled) < len(self.questions):
                line.notes.append(
                    f"{len(sampled)} of {len(self.questions)} questions rendered, scaled"
                )
        return out

    def _count(
        self,
        lines: dict[tuple[str, str], Line],
        request: ChatRequest,
        scale: float,
        key: str | None,
        add: bool = True,
        cached: bool = True,
        gateway: Gateway | None = None,
        role: str | None = None,
        counts: dict[tuple[str, str], int] | None = None,
    ) -> tuple[bool, str | None]:
        """Count one request (scaled); (whether the cache holds its reply, the reply's text).

        ``key``: the request's cache key when its prompt is the one that will be sent (else
        ``None``: estimated, a miss); ``cached``: whether to look the key up in the cache (a key
        that only stands for a prompt is not). A key planned before is a hit: the run asks it
        once and finds the reply in the cache from then on, as its ledgers count. ``gateway``
        and ``role``: a panel judge's gateway and its line's role (:func:`panel_role`);
        ``counts``: the request's token counts by backend, counted here when missing (a request
        another unit renders alike is counted once).
        """
        own = gateway
        gateway = gateway or self.ctx.gateway
        spec = gateway.specs[request.role]
        found = gateway.cache.get(key) if key is not None and cached else None
        text = None
        if found is not None:
            text = strip_reasoning(found.text) if spec.strip_reasoning else found.text
        if add:
            role = role or request.role
            line = lines.setdefault((role, request.task), self.line(role, request.task))
            counts = {} if counts is None else counts
            prompt = ("prompt", spec.backend)
            if prompt not in counts:
                counts[prompt] = prompt_tokens(request.messages, spec.backend)
            needed, window = fits(request, spec, counts[prompt])
            line.calls += scale
            line.rendered += scale if key is not None and cached else 0.0
            line.overflows += scale if window is not None and needed > window else 0.0
            # a stand-in prompt repeats only within its system (another memory answers otherwise)
            seen = key if cached or key is None else f"{self.benchmark}/{self.system}/{key}"
            hit = found is not None or seen in self.ctx.planned
            if seen is not None:
                self.ctx.planned.add(seen)
            if hit:
                line.cache_hits += scale
            else:
                sent = ("sent", spec.backend)
                if sent not in counts:
                    counts[sent] = sent_tokens(request.messages, spec.backend)
                tokens = counts[sent]
                line.tokens_in += scale * tokens
                line.tokens_out += scale * self.ctx.tokens_out(request.role, request.task, own)
                cached = cached_tokens(request.messages, tokens, spec.backend, self._prefix_blocks)
                line.cached_in += scale * cached
        return found is not None, text

    # ---- ingest -----------------------------------------------------------------------------

    def ingest(self) -> list[Line]:
        roles = stage_roles(self.system_spec, "ingest")
        if not roles:
            return []
        streams = []
        for episode in self.episodes:
            steps = [
                [m for m in self.batch(episode, k) if m.content.strip()]
                for k in range(self.step + 1)
            ]
            before = sum(len(each) for each in steps[:-1])
            streams.append(([m for each in steps for m in each], before))
        backend = self.ctx.gateway.specs["memory_writer"].backend
        fact = fact_tokens(pattern_of(self.system_spec)[0], self.ctx.tokens_out)
        writes = planned_writes(self.system_spec, streams, backend, filler(fact or 1, backend))
        embed_backend = self.ctx.gateway.specs["embedder"].backend
        return write_lines(writes, self.line, self.ctx.tokens_out, roles, embed_backend)


def plan_probe(ctx: Context, benchmark: str, size: int, seed: int) -> list[Line]:
    """The false-positive probe of ``benchmark`` (rule judge_probe): its probes, built as the
    job builds them, each judged by the configured judge and every panel judge (exact count;
    prompts rendered, their cache keys looked up)."""
    data = ctx.prepared(benchmark)
    configured = PanelJudge(CONFIGURED, kind_for(ctx.benchmarks[benchmark]), {})
    judges = [
        (configured, ctx.gateway, "judge"),
        *((j, g, panel_role(j.name)) for j, g in ctx.panel),
    ]
    probes = probe_set(data.questions, data.sessions, [j.kind for j, _, _ in judges], size, seed)
    by_id = {q["question_id"]: q for q in data.questions.to_dict("records")}
    lines: dict[tuple[str, str], Line] = {}
    for judge, gateway, role in judges:
        for probe in probes.to_dict("records"):
            request = judge_request_for(judge.kind, by_id[probe["question_id"]], probe["response"])
            if request is None:
                continue
            spec = gateway.specs["judge"]
            line = lines.setdefault(
                (role, request.task), Line(benchmark, "probe", PROTOCOL, role, request.task)
            )
            key = ctx.key(request, gateway)
            found = gateway.cache.get(key) if key is not None else None
            needed, window = fits(request, spec)
            line.calls += 1
            line.rendered += 1 if key is not None else 0
            line.overflows += 1 if window is not None and needed > window else 0
            if found is not None or (key is not None and key in ctx.planned):
                line.cache_hits += 1
            else:
                line.tokens_in += sent_tokens(request.messages, spec.backend)
                own = None if role == "judge" else gateway  # the configured judge: observed means
                line.tokens_out += ctx.tokens_out("judge", request.task, own)
            if key is not None:
                ctx.planned.add(key)
    return list(lines.values())
