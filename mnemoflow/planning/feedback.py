"""The feedback protocols' calls (MemoryBench: rules feedback_train_dialogues, feedback_step,
feedback_train_performance), from the set's questions (split ``train`` / ``test``).

- answers (exact): one ``agent/answer`` per question of the asked split (``test``; ``train`` for
  ``train_performance``) at every step, its prompt the reference's context prompt over
  ``retrieve_k`` stored turns (stand-ins of the expected turn length) when the memory holds any;
- scoring (expected): every answer scored by its dataset's metric; the judge / critic calls of
  each family are played with the offline model (:mod:`mnemoflow.planning.scoring`);
- a live dialogue (the generated training dialogues; an on-policy step after 0 converses
  ``min(batch_size, train items)`` of them): the assistant answers 1 .. ``max_rounds`` times and
  the simulated user reacts after every answer but the last, ending the dialogue when it likes
  (``agent`` min 1 / max ``max_rounds`` per dialogue; an LLM user, ``user/user_feedback_json``,
  its request rendered over a stand-in exchange, min 1 / max ``max_rounds - 1``; a rule-based
  user, corpus datasets, scores each answer instead). The offline user's decisions follow from
  each item's reference (:func:`_rounds`); a model user's are expected at the midpoint. A
  dialogue in which the assistant retrieves nothing is the same for every system and step: its
  repeats are cache hits;
- the memory's writes while a step ingests its dialogues, and one query embedding per retrieval
  (:mod:`mnemoflow.planning.writes`), over stand-in dialogue turns;
- ``cached_in``: of a server's prompt tokens, the share an unbounded prefix cache would serve
  within the job (``llm.prefix_dispatch.shared_fraction``): a dialogue's history re-sent every
  round, the simulated user's and the judges' instructions shared by every item.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemoflow.llm.offline import user as offline_user_model
from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.base import Message, stage_roles, without_labels
from mnemoflow.memory.buffer import render
from mnemoflow.planning import scoring
from mnemoflow.planning.plan import Line
from mnemoflow.planning.static_qa import Context
from mnemoflow.planning.tokens import cached_tokens, filler, sent_tokens, text_tokens
from mnemoflow.planning.writes import planned_writes, write_lines
from mnemoflow.protocols import feedback as fb
from mnemoflow.simulators.feedback import FeedbackSimulator, is_rule_based, reference_of

#: The call sites' family in data/reply_tokens.yaml (its answers differ from static QA's).
FAMILY = "feedback"
STAND_IN = "tokens in: stored turns and replies as stand-ins of their expected length"


def _items(ctx: Context, benchmark: str, split: str) -> list[dict[str, Any]]:
    questions = ctx.prepared(benchmark).questions
    return questions[questions["split"] == split].to_dict("records")


def _metrics(ctx: Context, benchmark: str) -> Any:
    spec = ctx.benchmarks[benchmark]
    return fb.metrics_module(spec["loader"], spec.get("scoring", "paper"))


def _stores(ctx: Context, system: str) -> bool:
    """Whether the system keeps what it is given (``none`` keeps nothing)."""
    spec = without_labels(ctx.config["systems"][system])
    return spec.get("type") != "none"


def _turn(ctx: Context) -> str:
    """An answer's stand-in text: of the expected length."""
    return filler(
        ctx.tokens_out("agent", "answer", family=FAMILY), ctx.gateway.specs["agent"].backend
    )


def _stored(ctx: Context, benchmark: str) -> str:
    """A stored dialogue turn's stand-in content ("Speaker user says: ..."), of the mean length
    of the training dialogues' turns: each item's question, then its expected answers and the
    user's replies between them (the offline user's correction as it words it, a model user's
    of its expected reply length)."""
    key = ("stored turn", benchmark)
    if key not in ctx.played:
        backend = ctx.gateway.specs["agent"].backend
        rounds = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark]).max_rounds
        offline_user = ctx.gateway.specs["user"].backend == "offline"
        answer = ctx.tokens_out("agent", "answer", family=FAMILY)
        reply = ctx.tokens_out("user", "user_feedback_json")
        total = count = 0.0
        for item in _items(ctx, benchmark, "train"):
            llm_user = not is_rule_based(str(item.get("dataset", "")))
            answers, _ = _rounds(item, rounds, offline_user and llm_user)
            said = reply
            if offline_user and llm_user:
                lang = str(item.get("lang") or "en")
                said = text_tokens(offline_user_model.correction(reference_of(item), lang), backend)
            total += text_tokens(str(item["question"]), backend) + answers * answer
            total += (answers - 1) * said
            count += 2 * answers
        ctx.played[key] = f"Speaker user says: {filler(total / max(count, 1), backend)}"
    return ctx.played[key]


