"""The feedback protocols' calls (MemoryBench: rules feedback_train_dialogues, feedback_step,
feedback_train_performance), from the set's questions (split ``train`` / ``test``).

- answers (exact): one ``agent/answer`` per question of the asked split (``test``; ``train`` for
  ``train_performance``) at every step, its prompt the reference's context prompt over
  ``retrieve_k`` stored turns (stand-ins of the expected turn length) when the memory holds any;
- scoring (expected): every answer scored by its dataset's metric; the judge / critic calls of
  each family are played with the offline model (:mod:`mnemoflow.planning.scoring`);
- a live dialogue (the generated training dialogues; an on-policy step after 0 converses
  ``min(batch_size, train items)`` of them): the assistant answers 1 .. ``max_rounds`` times and
  the simulated user reacts after every answer but the last, ending the dialogue when it likes:
  ``agent`` min 1 / max ``max_rounds`` per dialogue; an LLM user (``user/user_feedback_json``,
  its request rendered over a stand-in exchange) min 1 (0 when ``max_rounds`` is 1) / max
  ``max_rounds - 1``; a rule-based user (corpus datasets) scores each answer instead; the plan
  counts the midpoint as expected and gives min and max;
- the memory's writes while a step ingests its dialogues, and one query embedding per retrieval
  (:mod:`mnemoflow.planning.writes`), over stand-in dialogue turns;
- ``cached_in``: of a server's prompt tokens, the share an unbounded prefix cache would serve
  within the job (``llm.prefix_dispatch.shared_fraction``): a dialogue's history re-sent every
  round, the simulated user's and the judges' instructions shared by every item.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.llm.types import ChatRequest
from mnemoflow.memory.base import Message, stage_roles, without_labels
from mnemoflow.planning import scoring
from mnemoflow.planning.plan import Line
from mnemoflow.planning.static_qa import Context
from mnemoflow.planning.tokens import cached_tokens, filler, sent_tokens
from mnemoflow.planning.writes import planned_writes, write_lines
from mnemoflow.protocols import feedback as fb
from mnemoflow.simulators.feedback import FeedbackSimulator, is_rule_based

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
    """A stored dialogue turn's stand-in text: an answer of the expected length."""
    return filler(
        ctx.tokens_out("agent", "answer", family=FAMILY), ctx.gateway.specs["agent"].backend
    )


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
    docs = [f"Speaker user says: {_turn(ctx)}"] * (config.retrieve_k if holds else 0)
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


def _talk(question: dict[str, Any], rounds: int, reply: str) -> list[list[dict[str, str]]]:
    """The agent's prompts in one dialogue of ``rounds`` rounds as the assistant builds them:
    the history so far (stand-in replies and reactions), its last user message asked."""
    history = [{"role": "user", "content": str(question["question"])}]
    prompts = []
    for r in range(rounds):
        if r:
            history += [{"role": "assistant", "content": reply}, {"role": "user", "content": reply}]
        prompts.append(list(history))
    return prompts


