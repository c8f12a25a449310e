"""MemoryBench's four learning-from-feedback protocols as step chains (memorybench.md §3).

Every protocol is a chain of memory snapshots; step k's memory is step k-1's plus what step k adds,
and the whole test split (train split for ``train_performance``) is answered at every step:

- ``off_policy`` (one step): all training dialogues of the set, shuffled with the seed (42), in one
  memory ("set"); a corpus dataset's questions are answered from a memory of its own corpus plus
  the dialogues (episode = the dataset name).
- ``stepwise_off_policy``: step 0 ("begin") holds every corpus of the set; step k adds the k-th
  batch of ``batch_size`` shuffled training dialogues.
- ``on_policy``: step 0 holds the corpora; step k samples ``batch_size`` training items (one RNG
  seeded once, as the reference's global ``random``: no repeats within a step, repeats across
  steps), the agent converses live with the simulated user using its step k-1 memory, and the new
  dialogues are memorized on top of snapshot k-1. Up to ``max_rounds - 1`` feedback rounds (the
  reference's for/else bug, one feedback at most, is not copied).
- ``train_performance``: the off-policy memory, asked the training split.

Memory granularity follows the reference: each dialogue turn is stored as "Speaker {role} says:
{content}", one dialogue = one session (session-level systems return whole dialogues). Answers use
the reference's prompt ("Context: ... User: ...", zh variant), the query is the last user message
and ``retrieve_k`` (5) items are shown: a buffered system's local window is left out unless
``show_window`` (the reference has none). A memory system that returns nothing gets the plain
prompt.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from mnemoflow.data.memorybench import dialogues_for, parse_set
from mnemoflow.data.tables import ANSWERS, DIALOGUES, JUDGEMENTS, QUESTION_SCORES, SCORES
from mnemoflow.errors import ConfigError, reject_unknown
from mnemoflow.eval.benchmark_metric import metric_for
from mnemoflow.eval.memorybench.normalize import normalize_set
from mnemoflow.llm.context import scoped
from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.base import MemorySystem, Message
from mnemoflow.memory.buffer import is_window
from mnemoflow.protocols.conversation import Turn, converse, dialogue_rows
from mnemoflow.protocols.registry import register_protocol
from mnemoflow.protocols.snapshot import MANIFEST, publishing, save_episode, write_manifest
from mnemoflow.protocols.static_qa import bounded, episode_dirname, to_messages
from mnemoflow.protocols.step import StepContext
from mnemoflow.simulators.feedback import UNPARSED, FeedbackSimulator

PROTOCOLS = ("off_policy", "stepwise_off_policy", "on_policy", "train_performance")
#: The memory every protocol builds for the whole set (corpus datasets add their own in off-policy).
SET_EPISODE = "set"
#: The mean per-item value (``item_value`` of the metric module): a run's headline number.
MAIN_METRIC = "item_value"
#: Items conversed / questions answered at once; the gateway limits model concurrency per role.
ITEM_CONCURRENCY = 64

T = TypeVar("T")


#: The error of a config that still sets the old switch (the gateway decides for every role now);
#: the one text, read by ``config_schema.check_moved`` too (with the benchmark named).
MOVED_STRUCTURED_OUTPUT = (
    "config benchmarks.<name>.feedback.structured_output: removed; set "
    "models.user.structured_output (auto | on | off) instead"
)


#: Where a set's training dialogues come from (``feedback.dialogues``; the config schema's choices).
DIALOGUE_SOURCES = ("data", "generated")


@dataclass(frozen=True)
class FeedbackConfig:
    """A benchmark's ``feedback:`` block (defaults = the reference's)."""

    dialogues: str = "generated"  # "data" (the release's pre-generated dialogues) | "generated"
    batch_size: int = 100
    max_rounds: int = 3
    retrieve_k: int = 5
    seed: int = 42
    on_policy_steps: int = 10
    train_items: int | None = None  # training items of the set, for stepwise's step count
    #: Show a buffered system's local window (rag, agentic_*) after the ``retrieve_k`` items.
    #: MemoryBench's agent has no local window (its memories are queried, nothing else is in the
    #: prompt), so by default retrieval shows exactly the retrieved items; AMemGym keeps it.
    show_window: bool = False

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> FeedbackConfig:
        raw = dict(spec.get("feedback") or {})
        if "structured_output" in raw:
            raise ConfigError(MOVED_STRUCTURED_OUTPUT)
        reject_unknown(raw, (f.name for f in fields(cls)), "config benchmarks.<name>.feedback")
        if raw.get("dialogues", "generated") not in DIALOGUE_SOURCES:
            raise ConfigError(
                "config benchmarks.<name>.feedback.dialogues: "
                f"{' or '.join(map(repr, DIALOGUE_SOURCES))}, got {raw['dialogues']!r}"
            )
        for key in ("batch_size", "max_rounds", "on_policy_steps"):
            if key in raw and (not isinstance(raw[key], int) or raw[key] < 1):
                raise ConfigError(
                    f"config benchmarks.<name>.feedback.{key}: a positive integer, got {raw[key]!r}"
                )
        return cls(**raw)

    @staticmethod
    def stage_fields(stage: str, protocol: str = "", step: int = 0) -> tuple[str, ...]:
        """The settings a stage reads, as a memory system declares its ingest-time parameters:
        the rules pass only these, so editing another (a ``batch_size`` edit, say) re-runs
        nothing that does not read it. ``stage``: ``train_dialogues``, ``step`` (one step of
        ``protocol``) or ``train_performance``."""
        if stage == "train_dialogues":
            return ("max_rounds", "retrieve_k", "show_window")
        if stage == "train_performance":
            return ("retrieve_k", "show_window")
        if stage != "step":
            raise ValueError(
                f"feedback stage {stage!r}: train_dialogues, step or train_performance"
            )
        names = ["seed", "retrieve_k", "show_window"]
        if step > 0 and protocol in ("stepwise_off_policy", "on_policy"):
            names.append("batch_size")
        if step > 0 and protocol == "stepwise_off_policy":  # checked: no dialogue left out
            names.append("train_items")
        if is_live(protocol, step):
            names.append("max_rounds")
        return tuple(names)


def stage_settings(spec: dict[str, Any], stage: str, protocol: str = "", step: int = 0):
    """The benchmark's ``feedback:`` values a stage reads (:meth:`FeedbackConfig.stage_fields`)."""
    given = spec.get("feedback") or {}
    return {k: given[k] for k in FeedbackConfig.stage_fields(stage, protocol, step) if k in given}