def _answer_request(question: dict[str, Any], docs: list[str], history: int, reply: str) -> list:
    lang = str(question.get("lang") or "en")
    earlier = [{"role": "assistant", "content": reply}, {"role": "user", "content": reply}]
    prompt = fb.answer_prompt(str(question["question"]), docs, lang)
    return [*(earlier * history), {"role": "user", "content": prompt}]


def _scoring(
    ctx: Context,
    benchmark: str,
    system: str,
    protocol: str,
    items: list,
    per: float,
    repeated: frozenset[int] = frozenset(),
) -> list[Line]:
    """The metric's scoring calls for ``per`` scored answers of each of ``items``; the answers of
    the items at ``repeated`` come from the cache, so their scoring requests do too."""
    key = ("scoring", benchmark)
    if key not in ctx.played:
        questions = [*_items(ctx, benchmark, "train"), *_items(ctx, benchmark, "test")]
        backends = {role: spec.backend for role, spec in ctx.gateway.specs.items()}
        reply = ctx.tokens_out("agent", "answer", family=FAMILY)
        ctx.played[key] = scoring.per_item(_metrics(ctx, benchmark), questions, reply, backends)
    lines: dict[tuple[str, str], Line] = {}
    first = True  # the job's first scored answer: nothing before it in the server's cache
    for index, item in enumerate(items):
        played = ctx.played[key][str(item.get("dataset", ""))]
        for (role, task), (calls, tokens, cached) in played.items():
            line = lines.setdefault(
                (role, task),
                Line(benchmark, system, protocol, role, task, exact=False, notes=[
                    "expected: the dataset's metric played with the offline model per answer"
                ]),
            )  # fmt: skip
            line.calls += per * calls
            if index in repeated:
                line.cache_hits += per * calls
                continue
            line.tokens_in += per * tokens
            line.tokens_out += per * calls * ctx.tokens_out(role, task)
            line.cached_in += 0.0 if first else per * cached
        first = first and index in repeated
    return list(lines.values())


def _answers(
    ctx: Context, benchmark: str, system: str, protocol: str, step: int, blocks: set[str]
) -> list[Line]:
    split = fb.asked_split(protocol)
    items = _items(ctx, benchmark, split)
    config = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark])
    backend = ctx.gateway.specs["agent"].backend
    holds = _stores(ctx, system) and (step > 0 or protocol in ("off_policy", "train_performance"))
    doc = render(Message("", "", "user", _stored(ctx, benchmark), "user"))
    docs = [doc] * (config.retrieve_k if holds else 0)
    line = Line(
        benchmark, system, protocol, "agent", "answer", calls=len(items),
        notes=[f"one answer per {split} question", STAND_IN],
    )  # fmt: skip
    repeated = set()
    for index, question in enumerate(items):
        messages = _answer_request(question, docs, 0, "")
        # a plain prompt (nothing retrieved) is the one that will be sent: asked again at a
        # later step or by another system, the cache answers it
        key = None
        if not docs:
            key = ctx.key(ChatRequest(role="agent", task="answer", messages=messages))
        if key is not None and key in ctx.planned:
            line.cache_hits += 1
            repeated.add(index)
            continue
        if key is not None:
            ctx.planned.add(key)
        tokens = sent_tokens(messages, backend)
        line.tokens_in += tokens
        line.cached_in += cached_tokens(messages, tokens, backend, blocks)
        line.tokens_out += ctx.tokens_out("agent", "answer", family=FAMILY)
    scored = _scoring(ctx, benchmark, system, protocol, items, 1.0, frozenset(repeated))
    lines = [line, *scored]
    if holds and "embedder" in stage_roles(ctx.config["systems"][system], "query"):
        lines += _embedder(ctx, benchmark, system, protocol, [str(q["question"]) for q in items])
    return lines


