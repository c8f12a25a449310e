"""Stage ``questions``: the advice questions the user will keep asking over the whole horizon.

Each question depends on ``num_states_per_question`` kinds of personal information (info types),
each with ``num_choices_per_state`` mutually exclusive choices that would change the advice and
may change over the months to come. These become the environment's state variables.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.environment.base import Call, InvalidReply, Stage, StageContext

PROMPT = """You write realistic requests for suggestions or advice that a user puts to an AI
assistant.

The user's profile (on {start_date}):
{profile}

Write {num_questions} different questions this user could plausibly ask for advice, each one
something they might ask again at any time in the next {months} months, whatever their situation
is by then. Every question:
1. fits the profile and the user's long-term traits, in natural conversational words;
2. needs personal information to answer well: give exactly {num_states} pieces of it
   ("required_info") that change the advice a lot and could change, maybe several times, within
   the {months} months;
3. leads to actionable advice; together the questions mix topics specific to this user with
   general life topics and vary in scope.

For each piece of required information give:
- "info_type": what kind of information it is (e.g. experience_level, budget, team_size);
- "info_choices": exactly {num_choices} mutually exclusive, unambiguous choices that lead to
  different advice, that cover how the user may vary in the {months} months, and that a person
  could recognise from indirect context or everyday conversation.
Avoid information that changes all the time, that never changes, or that needs no asking; avoid
choices tied to a single moment.

Write all content in {language}; keep the field names in English.
Reply with a JSON object whose key "questions" holds the list, for example:
{{"questions": [{{"question": "How should I plan my career development?",
  "required_info": [
    {{"info_type": "current_experience_level",
      "info_choices": ["junior_0_2_years", "mid_level_3_5_years", "senior_6_plus_years"]}},
    {{"info_type": "family_status",
      "info_choices": ["single", "married_no_children", "married_with_children"]}}]}}]}}"""
QUESTIONS = Call("generator_high", "env-questions", PROMPT)


def language_name(lang: str) -> str:
    return "Chinese (中文)" if lang.lower() in ("chinese", "zh", "中文") else "English"


def total_months(knobs: Any) -> int:
    return int(knobs["num_periods"]) * int(knobs["num_months_per_period"])


def check_choices(where: str, choices: Any, count: int) -> list[str]:
    """``count`` distinct non-empty strings (shared by the questions and the unified schema)."""
    if not isinstance(choices, list) or not all(isinstance(c, str) and c.strip() for c in choices):
        raise InvalidReply(f"{where}: the choices must be a list of non-empty strings")
    if len(choices) != count:
        raise InvalidReply(f"{where}: {len(choices)} choices given, exactly {count} required")
    if len({c.strip().lower() for c in choices}) != count:
        raise InvalidReply(f"{where}: the choices must be distinct")
    return [c.strip() for c in choices]


def validate_questions(
    reply: Any, num_questions: int, num_states: int, num_choices: int
) -> list[dict[str, Any]]:
    """The contract's ``[{"query", "info_types": {type: [choice, ...]}}]`` from the reply."""
    items = reply.get("questions") if isinstance(reply, dict) else None
    if not isinstance(items, list):
        raise InvalidReply('the reply must be a JSON object whose key "questions" holds a list')
    if len(items) != num_questions:
        raise InvalidReply(f"{len(items)} questions given, exactly {num_questions} required")
    questions, seen = [], set()
    for number, item in enumerate(items, start=1):
        text = item.get("question") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise InvalidReply(f'question {number}: "question" must be a non-empty string')
        if text.strip().lower() in seen:
            raise InvalidReply(f"question {number} repeats an earlier question: {text.strip()!r}")
        seen.add(text.strip().lower())
        infos = item.get("required_info")
        if not isinstance(infos, list) or len(infos) != num_states:
            got = len(infos) if isinstance(infos, list) else "no"
            raise InvalidReply(
                f"question {number}: {got} required_info items given, exactly {num_states} required"
            )
        types: dict[str, list[str]] = {}
        for info in infos:
            name = info.get("info_type") if isinstance(info, dict) else None
            if not isinstance(name, str) or not name.strip():
                raise InvalidReply(f'question {number}: "info_type" must be a non-empty string')
            if name.strip() in types:
                raise InvalidReply(f"question {number}: info type {name.strip()!r} appears twice")
            where = f"question {number}, info type {name.strip()!r}"
            types[name.strip()] = check_choices(where, info.get("info_choices"), num_choices)
        questions.append({"query": text.strip(), "info_types": types})
    return questions


async def run(ctx: StageContext, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    knobs = ctx.knobs
    profile = inputs["profile"]
    n_questions = int(knobs["num_questions"])
    n_states = int(knobs["num_states_per_question"])
    n_choices = int(knobs["num_choices_per_state"])
    return await QUESTIONS.ask(
        ctx,
        fields={
            "user": ctx.user,
            "seed": ctx.seed,
            "num_questions": n_questions,
            "num_states_per_question": n_states,
            "num_choices_per_state": n_choices,
        },
        validate=lambda reply: validate_questions(reply, n_questions, n_states, n_choices),
        start_date=knobs["start_date"],
        profile=profile["formatted_str"],
        num_questions=n_questions,
        months=total_months(knobs),
        num_states=n_states,
        num_choices=n_choices,
        language=language_name(str(knobs.get("lang", "en"))),
    )


STAGE = Stage(
    name="questions",
    needs=("profile",),
    knobs=(
        "start_date",
        "num_questions",
        "num_states_per_question",
        "num_choices_per_state",
        "num_periods",
        "num_months_per_period",
        "lang",
        "seed",
        "max_validation_errors",
    ),
    roles=("generator_high",),
    run=run,
)