#: The roles that answer, memorize and score at every stage.
SCORING_ROLES = ("agent", "judge", "memory_writer", "embedder")


def stage_roles(
    spec: dict[str, Any], stage: str, protocol: str = "", step: int = 0, bound: tuple = ()
) -> tuple[str, ...]:
    """The roles a stage calls, whose bindings its job gets: none when the training dialogues are
    the release's; the simulated user where dialogues are generated live; WritingBench's critic
    where ``bound`` (the config's bound roles) has it — left out, it takes the judge's binding."""
    if stage == "train_dialogues":
        generated = dialogue_source(spec) == "generated"
        return ("agent", "user", "judge", "memory_writer", "embedder") if generated else ()
    user = ("user",) if stage == "step" and is_live(protocol, step) else ()
    critic = ("critic",) if "critic" in bound else ()
    return (*user, *SCORING_ROLES, *critic)


def replays_recorded(protocol: str) -> bool:
    """Whether a protocol's steps memorize the recorded training dialogues (on-policy converses
    its own, live)."""
    return protocol != "on_policy"


def is_live(protocol: str, step: int) -> bool:
    """On-policy steps after 0 converse live; every other step replays recorded dialogues."""
    return not replays_recorded(protocol) and step > 0


def built_protocol(protocol: str) -> str:
    """The protocol whose memory a protocol's steps read: ``train_performance`` asks the
    off-policy memory the training split and builds none of its own."""
    return "off_policy" if protocol == "train_performance" else protocol


def dialogue_source(spec: dict[str, Any]) -> str:
    """Where the training dialogues come from: ``data`` (the release's) or ``generated``."""
    return FeedbackConfig.from_spec(spec).dialogues


def train_items(spec: dict[str, Any]) -> int:
    """How many training items the set has, known before the data is prepared."""
    config = FeedbackConfig.from_spec(spec)
    if config.train_items is not None:
        return int(config.train_items)
    if spec.get("loader") == "synthetic_feedback":
        return int((spec.get("params") or {}).get("items", 16))
    raise ConfigError(
        "config benchmarks.<name>.feedback.train_items: needed by stepwise_off_policy "
        "(its steps = 1 + ceil(train_items / batch_size)); give the set's number of training items"
    )