def _embedder(ctx: Context, benchmark, system, protocol, queries: list[str]) -> list[Line]:
    def line(role: str, task: str, **values: Any) -> Line:
        return Line(benchmark, system, protocol, role, task, **values)

    writes = planned_writes(ctx.config["systems"][system], [], "offline")
    backend = ctx.gateway.specs["embedder"].backend
    return write_lines(writes, line, ctx.tokens_out, ("embedder",), backend, queries)


def _rounds(question: dict[str, Any], rounds: int, offline_user: bool) -> tuple[float, float]:
    """(assistant answers, simulated-user reactions) expected in one live dialogue of at most
    ``rounds`` answers; the user reacts after every answer but the ``rounds``-th.

    The offline user's decisions are known from the item (:mod:`mnemoflow.llm.offline.user`): no
    reference, it ends after the first answer; else it dislikes the first answer (taken as a miss)
    and corrects it with the reference's first sentence, which the assistant then repeats: the
    user likes that and ends when it covers enough of the reference, else the dialogue runs to
    ``rounds``. A model user ends when it likes: expected at the midpoint of 1 .. ``rounds``."""
    if rounds <= 1:
        return 1.0, 0.0
    if not offline_user:
        return (1 + rounds) / 2, (1 + rounds - 1) / 2
    reference = reference_of(question)
    if not reference.strip():
        return 1.0, 1.0
    lang = str(question.get("lang") or "en")
    correction = offline_user_model.correction(reference, lang)
    if offline_user_model.overlap(reference, correction, lang) >= offline_user_model.LIKE_OVERLAP:
        return 2.0, 2.0 if rounds > 2 else 1.0
    return float(rounds), float(rounds - 1)


def _repeated(ctx: Context, question: dict[str, Any]) -> bool:
    """Whether a dialogue on ``question`` in which the assistant retrieves nothing is served by
    the cache: such a dialogue is the same for every system and step (its first request is the
    bare question, each later one follows from the cached replies), so once its first request
    was planned or is cached, every call of it is a hit."""
    text = str(question["question"])
    request = ChatRequest(
        role="agent", task="answer", messages=[{"role": "user", "content": text}],
        fields={"question": text, "context": [], "options": []},
    )  # fmt: skip
    key = ctx.key(request)
    if key is None:
        return False
    seen = f"dialogue/{key}"
    hit = seen in ctx.planned or ctx.gateway.cache.get(key) is not None
    ctx.planned.add(seen)
    return hit


def _dialogues(
    ctx: Context,
    benchmark: str,
    system: str,
    protocol: str,
    items: list[dict[str, Any]],
    bare: Callable[[dict[str, Any]], bool],
    blocks: set[str],
) -> list[Line]:
    """The live dialogues on ``items``; ``bare(item)``: the assistant retrieves nothing in its
    dialogue (no memory, or an empty one), so a dialogue planned before is a cache hit."""
    config = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark])
    rounds = config.max_rounds
    reply = _turn(ctx)
    specs = ctx.gateway.specs
    metrics = _metrics(ctx, benchmark)
    offline_user = specs["user"].backend == "offline"
    lines = {
        role: Line(
            benchmark, system, protocol, role, task, exact=False, notes=[
                f"{len(items)} live dialogues of 1 .. {rounds} rounds: the offline user's "
                "decisions read from each item's reference, a model user's at the midpoint; a "
                "dialogue with nothing retrieved, planned before, is a cache hit", STAND_IN,
            ],
        )
        for role, task in (("agent", "answer"), ("user", "user_feedback_json"))
    }  # fmt: skip
    for line in lines.values():
        line.calls_min = line.calls_max = 0.0
    agent, user = lines["agent"], lines["user"]
    rule_based, repeated, rule_answers = [], set(), 0.0
    for question in items:
        dataset = str(question.get("dataset", ""))
        llm_user = not is_rule_based(dataset)
        answers, reactions = _rounds(question, rounds, offline_user and llm_user)
        hit = bare(question) and _repeated(ctx, question)
        agent.calls += answers
        agent.calls_min += 1
        agent.calls_max += rounds
        if not llm_user:
            rule_based.append(question)
            rule_answers += answers
            if hit:
                repeated.add(len(rule_based) - 1)
        else:
            user.calls += reactions
            user.calls_min += min(1, rounds - 1)
            user.calls_max += rounds - 1
        if hit:
            agent.cache_hits += answers
            user.cache_hits += reactions if llm_user else 0
            continue
        for k in range(round(answers)):  # the history so far re-sent every round
            _sent(agent, _answer_request(question, [], k, reply), specs["agent"].backend, blocks)
        agent.tokens_out += answers * ctx.tokens_out("agent", "answer", family=FAMILY)
        if llm_user and reactions:
            simulator = FeedbackSimulator(question, None, None, metrics.simulated_user(dataset))
            turns = [_Turn("user", str(question["question"])), _Turn("assistant", reply)]
            request: ChatRequest = simulator.request(turns)
            _sent(user, request.messages, specs["user"].backend, blocks, reactions)
            user.tokens_out += reactions * ctx.tokens_out("user", "user_feedback_json")
    out = [line for line in lines.values() if line.calls]
    if rule_based:
        per = rule_answers / len(rule_based)
        out += _scoring(ctx, benchmark, system, protocol, rule_based, per, frozenset(repeated))
    return out


