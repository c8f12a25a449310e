"""Stage ``profile``: the persona as the reference's ``user_profile`` (the simulator's only view).

The basic fields are copied; a model extracts the full name from the persona texts and summarizes
what the basic fields do not already say (under :data:`MAX_SUMMARY_WORDS` words).
"""

from __future__ import annotations

import ast
from typing import Any

from mnemoflow.data.amemgym_procedural import PROFILE_KEYS, formatted_profile
from mnemoflow.environment.base import (
    Call,
    InvalidReply,
    Stage,
    StageContext,
    prompt_json,
)

MAX_SUMMARY_WORDS = 500

#: The profile's basic fields, copied or derived from the persona: every profile key but the two
#: the model writes (the name and the summary).
BASIC_KEYS = tuple(key for key in PROFILE_KEYS if key not in ("name", "complementary_info"))
#: The Nemotron persona texts the summary is written from (the reference's selection).
COMPLEMENTARY_KEYS = (
    "persona",
    "professional_persona",
    "sports_persona",
    "arts_persona",
    "travel_persona",
    "culinary_persona",
    "career_goals_and_ambitions",
    "skills_and_expertise",
    "hobbies_and_interests",
)

PROMPT = """You will do two things with the person described below.
1. Find their full name in the complementary information.
2. Write one concise paragraph (fewer than {max_words} words) summarizing the complementary
information. Keep only what the basic profile does not already tell.

Basic profile:
{basic}

Complementary information:
{complementary}

The summary will brief a role-player, so keep it professional, informative and short.
Reply with a JSON object with two keys: "name" (the full name) and "profile" (the paragraph)."""
PROFILE = Call("generator_low", "env-profile", PROMPT)


def _listing(value: Any) -> str:
    """A Nemotron ``*_list`` column (a Python list literal) as "a, b, c"; "N/A" when empty."""
    items = value
    if isinstance(value, str):
        try:
            items = ast.literal_eval(value) if value.strip() else []
        except (ValueError, SyntaxError):
            items = [value]
    text = ", ".join(str(item) for item in items)
    return text or "N/A"


def basic_profile(persona: dict[str, Any]) -> dict[str, Any]:
    """The basic fields: taken as they are from the shipped pool, derived from Nemotron columns."""
    if persona.get("source") == "pool":
        return {key: persona[key] for key in BASIC_KEYS}
    education = str(persona["education_level"])
    if persona.get("bachelors_field"):  # the reference appends " ()" when it is empty: not copied
        education += f" ({str(persona['bachelors_field']).replace('_', ' ')})"
    return {
        "age": persona["age"],
        "gender": persona["sex"],
        "marital_status": persona["marital_status"],
        "education_level": education,
        "occupation": persona["occupation"],
        "hobbies_and_interests": _listing(persona["hobbies_and_interests_list"]),
        "skills_and_expertise": _listing(persona["skills_and_expertise_list"]),
    }


def complementary(persona: dict[str, Any]) -> dict[str, Any]:
    """The texts the name and summary come from (the pool states its name and a short note)."""
    if persona.get("source") == "pool":
        return {"name": persona["name"], "persona": persona["complementary_info"]}
    return {key: persona[key] for key in COMPLEMENTARY_KEYS}


def validate_profile(reply: Any) -> dict[str, str]:
    """``{"name", "profile"}``: a non-empty name and a non-empty summary under the word limit."""
    if not isinstance(reply, dict):
        raise InvalidReply('the reply must be a JSON object with keys "name" and "profile"')
    for key in ("name", "profile"):
        if key not in reply:
            raise InvalidReply(f'the key "{key}" is missing')
        if not isinstance(reply[key], str) or not reply[key].strip():
            raise InvalidReply(f'"{key}" must be a non-empty string')
    words = len(reply["profile"].split())
    if words >= MAX_SUMMARY_WORDS:
        raise InvalidReply(
            f'"profile" has {words} words; it must have fewer than {MAX_SUMMARY_WORDS}'
        )
    return {"name": reply["name"].strip(), "profile": reply["profile"].strip()}


async def run(ctx: StageContext, inputs: dict[str, Any]) -> dict[str, Any]:
    persona = inputs["persona"]
    basic = basic_profile(persona)
    extra = complementary(persona)
    reply = await PROFILE.ask(
        ctx,
        fields={"basic": basic, "complementary": extra, "max_words": MAX_SUMMARY_WORDS},
        validate=validate_profile,
        max_words=MAX_SUMMARY_WORDS,
        basic="\n".join(f"{key}: {basic[key]}" for key in BASIC_KEYS),
        complementary=prompt_json(extra),
    )
    profile = {"uuid": persona["key"], "name": reply["name"], **basic}
    profile["complementary_info"] = reply["profile"]
    profile["formatted_str"] = formatted_profile(profile)
    return profile


STAGE = Stage(
    name="profile",
    needs=(),
    knobs=("max_validation_errors",),
    roles=("generator_low",),
    run=run,
)