def stepwise_steps(spec: dict[str, Any]) -> int:
    return 1 + math.ceil(train_items(spec) / FeedbackConfig.from_spec(spec).batch_size)


register_protocol("off_policy", steps=lambda spec: 1)
register_protocol("train_performance", steps=lambda spec: 1)
register_protocol("stepwise_off_policy", steps=stepwise_steps)
register_protocol(
    "on_policy", steps=lambda spec: 1 + FeedbackConfig.from_spec(spec).on_policy_steps
)


# ---- scoring: one entry point per benchmark family ----------------------------------------------


def metrics_module(loader: str, scoring: str = "paper") -> Any:
    """The metric module of a benchmark: ``evaluate_item``, ``item_value``, ``check_supported``
    (MemoryBench's ``scoring``: ``paper`` or ``judge``, docs/memorybench.md)."""
    spec = {"loader": loader} if scoring == "paper" else {"loader": loader, "scoring": scoring}
    return metric_for(spec).item_metrics()


def item_value(metrics: Any, dataset: str, scores: list[Any]) -> float:
    if hasattr(metrics, "item_value"):
        return float(metrics.item_value(dataset, scores))
    return float(scores[0].value)


def evaluator(metrics: Any, gateway: Any) -> Callable[[dict[str, Any], str], Awaitable[float]]:
    """The rule-based simulator's scorer: the dataset's own metric value of a reply."""

    async def evaluate(question: dict[str, Any], response: str) -> float:
        value = (await metrics.evaluate_item(question, response, gateway)).value
        return float(value) if value is not None else 0.0

    return evaluate


# ---- the agent ----------------------------------------------------------------------------------

CONTEXT_PROMPT = {
    "en": "Context:\n{docs}\n\nUser: \n{query}\n\n"
    "Based on the context provided, respond naturally and appropriately to the user's input above.",
    "zh": "相关知识：\n{docs}\n\n用户输入：\n{query}\n\n"
    "请根据提供的相关知识准确、自然地回答用户的输入。",
}


def answer_prompt(query: str, docs: list[str], lang: str) -> str:
    """The reference's memory-augmented prompt; the plain query when nothing was retrieved."""
    if not docs:
        return query
    template = CONTEXT_PROMPT["zh" if lang == "zh" else "en"]
    return template.format(docs="\n".join(docs), query=query)


class MemoryAssistant:
    """The agent under test: retrieves with the last user message and answers through the gateway.

    It sees the conversation and its memory only, never the item's gold or evaluation context.
    ``every_round`` False: retrieval in round 0 only (the reference's dialogue generation).
    ``show_window`` False (MemoryBench's default): a buffered system's local window (the last
    messages not yet written) is left out, so the prompt shows the ``retrieve_k`` retrieved items.
    """

    def __init__(
        self,
        memory: MemorySystem | None,
        gateway: Any,
        lang: str = "en",
        retrieve_k: int = 5,
        every_round: bool = True,
        show_window: bool = False,
    ):
        self.memory, self.gateway, self.lang = memory, gateway, lang
        self.retrieve_k, self.every_round = retrieve_k, every_round
        self.show_window = show_window
        self.last_shown: list[str] = []
        self.last_reply: Any = None

    async def act(self, history: list[Turn]) -> str:
        query = history[-1].content
        first_round = sum(t.role == "assistant" for t in history) == 0
        items = []
        if self.memory is not None and (first_round or self.every_round):
            items = await self.memory.retrieve(query, self.retrieve_k)
            if not self.show_window:
                items = [item for item in items if not is_window(item)]
        docs = [item.text for item in items]
        messages = [{"role": t.role, "content": t.content} for t in history]
        messages[-1]["content"] = answer_prompt(query, docs, self.lang)
        later_user = [t.content for t in history[1:] if t.role == "user"]
        request = ChatRequest(
            role="agent",
            task="answer",
            messages=messages,
            fields={"question": history[0].content, "context": docs + later_user, "options": []},
        )
        reply = await self.gateway.chat(request)
        self.last_shown = list(dict.fromkeys(s for item in items for s in item.source_ids))
        self.last_reply = reply
        return reply.text