def _sent(
    line: Line, messages: list[dict[str, Any]], backend: str, blocks: set[str], times: float = 1
) -> None:
    """Adds ``times`` sends of a prompt to ``line``: its tokens and their prefix-cached share."""
    tokens = sent_tokens(messages, backend)
    line.tokens_in += times * tokens
    line.cached_in += times * cached_tokens(messages, tokens, backend, blocks)


class _Turn:
    """A stand-in dialogue turn (what the simulator reads of one)."""

    def __init__(self, role: str, content: str):
        self.role, self.content, self.round = role, content, 0


def _writes(ctx: Context, benchmark: str, system: str, protocol: str, items: list) -> list:
    """The memory's writes of the dialogues on ``items``, new in this step: stand-in turns, a
    question and an answer per expected round (the user's closing reaction is not kept)."""
    system_spec = ctx.config["systems"][system]
    roles = stage_roles(system_spec, "ingest")
    if not items or not roles:
        return []
    rounds = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark]).max_rounds
    offline_user = ctx.gateway.specs["user"].backend == "offline"
    text = _stored(ctx, benchmark)
    messages = []
    for d, item in enumerate(items):
        llm_user = not is_rule_based(str(item.get("dataset", "")))
        answers, _ = _rounds(item, rounds, offline_user and llm_user)
        messages += [Message(f"d{d}_{t}", f"d{d}", "user", text) for t in range(round(2 * answers))]
    backend = ctx.gateway.specs["memory_writer"].backend

    def line(role: str, task: str, **values: Any) -> Line:
        return Line(benchmark, system, protocol, role, task, **values)

    writes = planned_writes(system_spec, [(messages, 0)], backend, text)
    embed = ctx.gateway.specs["embedder"].backend
    return write_lines(writes, line, ctx.tokens_out, roles, embed)


def plan_train_dialogues(ctx: Context, benchmark: str, system: str) -> list[Line]:
    """The generated training dialogues: one per training item, answered bare but for a corpus
    dataset's (answered from a memory of its corpus)."""
    items = _items(ctx, benchmark, "train")
    return _dialogues(
        ctx, benchmark, system, "feedback", items,
        lambda item: not is_rule_based(str(item.get("dataset", ""))), set(),
    )  # fmt: skip


def plan_step(ctx: Context, benchmark: str, system: str, protocol: str, step: int) -> list[Line]:
    """One step: its live dialogues (on-policy after step 0), its writes, then its answers."""
    lines = []
    blocks: set[str] = set()  # the job's prompts so far, for the expected prefix-cache share
    config = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark])
    train = _items(ctx, benchmark, "train")
    new = train if protocol in ("off_policy", "train_performance") else []
    if fb.is_live(protocol, step):
        picked = [
            train[i] for i in fb.on_policy_sample(len(train), config.batch_size, step, config.seed)
        ]
        # the memory of step - 1 holds the dialogues of steps 1 .. step - 1
        empty = not _stores(ctx, system) or step == 1
        lines += _dialogues(ctx, benchmark, system, protocol, picked, lambda item: empty, blocks)
        new = picked
    elif protocol == "stepwise_off_policy" and step:
        new = train[(step - 1) * config.batch_size : step * config.batch_size]
    lines += _writes(ctx, benchmark, system, protocol, new)
    return lines + _answers(ctx, benchmark, system, protocol, step, blocks)
