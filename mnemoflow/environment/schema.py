"""Stage ``schema``: the questions' info types made into the environment's state variables.

Two asks, as in the reference: first the original types are renamed to self-explanatory names and
overlapping ones merged (``{refined: [original, ...]}``, every original exactly once); then every
refined type fed by more than one (question, choices) occurrence gets ``num_choices_per_state``
new choices that work for all its questions, in one call. A type with a single occurrence keeps
its choices. The questions are rewritten to the refined types.
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.environment.base import Call, InvalidReply, Stage, StageContext
from mnemoflow.environment.questions import check_choices, language_name, total_months

MERGE_PROMPT = """You tidy up the kinds of personal information (info types) that a user's advice
questions depend on.

The user's profile:
{profile}

The questions and the info types each needs:
{questions}

1. Give every info type a name that explains itself without its question (add the context the
   question gives).
2. Merge info types that mean the same thing or overlap into one type, so that the refined types
   exclude each other.
3. Map every original info type to exactly one refined type; leave none out.

Write all content in {language}, in the style of the original names. Reply with a JSON object
whose keys are the refined type names and whose values list the original type names mapped to
each, for example:
{{"professional_experience_years": ["current_experience_level", "experience_level_years"],
  "team_management_size": ["team_size"]}}"""
MERGE = Call("generator_low", "env-merge-types", MERGE_PROMPT)

UNIFY_PROMPT = """Some kinds of personal information were merged from several questions and now
need one shared set of choices.

The user's profile (on {start_date}):
{profile}

Each merged info type with the questions it serves and the choices it had there:
{groups}

For EVERY info type above, write exactly {num_choices} choices that:
1. serve all the questions listed for it;
2. exclude each other and do not overlap;
3. cover what the user may go through in the next {months} months, allowing several natural
   changes between choices over that time;
4. are specific enough that each leads to different, personalized advice.

Write all content in {language}. Reply with a JSON object whose keys are the info types and whose
values are the lists of choices, for example:
{{"professional_experience_years":
  ["junior_0_2_years", "mid_level_3_5_years", "senior_6_plus_years"]}}"""
UNIFY = Call("generator_low", "env-unify-choices", UNIFY_PROMPT)


def reference_questions(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The questions in the reference's shape (what the prompts show the model)."""
    return [
        {
            "question": q["query"],
            "required_info": [
                {"info_type": t, "info_choices": c} for t, c in q["info_types"].items()
            ],
        }
        for q in questions
    ]


def original_types(questions: list[dict[str, Any]]) -> list[str]:
    """The distinct info type names, in first-seen order."""
    return list(dict.fromkeys(t for q in questions for t in q["info_types"]))


def validate_merge(reply: Any, originals: list[str]) -> dict[str, list[str]]:
    """Every original type in exactly one non-empty group under a non-empty refined name."""
    if not isinstance(reply, dict) or not reply:
        raise InvalidReply("the reply must be a JSON object mapping refined types to lists")
    known, placed, merged = set(originals), {}, {}
    for refined, group in reply.items():
        if not refined.strip():
            raise InvalidReply("a refined type name is empty")
        if not isinstance(group, list) or not group or not all(isinstance(g, str) for g in group):
            raise InvalidReply(
                f"refined type {refined!r}: the value must be a non-empty list of names"
            )
        for original in group:
            if original not in known:
                raise InvalidReply(
                    f"refined type {refined!r}: {original!r} is not an original type"
                )
            if original in placed:
                raise InvalidReply(
                    f"original type {original!r} is mapped to both "
                    f"{placed[original]!r} and {refined!r}"
                )
            placed[original] = refined
        merged[refined.strip()] = list(group)
    if len(merged) != len(reply):
        raise InvalidReply("two refined type names differ only in surrounding spaces")
    missing = [o for o in originals if o not in placed]
    if missing:
        raise InvalidReply(f"original type {missing[0]!r} is not mapped to any refined type")
    return merged


def occurrences(
    questions: list[dict[str, Any]], merged: dict[str, list[str]]
) -> dict[str, list[dict[str, Any]]]:
    """Refined type -> the (question, choices) it gathers, in the reference's order."""
    by_original: dict[str, list[dict[str, Any]]] = {}
    for q in questions:
        for t, choices in q["info_types"].items():
            by_original.setdefault(t, []).append({"question": q["query"], "choices": choices})
    return {
        refined: [o for t in group for o in by_original[t]] for refined, group in merged.items()
    }


def validate_unified(reply: Any, conflicts: list[str], num_choices: int) -> dict[str, list[str]]:
    """New choices for every merged type (other keys are ignored, as the reference does)."""
    if not isinstance(reply, dict):
        raise InvalidReply("the reply must be a JSON object mapping info types to lists of choices")
    missing = [t for t in conflicts if t not in reply]
    if missing:
        raise InvalidReply(f"no choices given for info type {missing[0]!r}")
    return {t: check_choices(f"info type {t!r}", reply[t], num_choices) for t in conflicts}


async def run(ctx: StageContext, inputs: dict[str, Any]) -> dict[str, Any]:
    knobs = ctx.knobs
    profile = inputs["profile"]["formatted_str"]
    questions = inputs["questions"]
    n_choices = int(knobs["num_choices_per_state"])
    language = language_name(str(knobs.get("lang", "en")))
    originals = original_types(questions)
    shown = reference_questions(questions)
    merged = await MERGE.ask(
        ctx,
        fields={"types": originals},
        validate=lambda reply: validate_merge(reply, originals),
        profile=profile,
        questions=json.dumps(shown, ensure_ascii=False, indent=2),
        language=language,
    )
    gathered = occurrences(questions, merged)
    conflicts = [t for t, occ in gathered.items() if len(occ) > 1]
    unified: dict[str, list[str]] = {}
    if conflicts:
        groups = {t: gathered[t] for t in conflicts}
        unified = await UNIFY.ask(
            ctx,
            fields={"groups": groups, "merged": merged, "num_choices_per_state": n_choices},
            validate=lambda reply: validate_unified(reply, conflicts, n_choices),
            start_date=knobs["start_date"],
            profile=profile,
            groups=json.dumps(groups, ensure_ascii=False, indent=2),
            num_choices=n_choices,
            months=total_months(knobs),
            language=language,
        )
    state_schema = {t: unified.get(t, occ[0]["choices"]) for t, occ in gathered.items()}
    refined_of = {o: t for t, group in merged.items() for o in group}
    rewritten = [
        {"query": q["query"], "required_info": [refined_of[t] for t in q["info_types"]]}
        for q in questions
    ]
    return {"state_schema": state_schema, "questions": rewritten, "merged": merged}


STAGE = Stage(
    name="schema",
    needs=("profile", "questions"),
    knobs=(
        "start_date",
        "num_choices_per_state",
        "num_periods",
        "num_months_per_period",
        "lang",
        "max_validation_errors",
    ),
    roles=("generator_low",),
    run=run,
)