# ---- dialogues -> memory ------------------------------------------------------------------------


def dialogue_messages(rows: pd.DataFrame, prefix: str = "") -> list[Message]:
    """Dialogue rows (in order) as memory messages: one session per dialogue, each turn
    "Speaker {role} says: ...".

    Left out: unparsed and empty user turns (nothing to remember) and the user turn that ends the
    dialogue (``terminated``, e.g. "Great! That's correct. Thank you..."): the reference breaks
    before appending it, so the release's dialogues never hold its text (the loader keeps it as an
    empty row for the rates). Skipping it here gives a generated dialogue the same memory as the
    released one of the same conversation; the ``dialogues`` table still holds the turn."""
    messages = []
    counter: dict[str, int] = {}
    for row in rows.itertuples(index=False):
        if row.implicit_action == UNPARSED or not str(row.content).strip():
            continue
        if row.role == "user" and bool(row.terminated):
            continue
        session = f"{prefix}{row.dialogue_id}"
        index = counter.get(session, 0)
        counter[session] = index + 1
        messages.append(
            Message(
                turn_id=f"{session}:{index}",
                session_id=session,
                role=row.role,
                content=f"Speaker {row.role} says: {row.content}",
                speaker=row.role,
            )
        )
    return messages


def corpus_datasets(questions: pd.DataFrame, sessions: pd.DataFrame) -> list[str]:
    """Datasets with a corpus (sessions whose episode is the dataset), in question order."""
    having = set(sessions["episode_id"]) if not sessions.empty else set()
    return [d for d in dict.fromkeys(questions["dataset"]) if d in having]


def corpus_messages(sessions: pd.DataFrame, dataset: str) -> list[Message]:
    turns = sessions[sessions["episode_id"] == dataset]
    return to_messages(turns.sort_values(["session_index", "turn_index"], kind="stable"))


def shuffled_dialogue_ids(train: pd.DataFrame, seed: int) -> list[str]:
    """Training dialogue ids in the table's order (the set's training items in question order:
    datasets in registry order, rows as released), shuffled once with ``seed`` (the reference's
    ``random.seed(42); random.shuffle`` of its training list)."""
    ids = list(dict.fromkeys(train["dialogue_id"]))
    random.Random(seed).shuffle(ids)
    return ids


def on_policy_sample(n_items: int, batch_size: int, step: int, seed: int) -> list[int]:
    """Training item indices of on-policy step ``step`` (1-based): the ``step``-th draw of one RNG
    seeded once, so steps are reproducible independently of each other."""
    rng = random.Random(seed)
    sample: list[int] = []
    for _ in range(step):
        sample = rng.sample(range(n_items), min(batch_size, n_items))
    return sample


def _meta(question: dict[str, Any]) -> dict[str, Any]:
    meta = question.get("meta") or "{}"
    return json.loads(meta) if isinstance(meta, str) else dict(meta)


def _item_label(item: dict[str, Any]) -> str:
    """How a dataset item is named in errors and the ledger's ``truncated_items``."""
    return f"{item.get('dataset', '')} item {item['question_id']}".strip()


async def live_dialogues(
    items: list[dict[str, Any]],
    memory_of: Callable[[dict[str, Any]], MemorySystem | None],
    ctx: StepContext,
    config: FeedbackConfig,
    metrics: Any,
    every_round: bool,
) -> pd.DataFrame:
    """Converse every training item with the simulated user (concurrently); DIALOGUES rows
    labelled with the context's keys."""
    gateway = ctx.gateway
    evaluate = evaluator(metrics, gateway)

    async def one(item: dict[str, Any]) -> list[dict[str, Any]]:
        lang = str(item.get("lang") or "en")
        assistant = MemoryAssistant(
            memory_of(item),
            gateway,
            lang,
            config.retrieve_k,
            every_round=every_round,
            show_window=config.show_window,
        )
        user = metrics.simulated_user(str(item.get("dataset", "")))
        simulator = FeedbackSimulator(item, gateway, evaluate, user)
        turns = await converse(assistant, simulator, item["question"], config.max_rounds)
        ctx.tick(None)
        return dialogue_rows(
            turns,
            **ctx.keys,
            episode_id=item["episode_id"],
            dialogue_id=item["question_id"],
            source="generated",
        )

    groups = await bounded(items, scoped(one, _item_label), ITEM_CONCURRENCY)
    return pd.DataFrame([r for g in groups for r in g], columns=DIALOGUES.names)


