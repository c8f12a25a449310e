"""Stage ``answers``: one personalised answer per state variant of every question (data.json's qas).

The reference's step 6: a question's variants are the distinct tuples of its required types over
every checkpoint state (period 0 and each period's end), padded with random unseen tuples up to
``min_state_variants``. One call writes an answer per variant; each answer is then checked by
the model picking, among all variants, the one the answer is for, and refined until it picks
the right one (at most ``max_refinements`` times).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from mnemoflow.data.amemgym_procedural import state_variants
from mnemoflow.environment.base import (
    Call,
    InvalidReply,
    Stage,
    StageContext,
    gather_all,
    refine_until_checked,
    refined_text,
)
from mnemoflow.llm.types import UnparseableReply

ANSWERS_PROMPT = """\
You are an advisor giving personalised recommendations. Answer the question below once for each \
state variant, each answer tailored to that variant's circumstances.

Question: {question}

Information the answer depends on: {types}

Variants:
{variants}

Rules:
1. One distinct answer per variant, 2-3 sentences of practical advice.
2. Each answer reflects its variant's values, so that it is clearly told apart from the others.
3. Do not state the values themselves; show them through what you advise.
4. Write in the question's language.

Reply with JSON: {{"variant_1": "answer for variant 1", "variant_2": "...", ...}} \
with exactly {count} answers.
"""
ANSWERS = Call("generator_low", "env-answers", ANSWERS_PROMPT)

CHECK_PROMPT = """\
Which of the state variants below is this answer to the question written for?

Question: {question}

Answer: {answer}

Variants:
{variants}

Compare what the answer addresses with each variant and pick the one it fits most specifically.
Reply with the variant's number only.
"""
CHECK = Call("generator_low", "env-answer-check", CHECK_PROMPT)

REFINE_PROMPT = """\
Rewrite an answer so that it clearly fits its target state variant and no other.

Question: {question}

Target variant (the answer is for this one):
{target}

Other variants (the answer must be distinguishable from answers for these):
{others}

Current answer:
{answer}

What went wrong: {problem}

Keep it 2-3 practical sentences, reflect the target's values without stating them, and make the
difference from the other variants evident. Write in the question's language.

Reply with JSON: {{"answer": "the rewritten answer"}}
"""
REFINE = Call("generator_low", "env-answer-refine", REFINE_PROMPT)


def check_answers(reply: Any, *, count: int) -> list[str]:
    """The ``count`` answers ``variant_1 .. variant_count`` of a valid reply, in order."""
    if not isinstance(reply, dict):
        raise InvalidReply('the reply must be an object {"variant_1": "...", ...}')
    keys = [f"variant_{i}" for i in range(1, count + 1)]
    missing = [key for key in keys if key not in reply]
    extra = [key for key in reply if key not in keys]
    if missing or extra:
        raise InvalidReply(
            f"expected exactly {count} answers {keys[0]}..{keys[-1]}; "
            f"missing {missing}, unexpected {extra}"
        )
    for key in keys:
        if not isinstance(reply[key], str) or not reply[key].strip():
            raise InvalidReply(f"{key} must be a non-empty answer")
    return [reply[key].strip() for key in keys]


def parse_choice(text: str, *, count: int) -> int:
    """A checker's reply: one number in 1..count."""
    body = text.strip().strip(".").strip()
    if not body.isdigit() or not 1 <= int(body) <= count:
        raise UnparseableReply(f"expected one number in 1..{count}, got {text.strip()[:40]!r}")
    return int(body)


def _describe(required: list[str], variant: tuple[str, ...]) -> str:
    return json.dumps(dict(zip(required, variant, strict=True)), ensure_ascii=False)


async def _answer_question(
    ctx: StageContext,
    number: int,
    question: dict[str, Any],
    variants: list[tuple[str, ...]],
    seen: list[tuple[str, ...]],
    schema: dict[str, list[str]],
) -> dict[str, Any]:
    query, required = question["query"], list(question["required_info"])
    choices = {name: schema[name] for name in required}
    listing = "\n".join(
        f"{i}. " + _describe(required, variant) for i, variant in enumerate(variants, start=1)
    )
    plain = [list(variant) for variant in variants]
    base = {"question": query, "required_info": required, "choices": choices, "variants": plain}
    drafts = await ANSWERS.ask(
        ctx,
        fields=base,
        validate=partial(check_answers, count=len(variants)),
        question=query,
        types=", ".join(required),
        variants="\n".join(f"Variant {line}" for line in listing.splitlines()),
        count=len(variants),
    )

    async def settle(index: int, draft: str) -> str:
        async def check(answer: str) -> str | None:
            picked = await CHECK.ask(
                ctx,
                fields={**base, "answer": answer},
                parse=partial(parse_choice, count=len(variants)),
                question=query,
                answer=answer,
                variants=listing,
            )
            if picked is None:
                return "the checker's reply was not a variant number"
            if picked != index + 1:
                return (
                    f"read as variant {picked} {_describe(required, variants[picked - 1])}, "
                    f"not variant {index + 1} {_describe(required, variants[index])}"
                )
            return None

        async def refine(answer: str, problem: str) -> str:
            others = [v for i, v in enumerate(variants) if i != index]
            return await REFINE.ask(
                ctx,
                fields={**base, "answer": answer, "target": list(variants[index])},
                validate=refined_text("answer"),
                question=query,
                target=_describe(required, variants[index]),
                others="\n".join(_describe(required, v) for v in others),
                answer=answer,
                problem=problem,
            )

        return await refine_until_checked(
            ctx,
            what=f"question {number} ({query!r}) variant {index + 1}",
            draft=draft,
            check=check,
            refine=refine,
        )

    answers = await gather_all([settle(i, d) for i, d in enumerate(drafts)])
    return {
        "query": query,
        "required_info": required,
        "answer_choices": [
            {
                "state": list(variant),
                "answer": answer,
                "type": "experience" if variant in seen else "random",
            }
            for variant, answer in zip(variants, answers, strict=True)
        ],
    }


async def run(ctx: StageContext, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    schema: dict[str, list[str]] = inputs["schema"]["state_schema"]
    states = [inputs["initial_state"], *(period["state"] for period in inputs["periods"])]
    minimum = int(ctx.knobs["min_state_variants"])
    jobs = []
    for number, question in enumerate(inputs["schema"]["questions"], start=1):
        required = list(question["required_info"])
        variants, seen = state_variants(
            ctx.rng("variants", number), required, schema, states, minimum
        )
        jobs.append(_answer_question(ctx, number, question, variants, seen, schema))
    return await gather_all(jobs)


STAGE = Stage(
    name="answers",
    needs=("schema", "initial_state", "periods"),
    knobs=("min_state_variants", "max_validation_errors", "max_refinements"),
    roles=("generator_low",),
    run=run,
)