def _dialogues(
    ctx: Context,
    benchmark: str,
    system: str,
    protocol: str,
    items: list[dict[str, Any]],
    blocks: set[str],
) -> list[Line]:
    config = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark])
    rounds = config.max_rounds
    n = len(items)
    mean = (1 + rounds) / 2  # assistant answers per dialogue, expected at the midpoint
    reply = _turn(ctx)
    specs = ctx.gateway.specs
    metrics = _metrics(ctx, benchmark)
    agent_tokens = user_tokens = 0.0
    # the share of prompt tokens a server's prefix cache serves, over every round of each
    # dialogue (agent) and over the items (the user's instructions)
    shares = {"agent": [0.0, 0.0], "user": [0.0, 0.0]}
    llm_users = [q for q in items if not is_rule_based(str(q.get("dataset", "")))]
    for question in items:
        history = round(mean - 1)
        request = _answer_request(question, [], history, reply)
        agent_tokens += mean * sent_tokens(request, specs["agent"].backend)
        for prompt in _talk(question, rounds, reply):
            _share(shares["agent"], prompt, specs["agent"].backend, blocks)
    for question in llm_users:
        simulator = FeedbackSimulator(question, None, None, metrics.simulated_user(
            str(question.get("dataset", ""))))  # fmt: skip
        turns = [_Turn("user", str(question["question"])), _Turn("assistant", reply)]
        request: ChatRequest = simulator.request(turns)
        user_tokens += sent_tokens(request.messages, specs["user"].backend)
        _share(shares["user"], request.messages, specs["user"].backend, blocks)
    out = []
    user_low = min(1, rounds - 1)
    for role, task, low, high, tokens, count in (
        ("agent", "answer", 1, rounds, agent_tokens / mean, n),
        ("user", "user_feedback_json", user_low, rounds - 1, user_tokens, len(llm_users)),
    ):
        if not high or not count:
            continue
        expected = count * (low + high) / 2
        cached, sent = shares[role]
        out.append(
            Line(
                benchmark, system, protocol, role, task,
                calls=expected, calls_min=count * low, calls_max=count * high,
                tokens_in=tokens * (low + high) / 2,
                cached_in=tokens * (low + high) / 2 * (cached / sent if sent else 0.0),
                tokens_out=expected * ctx.tokens_out(role, task), exact=low == high,
                notes=[
                    f"{count} live dialogues of 1 .. {rounds} rounds: min {count * low}, max "
                    f"{count * high}, expected taken at the midpoint (the simulated user ends a "
                    "dialogue when it likes)", STAND_IN,
                ],
            )
        )  # fmt: skip
    rule_based = [q for q in items if is_rule_based(str(q.get("dataset", "")))]
    out += _scoring(ctx, benchmark, system, protocol, rule_based, mean)
    return out


def _share(totals: list[float], messages: list[dict[str, Any]], backend: str, blocks: set[str]):
    """Adds a prompt's prefix-cached tokens and its tokens to ``totals``."""
    tokens = sent_tokens(messages, backend)
    totals[0] += cached_tokens(messages, tokens, backend, blocks)
    totals[1] += tokens


class _Turn:
    """A stand-in dialogue turn (what the simulator reads of one)."""

    def __init__(self, role: str, content: str):
        self.role, self.content, self.round = role, content, 0


def _writes(ctx: Context, benchmark: str, system: str, protocol: str, dialogues: int) -> list:
    """The memory's writes of ``dialogues`` new stand-in dialogues (expected turns each)."""
    system_spec = ctx.config["systems"][system]
    roles = stage_roles(system_spec, "ingest")
    if not dialogues or not roles:
        return []
    rounds = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark]).max_rounds
    turns = round(2 * (1 + rounds) / 2)
    text = f"Speaker user says: {_turn(ctx)}"
    messages = [
        Message(f"d{d}_{t}", f"d{d}", "user", text) for d in range(dialogues) for t in range(turns)
    ]
    backend = ctx.gateway.specs["memory_writer"].backend

    def line(role: str, task: str, **values: Any) -> Line:
        return Line(benchmark, system, protocol, role, task, **values)

    writes = planned_writes(system_spec, [(messages, 0)], backend, text)
    embed = ctx.gateway.specs["embedder"].backend
    return write_lines(writes, line, ctx.tokens_out, roles, embed)


def plan_train_dialogues(ctx: Context, benchmark: str, system: str) -> list[Line]:
    """The generated training dialogues: one per training item."""
    train = _items(ctx, benchmark, "train")
    return _dialogues(ctx, benchmark, system, "feedback", train, set())


def plan_step(ctx: Context, benchmark: str, system: str, protocol: str, step: int) -> list[Line]:
    """One step: its live dialogues (on-policy after step 0), its writes, then its answers."""
    lines = []
    blocks: set[str] = set()  # the job's prompts so far, for the expected prefix-cache share
    config = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark])
    train = _items(ctx, benchmark, "train")
    new = len(train) if protocol in ("off_policy", "train_performance") else 0
    if fb.is_live(protocol, step):
        picked = [
            train[i] for i in fb.on_policy_sample(len(train), config.batch_size, step, config.seed)
        ]
        lines += _dialogues(ctx, benchmark, system, protocol, picked, blocks)
        new = len(picked)
    elif protocol == "stepwise_off_policy" and step:
        new = min(config.batch_size, len(train) - (step - 1) * config.batch_size)
    lines += _writes(ctx, benchmark, system, protocol, new)
    return lines + _answers(ctx, benchmark, system, protocol, step, blocks)