def _empty_dialogues() -> pd.DataFrame:
    return pd.DataFrame(columns=DIALOGUES.names)


def data_dialogues(
    dialogues: pd.DataFrame, questions: pd.DataFrame, system_type: str, keys: dict[str, Any]
) -> pd.DataFrame:
    """The release's pre-generated dialogues of the training items (source "data"); a corpus
    dataset's are the ones generated for the memory system's MemoryBench counterpart
    (``data.memorybench.dialogues_for``)."""
    train_ids = set(questions.loc[questions["split"] == "train", "question_id"])
    mine = dialogues_for(dialogues, system_type)
    mine = mine[mine["dialogue_id"].isin(train_ids)].copy()
    for name, value in keys.items():
        mine[name] = value
    mine["source"] = "data"
    return mine[DIALOGUES.names].reset_index(drop=True)


# ---- snapshots ----------------------------------------------------------------------------------


def save_snapshot(
    memories: dict[str, MemorySystem], held: dict[str, list[str]], out_dir: Path, step: int
) -> dict[str, Any]:
    """Write every episode's memory and a manifest (what each holds) atomically into ``out_dir``."""
    with publishing(out_dir) as staging:
        for name, memory in memories.items():
            save_episode(staging, episode_dirname(name), memory)
        manifest = {
            "step": step,
            "episodes": {name: episode_dirname(name) for name in memories},
            "holds": held,
            "stats": {name: memory.stats() for name, memory in memories.items()},
        }
        write_manifest(staging, manifest)
    return manifest


def read_manifest(snapshot: Path) -> dict[str, Any]:
    return json.loads((Path(snapshot) / MANIFEST).read_text(encoding="utf-8"))


def load_snapshot(
    snapshot: Path, ctx: StepContext
) -> tuple[dict[str, MemorySystem], dict[str, list[str]]]:
    """Every memory of a step's snapshot (the context's system) and what each holds."""
    manifest = read_manifest(snapshot)
    memories = {
        name: ctx.load(Path(snapshot) / dirname) for name, dirname in manifest["episodes"].items()
    }
    return memories, {k: list(v) for k, v in manifest["holds"].items()}


# ---- the step chain -----------------------------------------------------------------------------


def step_dialogues(
    protocol: str, step: int, train_dialogues: pd.DataFrame, config: FeedbackConfig
) -> list[str]:
    """Off-policy kinds: the dialogue ids step ``step`` memorizes, in order."""
    if train_dialogues.empty:
        return []
    order = shuffled_dialogue_ids(train_dialogues, config.seed)
    if protocol in ("off_policy", "train_performance"):
        return order if step == 0 else []
    if protocol == "stepwise_off_policy":
        if step == 0:
            return []
        _check_planned(len(order), config)
        return order[(step - 1) * config.batch_size : step * config.batch_size]
    raise ValueError(f"step_dialogues: {protocol} is not an off-policy protocol")


def _check_planned(n_dialogues: int, config: FeedbackConfig) -> None:
    """The stepwise plan (made from ``feedback.train_items`` before the data is read) must reach
    every training dialogue: a ``train_items`` below the set's would silently drop the last ones."""
    if config.train_items is None:
        return
    covered = math.ceil(config.train_items / config.batch_size) * config.batch_size
    if covered < n_dialogues:
        raise ConfigError(
            f"config benchmarks.<name>.feedback.train_items: {config.train_items}, but the set has "
            f"{n_dialogues} training dialogues; stepwise_off_policy would never memorize the last "
            f"{n_dialogues - covered}"
        )


def select_dialogues(dialogues: pd.DataFrame, ids: list[str], keys: dict[str, Any]) -> pd.DataFrame:
    """Rows of the dialogues ``ids`` in that order, relabelled with this run's keys."""
    if not ids:
        return _empty_dialogues()
    order = {d: i for i, d in enumerate(ids)}
    mine = dialogues[dialogues["dialogue_id"].isin(order)].copy()
    mine["_order"] = mine["dialogue_id"].map(order)
    mine = mine.sort_values(["_order"], kind="stable").drop(columns="_order")
    for name, value in keys.items():
        mine[name] = value
    return mine[DIALOGUES.names].reset_index(drop=True)


