"""The feedback protocols' calls (MemoryBench: rules feedback_train_dialogues, feedback_step,
feedback_train_performance), from the set's questions (split ``train`` / ``test``).

- answers (exact): one ``agent/answer`` per question of the asked split (``test``; ``train`` for
  ``train_performance``) at every step;
- a live dialogue (the generated training dialogues; an on-policy step after 0 converses
  ``min(batch_size, train items)`` of them): the assistant answers 1 .. ``max_rounds`` times and
  the simulated user reacts after every answer but the last, ending the dialogue when it likes:
  ``agent`` min 1 / max ``max_rounds`` per dialogue, ``user`` min 1 (0 when ``max_rounds`` is 1) /
  max ``max_rounds - 1``; the plan counts the midpoint as expected and gives min and max.

Prompts are not rendered (each holds what the memory retrieved, or the dialogue so far): their
``tokens_in`` is the question alone, a lower bound. Not counted: a judged family's scoring and
the simulator's evaluator (``judge`` / ``critic``: one call or more per answer, family by family)
and the memory's own writes and embeddings while the step ingests.
"""

from __future__ import annotations

from mnemoflow.llm.context import count_text
from mnemoflow.planning.plan import Line
from mnemoflow.planning.static_qa import Context
from mnemoflow.protocols import feedback as fb

LOWER_BOUND = "tokens in: the question only (retrieved memory and dialogue not included)"
NOT_COUNTED = "not counted: judge / critic scoring calls of judged families, the memory's writes"


def _questions(ctx: Context, benchmark: str, split: str) -> list[str]:
    questions = ctx.prepared(benchmark).questions
    return [str(q) for q in questions[questions["split"] == split]["question"]]


def _answers(ctx: Context, benchmark: str, system: str, protocol: str, split: str) -> Line:
    texts = _questions(ctx, benchmark, split)
    backend = ctx.gateway.specs["agent"].backend
    return Line(
        benchmark, system, protocol, "agent", "answer",
        calls=len(texts), tokens_in=sum(count_text(t, backend) + 6 for t in texts),
        tokens_out=len(texts) * ctx.tokens_out("agent", "answer"),
        notes=[f"one answer per {split} question", LOWER_BOUND, NOT_COUNTED],
    )  # fmt: skip


def _dialogues(
    ctx: Context, benchmark: str, system: str, protocol: str, items: list[str]
) -> list[Line]:
    rounds = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark]).max_rounds
    n = len(items)
    out = []
    for role, task, low, high in (
        ("agent", "answer", 1, rounds),
        ("user", "user_feedback_json", min(1, rounds - 1), rounds - 1),
    ):
        if not high:
            continue
        backend = ctx.gateway.specs[role].backend
        expected = n * (low + high) / 2
        tokens = sum(count_text(t, backend) for t in items) * (low + high) / 2
        out.append(
            Line(
                benchmark, system, protocol, role, task,
                calls=expected, calls_min=n * low, calls_max=n * high, tokens_in=tokens,
                tokens_out=expected * ctx.tokens_out(role, task), exact=low == high,
                notes=[
                    f"{n} live dialogues of 1 .. {rounds} rounds: min {n * low}, max {n * high}, "
                    "expected taken at the midpoint (the simulated user ends a dialogue when it "
                    "likes)", LOWER_BOUND,
                ],
            )
        )  # fmt: skip
    return out


def plan_train_dialogues(ctx: Context, benchmark: str, system: str) -> list[Line]:
    """The generated training dialogues: one per training item."""
    return _dialogues(ctx, benchmark, system, "feedback", _questions(ctx, benchmark, "train"))


def plan_step(ctx: Context, benchmark: str, system: str, protocol: str, step: int) -> list[Line]:
    """One step: its live dialogues (on-policy after step 0), then its answers."""
    lines = [_answers(ctx, benchmark, system, protocol, fb.asked_split(protocol))]
    if fb.is_live(protocol, step):
        config = fb.FeedbackConfig.from_spec(ctx.benchmarks[benchmark])
        train = _questions(ctx, benchmark, "train")
        picked = [
            train[i] for i in fb.on_policy_sample(len(train), config.batch_size, step, config.seed)
        ]
        lines += _dialogues(ctx, benchmark, system, protocol, picked)
    return lines
