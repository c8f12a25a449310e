"""The generation knobs: the reference's config keys, its two presets, and a benchmark's overrides.

A benchmark generates with ``generate: {method: llm, preset: v1.base, <knob>: <value>, ...,
personas: {path: ...}}``. The preset (the reference's ``configs/env/v1.base.json`` or
``v1.extra.json``) gives every knob; the benchmark's keys override single knobs. The reference's
two model bindings (``llm_config_high_temp`` / ``llm_config_low_temp``) are not knobs here: they
are the ``generator_high`` / ``generator_low`` roles under ``models:``.

Two limits the reference hard-codes are knobs here: ``max_validation_errors`` (4 invalid replies
to one ask, then the stage fails) and ``max_refinements`` (20 refinements of an answer or query).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mnemoflow.errors import ConfigError

#: The reference's ``configs/env/v1.base.json`` (without the two model bindings).
V1_BASE: dict[str, Any] = {
    "start_date": "2020-10-01",
    "lang": "en",
    "num_user_profiles": 20,
    "num_questions": 10,
    "num_periods": 10,
    "num_months_per_period": 3,
    "num_states_per_question": 2,
    "num_choices_per_state": 3,
    "num_changes_per_period": 4,
    "max_changes_per_state": 3,
    "min_state_variants": 4,
    "num_rounds_init": 1,
    "num_rounds_update": 2,
    "exclude_ids": [],
    "seed": 42,
    "max_validation_errors": 4,
    "max_refinements": 20,
}

#: ``v1.extra.json``: a longer horizon, three states per question, longer sessions.
V1_EXTRA: dict[str, Any] = {
    **V1_BASE,
    "num_periods": 20,
    "num_states_per_question": 3,
    "num_rounds_init": 2,
    "num_rounds_update": 5,
}

PRESETS: dict[str, dict[str, Any]] = {"v1.base": V1_BASE, "v1.extra": V1_EXTRA}
DEFAULT_PRESET = "v1.base"

#: Keys of ``generate:`` that are not knobs.
SETTINGS = ("method", "preset", "personas")
METHODS = ("procedural", "llm")

#: Knobs that may be 0 (every other integer knob is at least 1).
_MAY_BE_ZERO = {"num_changes_per_period", "max_changes_per_state", "min_state_variants"}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _check(where: str, key: str, value: Any) -> Any:
    expected = V1_BASE[key]
    if isinstance(expected, bool) or isinstance(expected, int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"config {where}.{key}: an integer, got {value!r}")
        least = 0 if key in _MAY_BE_ZERO or key == "seed" else 1
        if key != "seed" and value < least:
            raise ConfigError(f"config {where}.{key}: at least {least}, got {value}")
        return value
    if isinstance(expected, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"config {where}.{key}: a list of persona ids, got {value!r}")
        return list(value)
    if not isinstance(value, str):
        raise ConfigError(f"config {where}.{key}: a string, got {value!r}")
    if key == "start_date" and not _DATE.match(value):
        raise ConfigError(f"config {where}.{key}: a date YYYY-MM-DD, got {value!r}")
    return value


def resolve(generate: Mapping[str, Any] | None, benchmark: str = "<name>") -> dict[str, Any]:
    """Every knob: the preset's values, then the benchmark's overrides, each checked.

    An unknown key or a wrong type is one line naming ``benchmarks.<name>.generate.<key>``.
    """
    where = f"benchmarks.{benchmark}.generate"
    generate = dict(generate or {})
    preset = generate.get("preset", DEFAULT_PRESET)
    if preset not in PRESETS:
        raise ConfigError(f"config {where}.preset: one of {sorted(PRESETS)}, got {preset!r}")
    knobs = dict(PRESETS[preset])
    for key, value in generate.items():
        if key in SETTINGS:
            continue
        if key not in V1_BASE:
            raise ConfigError(
                f"config {where}.{key}: unknown knob; knobs are {sorted(V1_BASE)} "
                f"(and {list(SETTINGS)})"
            )
        knobs[key] = _check(where, key, value)
    return knobs


def settings(generate: Mapping[str, Any], benchmark: str = "<name>") -> dict[str, Any]:
    """``generate:`` of an LLM benchmark in full: method, preset, personas and every knob (the
    workflow stores this back into the config, so every reader sees the preset's values)."""
    where = f"benchmarks.{benchmark}.generate"
    personas = generate.get("personas") or {}
    if not isinstance(personas, Mapping) or set(personas) - {"path"}:
        raise ConfigError(f"config {where}.personas: {{path: FILE}} or nothing, got {personas!r}")
    return {
        "method": "llm",
        "preset": generate.get("preset", DEFAULT_PRESET),
        "personas": dict(personas),
        **resolve(generate, benchmark),
    }


def method_of(spec: Mapping[str, Any]) -> str | None:
    """``llm``, ``procedural`` (the default of a ``generate:`` entry) or None (no generate)."""
    generate = spec.get("generate")
    if not generate:
        return None
    return str(generate.get("method", "procedural"))


def resolved_benchmarks(benchmarks: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every benchmark spec, an LLM-generated one's ``generate:`` in full (preset values +
    overrides, checked), so every reader (steps, schedule, job params) sees one set of knobs.
    A new mapping: the config it came from is left as the user wrote it."""
    return {
        name: {**spec, "generate": settings(spec["generate"], name)}
        if method_of(spec) == "llm"
        else spec
        for name, spec in (benchmarks or {}).items()
    }


def generated_with(benchmarks: Mapping[str, Any] | None, method: str) -> list[str]:
    """Names of the benchmarks whose environment ``method`` makes (``llm`` / ``procedural``)."""
    return [name for name, spec in (benchmarks or {}).items() if method_of(spec) == method]


#: The roles a generation job calls (the stages declare which of them each uses).
GENERATOR_ROLES = ("generator_high", "generator_low")