async def ingest_step(
    protocol: str,
    step: int,
    dialogues: pd.DataFrame,
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    ctx: StepContext,
    previous: Path | None,
    out_dir: Path,
) -> dict[str, Any]:
    """Step ``step``'s snapshot: snapshot k-1 (or the step-0 start) + this step's dialogues."""
    corpora = corpus_datasets(questions, sessions)
    if previous is not None:
        memories, held = load_snapshot(previous, ctx)
    else:
        memories = {SET_EPISODE: ctx.build()}
        held = {SET_EPISODE: []}
    new = dialogue_messages(dialogues, prefix=f"s{step}:")
    new_ids = list(dict.fromkeys(dialogues["dialogue_id"]))
    if previous is None and protocol in ("stepwise_off_policy", "on_policy"):
        for dataset in corpora:  # step 0 = "begin": every corpus of the set in one memory
            await memories[SET_EPISODE].add(corpus_messages(sessions, dataset), {"step": step})
            held[SET_EPISODE].append(f"corpus:{dataset}")
    if previous is None and protocol in ("off_policy", "train_performance"):
        for dataset in corpora:  # all training dialogues + only this dataset's corpus
            memory = ctx.build()
            await memory.add(new, {"step": step})
            await memory.add(corpus_messages(sessions, dataset), {"step": step})
            memories[dataset] = memory
            held[dataset] = [*new_ids, f"corpus:{dataset}"]
    if new:
        await memories[SET_EPISODE].add(new, {"step": step})
    held[SET_EPISODE].extend(new_ids)
    return save_snapshot(memories, held, out_dir, step)


def asked_split(protocol: str) -> str:
    return "train" if protocol == "train_performance" else "test"


async def answer_step(
    protocol: str,
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    snapshot: Path,
    ctx: StepContext,
    config: FeedbackConfig,
) -> pd.DataFrame:
    """Answer the asked split from the step's snapshot (ANSWERS rows, by question_id)."""
    memories, _ = load_snapshot(snapshot, ctx)
    gateway = ctx.gateway
    asked = questions[questions["split"] == asked_split(protocol)].to_dict("records")
    own_corpus = protocol in ("off_policy", "train_performance")

    async def one(question: dict[str, Any]) -> dict[str, Any]:
        episode = question["dataset"] if own_corpus and question["dataset"] in memories else None
        memory = memories[episode or SET_EPISODE]
        lang = str(question.get("lang") or "en")
        assistant = MemoryAssistant(
            memory, gateway, lang, config.retrieve_k, show_window=config.show_window
        )
        response = await assistant.act([Turn("user", question["question"])])
        reply = assistant.last_reply
        ctx.tick(reply.cache_hit)
        return {
            **ctx.keys,
            "episode_id": episode or SET_EPISODE,
            "question_id": question["question_id"],
            "question_type": question["question_type"],
            "response": response,
            "retrieved_ids": assistant.last_shown,
            "ranked_ids": assistant.last_shown,
            "context_tokens": reply.tokens_in,
            "model": reply.model,
            "cache_hit": reply.cache_hit,
            "tokens_in": reply.tokens_in,
            "tokens_out": reply.tokens_out,
            "latency_s": reply.latency_s,
        }

    rows = await bounded(asked, scoped(one, _item_label), ITEM_CONCURRENCY)
    frame = pd.DataFrame(rows, columns=ANSWERS.names)
    return frame.sort_values("question_id", kind="stable").reset_index(drop=True)


async def live_step(
    step: int,
    questions: pd.DataFrame,
    previous: Path,
    ctx: StepContext,
    config: FeedbackConfig,
    metrics: Any,
) -> pd.DataFrame:
    """On-policy step k: the sampled items conversed with the agent's step k-1 memory."""
    memories, _ = load_snapshot(previous, ctx)
    train = questions[questions["split"] == "train"].to_dict("records")
    picked = [train[i] for i in on_policy_sample(len(train), config.batch_size, step, config.seed)]
    return await live_dialogues(
        picked,
        lambda item: memories[SET_EPISODE],
        ctx,
        config,
        metrics,
        every_round=True,
    )


async def generate_train_dialogues(
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    ctx: StepContext,
    config: FeedbackConfig,
    metrics: Any,
) -> pd.DataFrame:
    """Training dialogues as the reference generates them: the agent answers round 0 with
    retrieval from its memory of the item's corpus (corpus datasets, ``reading.py``) or bare
    (``basic.py``), later rounds without retrieval."""
    corpora = {}
    for dataset in corpus_datasets(questions, sessions):
        memory = ctx.build()
        await memory.add(corpus_messages(sessions, dataset), {"step": 0})
        corpora[dataset] = memory
    train = questions[questions["split"] == "train"].to_dict("records")
    return await live_dialogues(
        train,
        lambda item: corpora.get(item["dataset"]),
        ctx,
        config,
        metrics,
        every_round=False,
    )


# ---- scores -------------------------------------------------------------------------------------


@dataclass
class StepScores:
    judgements: pd.DataFrame
    question_scores: pd.DataFrame
    scores: pd.DataFrame


def feedback_rates(dialogues: pd.DataFrame) -> dict[str, tuple[float, int]]:
    """like / dislike / copy / none shares of the user's reactions, the share of dialogues the
    user ended, and the unparsed user replies (metric -> (value, n))."""
    users = dialogues[(dialogues["role"] == "user") & (dialogues["implicit_action"] != "")]
    n_dialogues = int(dialogues["dialogue_id"].nunique()) if not dialogues.empty else 0
    rates: dict[str, tuple[float, int]] = {}
    if n_dialogues == 0:
        return rates
    for action in ("like", "dislike", "copy", "none"):
        share = float((users["implicit_action"] == action).mean()) if len(users) else 0.0
        rates[f"{action}_rate"] = (share, len(users))
    ended = users[users["terminated"].astype(bool)]["dialogue_id"].nunique()
    rates["end_rate"] = (ended / n_dialogues, n_dialogues)
    rates["user_parse_failures"] = (float((users["implicit_action"] == UNPARSED).sum()), len(users))
    return rates


async def score_step(
    answers: pd.DataFrame,
    questions: pd.DataFrame,
    dialogues: pd.DataFrame,
    keys: dict[str, Any],
    gateway: Any,
    metrics: Any,
    judge_name: str,
) -> StepScores:
    """Each answer scored with its dataset's metric; per-dataset and overall means; the step's
    feedback rates. ``item_value`` is the mean per-item value (MemoryBench's summary value)."""
    by_id = {q["question_id"]: q for q in questions.to_dict("records")}
    if hasattr(metrics, "check_supported"):
        metrics.check_supported(sorted({by_id[q]["dataset"] for q in answers["question_id"]}))

    async def one(answer: dict[str, Any]) -> tuple[dict[str, Any], Any, float] | None:
        question = by_id[answer["question_id"]]
        try:
            item = await metrics.evaluate_item(question, answer["response"], gateway)
            return question, item, item_value(metrics, question["dataset"], [item])
        except Exception:
            if getattr(gateway, "collecting", False):  # a Batch-API pass, thrown away
                return None
            raise

    scored = await bounded(answers.to_dict("records"), one, ITEM_CONCURRENCY)
    results = [r for r in scored if r is not None]
    judged, per_q, values = [], [], []
    flags = []
    for question, item, value in results:
        raw = float(item.value) if item.value is not None else float("nan")
        base = {**keys, "question_id": question["question_id"]}
        base["question_type"] = question["question_type"]
        judged.append(
            {
                **base,
                "judge": judge_name,
                "metric": item.metric,
                "value": raw,
                "raw_reply": item.raw_reply or "",
                "parse_ok": bool(item.parse_ok),
            }
        )
        per_q.append({**base, "metric": item.metric, "value": raw, "level": "answer"})
        per_q.append({**base, "metric": MAIN_METRIC, "value": value, "level": "answer"})
        values.append((question["dataset"], item.metric, raw, value))
        flags.append(bool(item.parse_ok))
    rows = []
    frame = pd.DataFrame(values, columns=["dataset", "metric", "value", "score"])
    frame["parse_ok"] = pd.Series(flags, index=frame.index, dtype=bool)
    for metric, group in frame.groupby("metric", sort=True):  # n = items with a value
        rows.append({**keys, "metric": metric, "aggregate": "micro", "value": group.value.mean(),
                     "n": int(group.value.count())})  # fmt: skip
    if not frame.empty:
        rows.append({**keys, "metric": MAIN_METRIC, "aggregate": "micro",
                     "value": frame.score.mean(), "n": len(frame)})  # fmt: skip
        for dataset, group in frame.groupby("dataset", sort=True):
            rows.append({**keys, "metric": MAIN_METRIC, "aggregate": f"dataset:{dataset}",
                         "value": group.score.mean(), "n": len(group)})  # fmt: skip
    rows += denominator_rows(keys, frame, judged, metrics)
    failures = sum(not j["parse_ok"] for j in judged)
    rows.append({**keys, "metric": "judge_parse_failures", "aggregate": "micro",
                 "value": float(failures), "n": len(judged)})  # fmt: skip
    for metric, (value, n) in feedback_rates(dialogues).items():
        rows.append({**keys, "metric": metric, "aggregate": "micro", "value": value, "n": n})
    return StepScores(
        pd.DataFrame(judged, columns=JUDGEMENTS.names),
        pd.DataFrame(per_q, columns=QUESTION_SCORES.names),
        pd.DataFrame(rows, columns=SCORES.names),
    )


def denominator_rows(
    keys: dict[str, Any], frame: pd.DataFrame, judged: list[dict[str, Any]], metrics: Any
) -> list[dict[str, Any]]:
    """Where a judge may fail (``metrics.is_judged`` of a dataset), each judged metric and the
    main score both ways: ``<metric>:scored`` (micro, over the items whose judge gave a value),
    ``<metric>:all`` (micro, over every item, a failed one at the bottom of its scale as
    ``item_value`` counts it) and ``<metric>:unscored`` (how many failed, ``n`` = all items)."""
    is_judged = getattr(metrics, "is_judged", None)
    if is_judged is None or frame.empty:
        return []
    frame = frame[[bool(is_judged(d)) for d in frame["dataset"]]]
    rows: list[dict[str, Any]] = []
    groups = [(m, g, "value") for m, g in frame.groupby("metric", sort=True)]
    if not frame.empty:
        groups.append((MAIN_METRIC, frame, "score"))
    for metric, group, column in groups:
        scored = group[group["parse_ok"]]
        if len(scored):
            rows.append({**keys, "metric": f"{metric}:scored", "aggregate": "micro",
                         "value": float(scored[column].mean()), "n": len(scored)})  # fmt: skip
        rows.append({**keys, "metric": f"{metric}:all", "aggregate": "micro",
                     "value": float(group["score"].mean()), "n": len(group)})  # fmt: skip
        rows.append({**keys, "metric": f"{metric}:unscored", "aggregate": "micro",
                     "value": float((~group["parse_ok"]).sum()), "n": len(group)})  # fmt: skip
    return rows


def set_name(select: Any) -> str:
    """A benchmark's ``select`` ({domain: X} or "domain:X") as "KIND:NAME"."""
    ((kind, name),) = (parse_set(select) if isinstance(select, str) else dict(select)).items()
    return f"{kind}:{name}"


def normalized_rows(
    question_scores: pd.DataFrame,
    questions: pd.DataFrame,
    set_name: str,
    configs_dir: str,
    stats_file: str,
    keys: dict[str, Any],
) -> pd.DataFrame:
    """The official normalized summary of a domain / task set
    (``eval.memorybench.normalize.normalize_set``) as SCORES rows: aggregate "normalized" for the
    set's average / weighted_average / z_score, "normalized:{dataset}" for each dataset's mean /
    minmax / z."""
    values = question_scores[question_scores["metric"] == MAIN_METRIC].merge(
        questions[["question_id", "dataset", "meta"]], on="question_id"
    )
    values["test_idx"] = [int(_meta({"meta": m})["test_idx"]) for m in values["meta"]]
    table = normalize_set(
        values[["dataset", "test_idx", "value"]], set_name, configs_dir, stats_file
    )
    rows = [
        {
            **keys,
            "metric": r["metric"],
            "aggregate": "normalized" if r["dataset"] == "all" else f"normalized:{r['dataset']}",
            "value": float(r["value"]),
            "n": int(r["n"]),
        }
        for r in table.to_dict("records")
    ]
    return pd.DataFrame(rows, columns=SCORES.names)
